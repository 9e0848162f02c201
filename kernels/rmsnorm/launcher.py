"""The user-facing RMSNorm: checks the shapes, picks the launch (one instance; the kernel loops over row tiles)
and runs it.

``plan_rmsnorm`` is what the Hub bundle builder traces for each declared specialisation; it passes the caller's
arrays to the kernel unchanged and in order, and ``epsilon`` as a compile-time constant, so a loader without this
Python can match a call to the published IR.
"""

from .kernel import rmsnorm_kernel


def plan_rmsnorm(x, g, epsilon=1e-6):
    if len(x.shape) != 2 or len(g.shape) != 1 or g.shape[0] != x.shape[1]:
        raise ValueError(f"rmsnorm takes x (rows, n) and g (n,), got {tuple(x.shape)} and {tuple(g.shape)}")
    return rmsnorm_kernel, (x, g), {"epsilon": float(epsilon)}


def rmsnorm(x, g, epsilon=1e-6, *, backend: str = "numpy"):
    """RMSNorm of each row of ``x`` scaled by ``g``."""
    launch, args, kwargs = plan_rmsnorm(x, g, epsilon)
    return launch(*args, backend=backend, **kwargs)
