"""``backend=`` as HF kernels users write it, mapped onto this project's backends.

HF kernels names the device a build variant runs on (``cpu``, ``cuda``, ``neuron``, ...); this project runs
verified IR on a backend of nki_dsl (``numpy``, ``jax``, ``simulator``). Both spellings are accepted:

- ``cpu`` -> ``numpy``: the NumPy reference, the oracle every other backend is tested against;
- ``neuron`` -> ``simulator``: the engine simulator of a NeuronCore (the closest this project has to the device; a
  real Trainium machine runs the release's ``build/torch-neuron/`` variant through HF kernels instead);
- this project's own names pass through unchanged.

The other HF devices (CUDA, ROCm, Metal, XPU, TPU, Ascend NPU) select compiled builds this project does not make;
asking for one is an error that says what to use instead, not a silent fallback to the CPU.
"""

from __future__ import annotations

from hub_client import execute

HF_TO_NKI = {"cpu": "numpy", "neuron": "simulator"}
HF_UNSUPPORTED = {"cuda", "rocm", "metal", "xpu", "tpu", "npu", "cann"}


def project_backend(backend: str | None) -> str | None:
    """This project's backend name for ``backend`` (None stays None: the default backend)."""
    if backend is None:
        return None
    available = execute.available_backends()
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string such as 'cpu' or 'numpy', got {type(backend).__name__}")
    if backend in available:
        return backend
    mapped = HF_TO_NKI.get(backend)
    if mapped is not None:
        if mapped not in available:
            raise ValueError(f"backend {backend!r} maps to this project's {mapped!r}, which this nki_dsl lacks; "
                             f"available: {', '.join(available)}")  # fmt: skip
        return mapped
    hf = ", ".join(f"{k!r} ({v})" for k, v in HF_TO_NKI.items())
    if backend in HF_UNSUPPORTED:
        raise ValueError(
            f"backend {backend!r}: HF kernels uses it to pick a compiled {backend} build, which kernels published by "
            f"nki-dsl do not have; here a kernel runs its verified IR on {', '.join(available)} (HF names {hf}). On "
            f"a Trainium machine, HF kernels loads the release's build/torch-neuron/ variant"
        )
    raise ValueError(f"unknown backend {backend!r}; available: {', '.join(available)}, or the HF names {hf}")
