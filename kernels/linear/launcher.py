"""The user-facing linear: checks shapes and the epilogue, runs.

``plan_linear`` is what the Hub bundle builder traces for each declared specialisation: the arrays the epilogue
uses are passed to the kernel unchanged and in order (x, w, then b, then residual), the epilogue as a
compile-time constant."""

import math

import numpy as np

import nki_dsl as nki

from .kernel import EPILOGUES, _static, layernorm_linear_kernel, linear_kernel

MAX_K = 8192  # the weight stays in SBUF: K / 128 tiles of N columns per partition
MAX_N = 8192
# The float dtypes the kernels and their families are written for (the Tensor engine's; integer inputs are refused
# rather than run); every array of a call in one of them (kernels/linear/neuron/linear.py checks the same)
DTYPES = ("float32", "bfloat16", "float16")


def check_dtypes(op, arrays, allowed=DTYPES):
    """Every array of ``arrays`` (None: left out) of one dtype among ``allowed``."""
    names = [np.dtype(a.dtype).name for a in arrays if a is not None]
    if names[0] not in allowed or any(n != names[0] for n in names):
        raise ValueError(f"{op}: the arrays must share a dtype among {', '.join(allowed)}, got {', '.join(names)}")


def plan_linear(x, w, b=None, residual=None, epilogue=None):
    args, epilogue = _linear_args(x, w, b, residual, epilogue)
    _check_box("linear", x, w, epilogue)
    return linear_kernel, args, {"epilogue": epilogue}


def _check_box(op, x, w, epilogue):
    """Refuse a concrete call no width family serves (``widths.width_boxes``: K and N where the weight, resident in
    SBUF, fits beside the row tiles and results), naming the limit, before the kernel is traced: the launcher so takes
    what the published families cover, as the fused launchers do (``_check_fits``). Inside the boxes linear's
    concrete kernel fits SBUF too (``kernel.fits_resident``: its own schedule, or the families' one where that may
    not fit; tests/kernels/test_linear_runs_wherever_a_width_family_does.py); layernorm_linear's has no such
    fallback yet, and near the top of an fp32 box (385 x 1152 x 5120: 271.6 KiB) its own schedule does not fit."""
    from .widths import width_boxes

    (k, n), dtype = (x.shape[1], w.shape[1]), np.dtype(x.dtype)
    if None in (_static(k), _static(n)):  # a shape family: its proof checks its whole range
        return
    if not any(k0 <= k <= k1 and n0 <= n <= n1 for (k0, k1), (n0, n1) in
               width_boxes(dtype.itemsize, op == "layernorm_linear", epilogue)):  # fmt: skip
        raise ValueError(f"{op}: K {k} and N {n} in {dtype.name} with epilogue {epilogue!r} do not fit SBUF: the "
                         f"weight stays resident beside the row tiles and results, more than a trn2 partition's 224 "
                         f"KiB (reference/nki.md §1.1; the width families' boxes, kernels/linear/widths.py); split N "
                         f"over two launches")  # fmt: skip


def _linear_args(x, w, b, residual, epilogue):
    """The kernel's arrays and the epilogue of a linear call, its shapes and dtypes checked."""
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
    check_dtypes("linear", [x, w] + [b] * (epilogue != "none") + [residual] * (epilogue == "residual"))
    return (x, w) + ((b,) if epilogue != "none" else ()) + ((residual,) if epilogue == "residual" else ()), epilogue


def _widths_family(*dims) -> bool:
    """Whether a shape family's widths are symbols (``widths``, ``fused_widths``): its LayerNorm epsilon (and
    layernorm_qkv's scale) then come at run time (``runtime_scalar``), so one IR serves every value."""
    return any(_static(d) is None for d in dims)


def runtime_scalar(value):
    """``value`` as a kernel's runtime scalar: a one-element float32 array, passed after the arrays (what the
    manifest's ``scalars = { name = "float32" }`` declares; read by ``widths.scalar_column``)."""
    return np.full((1,), value, np.float32)


def linear(x, w, b=None, residual=None, epilogue=None, *, backend: str | None = None):
    """``x @ w`` (+ b, then GELU or + residual)."""
    launch, args, kwargs = plan_linear(x, w, b, residual, epilogue)
    return launch(*args, backend=backend, **kwargs)


