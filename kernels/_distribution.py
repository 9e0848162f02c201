"""Which ``kernels`` is this, and where is the other one.

nki-dsl and Hugging Face ``kernels`` both use the import name ``kernels``. Installed nki-dsl does not ship
``kernels/__init__.py`` (only its first-party kernel packages under ``kernels/``), so ``import kernels`` in an
installed environment is HF's library when it is installed. This file belongs to a source checkout: when the
checkout is first on ``sys.path`` it shadows an installed HF ``kernels``, and says so once; HF-only names
(``kernelize``, ``LayerRepository``, ...) raise an AttributeError that says where HF's library is.
"""

from __future__ import annotations

import os
import sys
import warnings

DISTRIBUTION = "nki-dsl"
HF_DISTRIBUTION = "kernels"  # Hugging Face's distribution name on PyPI
# HF kernels 0.17's public names this facade does not have (they need torch layers or compiled builds).
HF_ONLY = frozenset({
    "kernelize", "use_kernel_forward_from_hub", "replace_kernel_forward_from_hub", "use_kernelized_func",
    "use_kernel_mapping", "register_kernel_mapping", "use_kernel_func_from_hub", "LayerRepository",
    "LocalLayerRepository", "LockedLayerRepository", "FuncRepository", "LocalFuncRepository", "LockedFuncRepository",
    "Device", "CUDAProperties", "ROCMProperties", "Mode", "KernelizeFallback", "Metadata", "RepoInfo",
    "VariantAccepted", "VariantRejected", "Benchmark", "get_kernel_variants", "get_kernel_dep", "get_loaded_kernels",
})  # fmt: skip


def other_distribution() -> str | None:
    """Where HF's ``kernels`` distribution is installed (its site directory), or None. A directory scan of
    ``sys.path`` for ``kernels-<version>.dist-info``: cheaper than importlib.metadata on every import."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(f"{HF_DISTRIBUTION}-") and name.endswith(".dist-info"):
                return os.path.join(entry or ".", name)
    return None


def _hint(other: str | None) -> str:
    if other is None:
        return "Hugging Face's kernels is not installed here (pip install kernels)"
    return (f"Hugging Face's kernels is installed ({other}) but this nki-dsl source checkout comes first on sys.path; "
            f"run outside the checkout to import it, and use `import hub_client` for nki-dsl's API there")  # fmt: skip


def warn_if_shadowing(init_file: str) -> None:
    other = other_distribution()
    if other is not None:
        warnings.warn(f"`import kernels` gave nki-dsl's kernels ({os.path.dirname(init_file)}), not Hugging Face's: "
                      f"{_hint(other)}", stacklevel=3)  # fmt: skip


def hf_only_attribute(name: str) -> AttributeError:
    if name in HF_ONLY:
        return AttributeError(
            f"kernels.{name} is Hugging Face kernels' API; this `kernels` is nki-dsl's ({DISTRIBUTION}). "
            f"{_hint(other_distribution())}"
        )
    return AttributeError(f"module 'kernels' (nki-dsl's) has no attribute {name!r}")
