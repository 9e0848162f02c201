"""kernels: load NKI kernels published on a Hugging Face Hub (or the self-hosted registry), safely.

    import kernels
    softmax = kernels.get_kernel("acme/softmax", version=1)   # resolve, download, verify, load
    y = softmax.softmax(x)                                    # the verified IR, on the NumPy reference
    print(softmax.info)                                       # repo, version, commit, digest, entry points

By default only the published IR specialisations run (parsed and verified; no remote Python executes); pass
``trust_remote_code=True`` (or a list of trusted repo ids) to import the published Python and run any shape; a
publisher whose Hub organisation is marked ``trustedKernelPublisher`` is trusted without it. The first fetch of a
release records its commit and manifest digest; a release later found rewritten is refused
(``ReleaseChangedError``). Every Hub failure is a ``KernelHubError`` naming the repo, the revision and what to do.
``kernels/vit_attn``, ``kernels/linear``, ``kernels/layernorm``, ``kernels/softmax``, ``kernels/rmsnorm`` and
``kernels/matmul`` are first-party kernel packages published by ``kernels publish``; ``kernels/eager`` is the eager
baseline set. Tests, tutorials and benchmarks import kernels from these packages, never a copy.
"""

from hub_client.api import get_kernel, get_local_kernel, get_locked_kernel, has_kernel, load_kernel
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

__all__ = [
    "get_kernel", "has_kernel", "get_local_kernel", "get_locked_kernel", "load_kernel", "LoadedKernel", "KernelInfo",
    "KernelHubError", "BundleError", "UnsafePathError", "DigestMismatchError", "DownloadError", "IRRejectedError",
    "NotFoundError", "OfflineError", "NoSpecialisationError", "PublishRefusedError", "LockError",
    "ReleaseChangedError", "HubRequestError", "AuthenticationError", "HubUnreachableError",
]  # fmt: skip