def _check_fits(op, x, k, n, h=0):
    """Refuse a fused kernel's shape that no width family serves (``fused_widths.box_of``: both weights resident in
    SBUF, or for the MLPs streamed by hidden blocks, ``fused_streamed``), so that the launcher accepts what the
    published families cover; a shape family's own dimensions are checked by the proof."""
    from .fused_streamed import MAX_N as STREAMED_N
    from .fused_widths import DTYPES, box_of

    dtype = np.dtype(x.dtype).name
    if dtype not in DTYPES[op]:
        raise ValueError(f"{op}: dtype {dtype} is not supported (one of {', '.join(DTYPES[op])})")
    dims = [_static(d) for d in (k, n, h)]
    if None not in dims and box_of(op, np.dtype(x.dtype).itemsize, *dims) is None:
        hidden = f", H {h}" if h else ""
        streamed = (f"; nor streamed by hidden blocks, which takes N up to {STREAMED_N} (its accumulators in PSUM) "
                    f"and K as far as x^T fits beside the weight blocks" if h else "")  # fmt: skip
        raise ValueError(f"{op}: K {k}{hidden} and N {n} do not fit SBUF in {dtype}: not with the weights resident "
                         f"(with the on-chip buffers they need more than a trn2 partition's 224 KiB, reference/nki.md "
                         f"§1.1){streamed} (the families' boxes, kernels/linear/fused_widths.py); use two linear "
                         f"launches")  # fmt: skip


def _schedule(schedule, choices=("auto", "resident", "tiled", "streamed")):
    """The kernel's keyword for ``schedule`` (``fused_mlp.schedule_of``; "auto" is the kernel's default)."""
    if schedule not in choices:
        raise ValueError(f"schedule must be one of {', '.join(map(repr, choices))}, got {schedule!r}")
    return {} if schedule == "auto" else {"schedule": schedule}


# The SBUF the trusted launches are checked against: the Hub's target, for which the families are sized
FIT_TARGET = "trn2"


def _fitting(launch, args, kwargs, resident: bool) -> dict:
    """``kwargs`` with the schedule that fits SBUF for a concrete call the kernel would run "resident" (token blocks
    of 512: h^T or q^T [features, 512] beside both weights): at the top of a resident family's box that can need
    more than a partition's 224 KiB where the family's own schedule (one 128-token tile at a time, "tiled") fits, so
    there the call runs "tiled", as an untrusted call of the same shape does. Decided by tracing and verifying the
    kernel (cached: the launch that follows reuses the trace); a shape family (rows symbolic: the row-count families
    at fixed widths) runs its kernel as declared."""
    if not resident or any(_static(d) is None for a in args if hasattr(a, "shape") for d in a.shape):
        return kwargs
    try:
        nki.trace(launch, *args, target=FIT_TARGET, **kwargs)
    except nki.NkiVerificationError as e:
        if any(d.rule != "sbuf-capacity" for d in e.diagnostics):
            raise
        return kwargs | {"schedule": "tiled"}
    return kwargs


def _resident(entry, x, k, h, n, schedule) -> bool:
    """Whether the kernel runs a concrete call "resident" (``fused_mlp.schedule_of``)."""
    from .fused_mlp import schedule_of

    if schedule != "auto" or _widths_family(k, h, n):
        return False
    return schedule_of(entry, np.dtype(x.dtype).itemsize, k, h, n) == "resident"


def plan_mlp(x, w1, b1, w2, b2, residual, schedule="auto"):
    """``residual + gelu(x @ w1 + b1) @ w2 + b2`` in one launch (``mlp.mlp_kernel``). ``schedule``: "auto" (both
    weights resident in SBUF where they fit, else streamed by hidden blocks), or either forced (a family's)."""
    from .fused_mlp import mlp_kernel

    m, k = x.shape
    if tuple(w1.shape[:1]) != (k,) or w2.shape[0] != w1.shape[1] or tuple(residual.shape) != (m, w2.shape[1]):
        raise ValueError(f"mlp takes x (M, K), w1 (K, H), w2 (H, N), residual (M, N); got {tuple(x.shape)}, "
                         f"{tuple(w1.shape)}, {tuple(w2.shape)}, {tuple(residual.shape)}")  # fmt: skip
    if tuple(b1.shape) != (w1.shape[1],) or tuple(b2.shape) != (w2.shape[1],):
        raise ValueError("mlp: b1 must be (H,) and b2 (N,)")
    check_dtypes("mlp", (x, w1, b1, w2, b2, residual))
    if np.dtype(x.dtype).name not in ("bfloat16", "float16"):
        raise ValueError(f"mlp: dtype {np.dtype(x.dtype).name} is not supported; x^T comes in by DMA transpose, which "
                         f"takes 2-byte dtypes only (use bfloat16 or float16, or two linear launches)")  # fmt: skip
    if k > MAX_K or w1.shape[1] > MAX_N or w2.shape[1] > MAX_N:
        raise ValueError(f"mlp: K, H and N must be at most {MAX_K} (the widths the families cover)")
    _check_fits("mlp", x, k, w2.shape[1], w1.shape[1])
    args, h, n = (x, w1, b1, w2, b2, residual), w1.shape[1], w2.shape[1]
    return mlp_kernel, args, _fitting(mlp_kernel, args, _schedule(schedule), _resident("mlp", x, k, h, n, schedule))


