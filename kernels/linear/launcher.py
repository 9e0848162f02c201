"""The user-facing linear: checks shapes and the epilogue, runs.

``plan_linear`` is what the Hub bundle builder traces for each declared specialisation: the arrays the epilogue
uses are passed to the kernel unchanged and in order (x, w, then b, then residual), the epilogue as a
compile-time constant."""

from .kernel import EPILOGUES, linear_kernel

MAX_K = 8192  # the weight stays in SBUF: K / 128 tiles of N columns per partition
MAX_N = 8192


def plan_linear(x, w, b=None, residual=None, epilogue=None):
    if epilogue is None:
        epilogue = "residual" if residual is not None else ("bias" if b is not None else "none")
    if epilogue not in EPILOGUES:
        raise ValueError(f"linear: epilogue must be one of {', '.join(EPILOGUES)}, got {epilogue!r}")
    if len(x.shape) != 2 or len(w.shape) != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"linear takes x (M, K) and w (K, N), got {tuple(x.shape)} and {tuple(w.shape)}")
    m, k = x.shape
    n = w.shape[1]
    if k > MAX_K or n > MAX_N:
        raise ValueError(f"linear: K {k} and N {n} must be at most {MAX_K} and {MAX_N} (the weight stays in SBUF)")
    if epilogue != "none" and (b is None or tuple(b.shape) != (n,)):
        raise ValueError(f"linear: epilogue {epilogue!r} needs a bias of shape ({n},)")
    if epilogue == "residual" and (residual is None or tuple(residual.shape) != (m, n)):
        raise ValueError(f"linear: the residual must have the output's shape ({m}, {n})")
    args = (x, w) + ((b,) if epilogue != "none" else ()) + ((residual,) if epilogue == "residual" else ())
    return linear_kernel, args, {"epilogue": epilogue}


def linear(x, w, b=None, residual=None, epilogue=None, *, backend: str = "numpy"):
    """``x @ w`` (+ b, then GELU or + residual)."""
    launch, args, kwargs = plan_linear(x, w, b, residual, epilogue)
    return launch(*args, backend=backend, **kwargs)
