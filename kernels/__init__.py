"""kernels (nki-dsl's): load NKI kernels published on a Hugging Face Hub (or the self-hosted registry), safely.

    import kernels
    softmax = kernels.get_kernel("acme/softmax", version=1)   # resolve, download, verify, load
    y = softmax.softmax(x)                                    # the verified IR, on nki.default_backend(x)
    print(softmax.info)                                       # repo, version, commit, digest, entry points

This is the ``kernels`` package of an nki-dsl source checkout; Hugging Face's ``kernels`` library has the same import
name. The same API is always ``hub_client`` (``import hub_client as kernels``), a name HF does not own: installed
nki-dsl ships ``hub_client`` and the first-party kernel packages, not this file, so it never replaces HF's
``kernels/__init__.py``. ``kernels.__distribution__`` says which one was imported; ``kernels.other_distribution()``
where the other one is, if installed. See the README's "Beside Hugging Face kernels".

By default only the published IR specialisations run (parsed and verified; no remote Python executes); pass
``trust_remote_code=True`` (or a list of trusted repo ids) to import the published Python and run any shape; a
publisher whose Hub organisation is marked ``trustedKernelPublisher`` is trusted without it. The first fetch of a
release records its commit and manifest digest; a release later found rewritten is refused
(``ReleaseChangedError``). Every Hub failure is a ``KernelHubError`` naming the repo, the revision and what to do.
``kernels/vit_attn``, ``kernels/linear``, ``kernels/layernorm``, ``kernels/softmax``, ``kernels/rmsnorm`` and
``kernels/matmul`` are first-party kernel packages published by ``nki-kernels publish``; ``kernels/eager`` is the
eager baseline set. Tests, tutorials and benchmarks import kernels from these packages, never a copy.
"""

from hub_client.api import get_kernel, get_local_kernel, get_locked_kernel, has_kernel, install_kernel, load_kernel
from hub_client.errors import (
    AuthenticationError,
    BundleError,
    DigestMismatchError,
    DownloadError,
    HubRequestError,
    HubUnreachableError,
    IRRejectedError,
    KernelHubError,
    LockError,
    NoSpecialisationError,
    NotFoundError,
    OfflineError,
    PublishRefusedError,
    ReleaseChangedError,
    UnsafePathError,
)
from hub_client.loader import KernelInfo, LoadedKernel

from . import _distribution
from ._distribution import hf_only_attribute, other_distribution, warn_if_shadowing

__distribution__ = _distribution.DISTRIBUTION

__all__ = [
    "get_kernel", "has_kernel", "get_local_kernel", "get_locked_kernel", "load_kernel", "install_kernel",
    "LoadedKernel", "KernelInfo",
    "KernelHubError", "BundleError", "UnsafePathError", "DigestMismatchError", "DownloadError", "IRRejectedError",
    "NotFoundError", "OfflineError", "NoSpecialisationError", "PublishRefusedError", "LockError",
    "ReleaseChangedError", "HubRequestError", "AuthenticationError", "HubUnreachableError", "other_distribution",
]  # fmt: skip

warn_if_shadowing(__file__)


def __getattr__(name: str):
    raise hf_only_attribute(name)