def mlp(x, w1, b1, w2, b2, residual, *, backend: str | None = None):
    launch, args, kwargs = plan_mlp(x, w1, b1, w2, b2, residual)
    return launch(*args, backend=backend, **kwargs)


def _check_norm(x, gamma, beta, op):
    k = x.shape[1]
    if tuple(gamma.shape) != (k,) or tuple(beta.shape) != (k,):
        raise ValueError(f"{op}: gamma and beta must be ({k},) (one per feature of x), got {tuple(gamma.shape)} and "
                         f"{tuple(beta.shape)}")  # fmt: skip


def plan_layernorm_linear(x, gamma, beta, w, b=None, epsilon=1e-6, epilogue=None):
    """``LN(x) @ w`` (+ b, then GELU): the LayerNorm as the linear's prologue, in one launch."""
    if epilogue is None:
        epilogue = "bias" if b is not None else "none"
    if epilogue == "residual":
        raise ValueError("layernorm_linear: no residual epilogue (a pre-norm block adds the residual after the "
                         "projection that follows; use linear with epilogue='residual' there)")  # fmt: skip
    args, epilogue = _linear_args(x, w, b, None, epilogue)
    consts = {"epilogue": epilogue}
    _check_norm(x, gamma, beta, "layernorm_linear")
    check_dtypes("layernorm_linear", (x, gamma, beta))
    if _widths_family(x.shape[1], w.shape[1]):  # epsilon at run time, after the arrays (b None: no bias array)
        return layernorm_linear_kernel, (x, gamma, beta, w, args[2] if len(args) > 2 else None,
                                         runtime_scalar(epsilon)), consts  # fmt: skip
    args, consts = (x, gamma, beta) + args[1:], dict(consts, epsilon=float(epsilon))
    _check_box("layernorm_linear", x, w, epilogue)
    return layernorm_linear_kernel, args, consts


def layernorm_linear(x, gamma, beta, w, b=None, epsilon=1e-6, epilogue=None, *, backend: str | None = None):
    """``LN(x) @ w`` (+ b, then GELU), the normalised rows never in HBM."""
    launch, args, kwargs = plan_layernorm_linear(x, gamma, beta, w, b, epsilon, epilogue)
    return launch(*args, backend=backend, **kwargs)


def plan_layernorm_mlp(x, gamma, beta, w1, b1, w2, b2, epsilon=1e-6, schedule="auto"):
    """``x + gelu(LN(x) @ w1 + b1) @ w2 + b2`` in one launch (``fused_mlp.layernorm_mlp_kernel``); the input is
    also the residual, so the output has x's width (w2 maps back to it)."""
    from .fused_mlp import layernorm_mlp_kernel

    if len(x.shape) != 2 or len(w1.shape) != 2 or len(w2.shape) != 2:
        raise ValueError("layernorm_mlp takes x (M, K), w1 (K, H), w2 (H, K)")
    m, k = x.shape
    if w1.shape[0] != k or w2.shape[0] != w1.shape[1] or w2.shape[1] != k:
        raise ValueError(f"layernorm_mlp takes x (M, K), w1 (K, H), w2 (H, K) (the residual is x); got "
                         f"{tuple(x.shape)}, {tuple(w1.shape)}, {tuple(w2.shape)}")  # fmt: skip
    if tuple(b1.shape) != (w1.shape[1],) or tuple(b2.shape) != (k,):
        raise ValueError("layernorm_mlp: b1 must be (H,) and b2 (K,)")
    _check_norm(x, gamma, beta, "layernorm_mlp")
    check_dtypes("layernorm_mlp", (x, gamma, beta, w1, b1, w2, b2))
    if k > MAX_K or w1.shape[1] > MAX_N:
        raise ValueError(f"layernorm_mlp: K and H must be at most {MAX_K} (the widths the families cover)")
    _check_fits("layernorm_mlp", x, k, k, w1.shape[1])
    arrays = (x, gamma, beta, w1, b1, w2, b2)
    if _widths_family(k, w1.shape[1]):  # epsilon at run time, after the arrays
        return layernorm_mlp_kernel, arrays + (runtime_scalar(epsilon),), _schedule(schedule)
    kwargs = {"epsilon": float(epsilon)} | _schedule(schedule)
    return layernorm_mlp_kernel, arrays, _fitting(layernorm_mlp_kernel, arrays, kwargs,
                                                  _resident("layernorm_mlp", x, k, w1.shape[1], k, schedule))


