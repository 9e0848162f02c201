"""The user-facing LayerNorm: checks the shapes, passes epsilon as a compile-time constant, runs.

``plan_layernorm`` is what the Hub bundle builder traces for each declared specialisation (arrays unchanged and
in order, so a loader without this Python can match a call to the published IR)."""

from .kernel import layernorm_kernel

MAX_COLUMNS = 16384  # one row tile in SBUF several times over (input, normalised, scaled, shifted) with headroom


def plan_layernorm(x, gamma, beta, epsilon=1e-6):
    if len(x.shape) != 2 or tuple(gamma.shape) != (x.shape[1],) or tuple(beta.shape) != (x.shape[1],):
        raise ValueError(f"layernorm takes x (rows, n), gamma (n,), beta (n,); got {tuple(x.shape)}, "
                         f"{tuple(gamma.shape)}, {tuple(beta.shape)}")  # fmt: skip
    if x.shape[1] > MAX_COLUMNS:
        raise ValueError(f"layernorm: at most {MAX_COLUMNS} columns per row, got {x.shape[1]}")
    return layernorm_kernel, (x, gamma, beta), {"epsilon": float(epsilon)}


def layernorm(x, gamma, beta, epsilon=1e-6, *, backend: str = "numpy"):
    """LayerNorm of each row of ``x`` with per-column ``gamma`` and ``beta``."""
    launch, args, kwargs = plan_layernorm(x, gamma, beta, epsilon)
    return launch(*args, backend=backend, **kwargs)
