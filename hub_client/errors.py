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


class HubRequestError(KernelHubError):
    """A request the Hub refused or that failed for another reason than the ones below; the message names the repo,
    the revision, the HTTP status with the server's own message, and what to do."""

    def __init__(self, message: str, *, repo_id: str | None = None, revision: str | None = None,
                 status: int | None = None):  # fmt: skip
        self.repo_id, self.revision, self.status = repo_id, revision, status
        super().__init__(message)


class AuthenticationError(HubRequestError):
    """The Hub refused the token (401: wrong, expired or missing) or its permissions (403)."""


class HubUnreachableError(HubRequestError):
    """No answer from the Hub at all (connection refused, DNS, timeout) where the cache cannot stand in."""


class NotFoundError(KernelHubError):
    """An unknown repo, version or revision; the message lists what exists."""


class OfflineError(KernelHubError):
    """Offline (HF_HUB_OFFLINE or a cache-only call) and the cache does not have what was asked for."""


class DownloadError(KernelHubError):
    """The connection failed or was cut while downloading; huggingface_hub keeps partial data only in
    ``.incomplete`` files, so nothing truncated is in the cache and a retry resumes or starts afresh."""


class NoSpecialisationError(KernelHubError):
    """A call whose shapes have no published IR specialisation, without trust in the kernel's Python."""


class ScalarArgumentError(KernelHubError, TypeError):
    """A runtime scalar keyword (``epsilon=``) whose value is not a number of the scalar's dtype."""


class PublishRefusedError(KernelHubError):
    """A publish that would overwrite or shadow a release, or that lost a race to another publisher; the repo is
    left unchanged by it."""


class ReleaseChangedError(KernelHubError):
    """A release tag that now names another commit or manifest than when this cache first fetched it (trust on
    first use: releases are immutable, so a moved tag means a rewritten release or a lying server)."""

    def __init__(self, message: str, *, repo_id: str, tag: str, recorded: dict, found: dict):
        self.repo_id, self.tag, self.recorded, self.found = repo_id, tag, recorded, found
        super().__init__(message)


class LockError(KernelHubError):
    """A missing or inconsistent ``kernels.lock`` / ``[tool.kernels.dependencies]``."""