def layernorm_mlp(x, gamma, beta, w1, b1, w2, b2, epsilon=1e-6, *, backend: str | None = None):
    launch, args, kwargs = plan_layernorm_mlp(x, gamma, beta, w1, b1, w2, b2, epsilon)
    return launch(*args, backend=backend, **kwargs)


DEFAULT_SCALE = 64**-0.5  # layernorm_qkv's softmax scale when neither it nor num_heads is given: head_dim 64's


def plan_layernorm_qkv(x, gamma, beta, w, b, scale=DEFAULT_SCALE, epsilon=1e-6, num_heads=None, schedule="auto"):
    """LayerNorm + the fused QKV projection in vit-attn's split layout (``qkv_split``): returns ``(qkT, v)`` with
    ``qkT`` (2 * hd, M) = [q^T; (scale * k)^T] and ``v`` (M, hd). ``num_heads`` given, the scale is head_dim ** -0.5
    (and a ``scale`` other than the default must agree with it); else ``scale``, by default head_dim 64's 0.125 (the
    default a Hub call without the keyword gets: the plan's signature is the manifest's runtime scalar's default;
    ``layernorm_qkv`` itself asks for one of them). ``schedule``: "auto", or "resident" / "tiled" forced
    (``qkv_split.layernorm_qkv_kernel``)."""
    from .qkv_split import layernorm_qkv_kernel

    if len(x.shape) != 2 or len(w.shape) != 2 or w.shape[0] != x.shape[1] or w.shape[1] % 3:
        raise ValueError(f"layernorm_qkv takes x (M, K) and w (K, 3 * hd), got {tuple(x.shape)} and {tuple(w.shape)}")
    hd = w.shape[1] // 3
    if hd % 128:
        raise ValueError(f"layernorm_qkv: heads * head_dim ({hd}) must be a multiple of 128 (q^T and k^T are made in "
                         f"blocks of 128 features on the partitions)")  # fmt: skip
    if tuple(b.shape) != (3 * hd,):
        raise ValueError(f"layernorm_qkv: the bias must be ({3 * hd},)")
    _check_norm(x, gamma, beta, "layernorm_qkv")
    check_dtypes("layernorm_qkv", (x, gamma, beta, w, b))
    if x.shape[1] > MAX_K or w.shape[1] > MAX_N:
        raise ValueError(f"layernorm_qkv: K and 3 * hd must be at most {MAX_K} and {MAX_N} (the weight stays in SBUF)")
    _check_fits("layernorm_qkv", x, x.shape[1], w.shape[1])
    if num_heads is not None:
        derived = (hd // int(num_heads)) ** -0.5
        if scale != DEFAULT_SCALE and not math.isclose(scale, derived):
            raise ValueError(f"layernorm_qkv: scale {scale} disagrees with num_heads {num_heads} (head_dim "
                             f"{hd // int(num_heads)} ** -0.5 = {derived})")  # fmt: skip
        scale = derived
    forced = _schedule(schedule, ("auto", "resident", "tiled"))
    if _widths_family(x.shape[1], w.shape[1]):  # the scale and epsilon at run time, after the arrays
        return layernorm_qkv_kernel, (x, gamma, beta, w, b, runtime_scalar(scale), runtime_scalar(epsilon)), forced
    args, kwargs = (x, gamma, beta, w, b), {"scale": float(scale), "epsilon": float(epsilon)} | forced
    return layernorm_qkv_kernel, args, _fitting(layernorm_qkv_kernel, args, kwargs, schedule == "auto")


def layernorm_qkv(x, gamma, beta, w, b, scale=None, epsilon=1e-6, num_heads=None, *, backend: str | None = None):
    """``scale`` or ``num_heads`` (scale = head_dim ** -0.5) must be given."""
    if scale is None and num_heads is None:
        raise ValueError("layernorm_qkv: give the softmax scale or num_heads (scale = head_dim ** -0.5)")
    scale = DEFAULT_SCALE if scale is None else scale
    launch, args, kwargs = plan_layernorm_qkv(x, gamma, beta, w, b, scale, epsilon, num_heads)
    return launch(*args, backend=backend, **kwargs)
