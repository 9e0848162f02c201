"""The errors a kernel user can see. Each names what was asked for and what exists, so the fix is obvious."""

from __future__ import annotations


class KernelHubError(Exception):
    """Base class of every hub_client error."""


class BundleError(KernelHubError):
    """A kernel package or bundle is malformed (bad manifest, unsafe path, missing file)."""


class UnsafePathError(BundleError):
    """A bundle path escapes the bundle (``..``, absolute, backslash, NUL)."""


class DigestMismatchError(KernelHubError):
    """A downloaded or cached file does not hash to the digest its manifest (or lock file) records."""

    def __init__(self, path: str, expected: str, actual: str, where: str, removed: bool = True):
        self.path, self.expected, self.actual = path, expected, actual
        fate = "the bad copy was removed from the cache" if removed else "the file was left as it is"
        super().__init__(
            f"{where}: file {path!r} has sha256 {actual} but the manifest records {expected}; {fate}, "
            f"nothing from it was used"
        )


class IRRejectedError(KernelHubError):
    """Published IR text that does not parse or fails verification."""


class NotFoundError(KernelHubError):
    """An unknown repo, version or revision; the message lists what exists."""


class OfflineError(KernelHubError):
    """Offline (HF_HUB_OFFLINE or a cache-only call) and the cache does not have what was asked for."""


class DownloadError(KernelHubError):
    """The connection failed or was cut while downloading; huggingface_hub keeps partial data only in
    ``.incomplete`` files, so nothing truncated is in the cache and a retry resumes or starts afresh."""


class NoSpecialisationError(KernelHubError):
    """A call whose shapes have no published IR specialisation, without trust in the kernel's Python."""


class PublishRefusedError(KernelHubError):
    """A publish that would overwrite or shadow a release; the repo is left unchanged."""


class LockError(KernelHubError):
    """A missing or inconsistent ``kernels.lock`` / ``[tool.kernels.dependencies]``."""
