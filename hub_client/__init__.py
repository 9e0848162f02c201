"""hub_client: sharing NKI kernels through a Hugging Face Hub (or a self-hosted registry that speaks its API).

The public API is importable from here under a name Hugging Face ``kernels`` does not own, so it works beside it::

    import hub_client as kernels
    softmax = kernels.get_kernel("acme/softmax", version=1)

The same names are the ``kernels`` facade of a source checkout (``kernels/__init__.py``), and the command line is
``nki-kernels`` (``hub_client.cli``); see the README's "Beside Hugging Face kernels". Modules, one job each:

- ``package``: reads a kernel package's ``kernel.toml``.
- ``bundle``: turns a package into a deterministic bundle (source, verified IR, test vectors, manifest).
- ``manifest``: the bundle manifest, its schema and path checks.
- ``publish``: one commit on branch ``v<major>``, tagged ``v<major>.<minor>.<patch>`` (``resume``: tag a commit
  a stopped publish left).
- ``resolve``: version or revision to a commit, online from the Hub's refs, offline from the recorded refs.
- ``fetch``: downloads into the standard HF cache and checks every digest before a byte is used.
- ``releases``: trust on first use: the first fetch of a release records (tag, commit, manifest digest); a release
  later found rewritten is refused.
- ``hub_errors``: huggingface_hub's HTTP and connection failures, turned into ``KernelHubError`` subclasses.
- ``loader`` / ``entry``: turns a verified snapshot into a loaded kernel (IR only, or trusted Python).
- ``lockfile``: ``kernels.lock`` (HF's format) and its digest sidecar; ``backends``: HF backend names mapped onto
  nki_dsl's; ``hf_variant``: the ``build/torch-neuron/`` variant HF kernels loads on a Trainium machine.
- ``cli``: the ``nki-kernels`` command; ``server``: the self-hosted registry.
"""

# The public API, deferred (PEP 562): ``import hub_client.lockfile`` (the command line, the registry) does not pay for
# loading nki_dsl; ``hub_client.get_kernel`` does, once.
_API = ("get_kernel", "has_kernel", "get_local_kernel", "get_locked_kernel", "load_kernel", "install_kernel")
_LOADER = ("LoadedKernel", "KernelInfo")
_ERRORS = (
    "KernelHubError", "BundleError", "UnsafePathError", "DigestMismatchError", "DownloadError", "IRRejectedError",
    "NotFoundError", "OfflineError", "NoSpecialisationError", "PublishRefusedError", "LockError",
    "ReleaseChangedError", "HubRequestError", "AuthenticationError", "HubUnreachableError",
)  # fmt: skip
__all__ = [*_API, *_LOADER, *_ERRORS]


def __getattr__(name: str):
    import importlib

    for module, names in (("api", _API), ("loader", _LOADER), ("errors", _ERRORS)):
        if name in names:
            return getattr(importlib.import_module(f"hub_client.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
