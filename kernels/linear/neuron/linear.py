"""``x @ w`` (+ b, then GELU or + residual), against AWS's current ``nki`` API.

Output tiles of 128 rows by 512 columns (one PSUM bank of fp32); the contraction over K in tiles of 128 partitions,
x^T tiles brought in by a transposing DMA so K sits on the partitions of the stationary operand; each K tile's
product is added into an fp32 SBUF accumulator, then the epilogue runs on it and the tile is stored. Python loops
are unrolled at specialisation, so ragged tiles are slices. ``mlp`` is two launches (the fused single-launch MLP of
``../fused_mlp.py`` is not in this variant).
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPILOGUES = ("none", "bias", "gelu", "residual")
# The launchers' limits and dtypes (kernels/linear/launcher.py: this variant imports only `nki`, so they are repeated
# here; tests/kernels/test_neuron_variants.py checks that both refuse the same calls with the same messages)
MAX_K = MAX_N = 8192
DTYPES = ("float32", "bfloat16", "float16")


def _dtype_name(a) -> str:
    """A NumPy / ml_dtypes or torch dtype's name ("bfloat16" for both ``ml_dtypes.bfloat16`` and ``torch.bfloat16``)."""
    return str(a.dtype).removeprefix("torch.")


def _check_dtypes(op, arrays, allowed=DTYPES):
    names = [_dtype_name(a) for a in arrays if a is not None]
    if names[0] not in allowed or any(n != names[0] for n in names):
        raise ValueError(f"{op}: the arrays must share a dtype among {', '.join(allowed)}, got {', '.join(names)}")


def _tile(x, w, b, residual, out, epilogue, m0, mr, n0, nn):
    pmax = nl.tile_size.pmax
    k = x.shape[1]
    acc = nl.ndarray((pmax, nn), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for k0 in range(0, k, pmax):
        kr = min(pmax, k - k0)
        x_t = nl.ndarray((pmax, pmax), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=x_t[0:kr, 0:mr], src=x[m0 : m0 + mr, k0 : k0 + kr])
        w_tile = nl.ndarray((pmax, nn), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_tile[0:kr, :], src=w[k0 : k0 + kr, n0 : n0 + nn])
        part = nl.ndarray((pmax, nn), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=part[0:mr, :], stationary=x_t[0:kr, 0:mr], moving=w_tile[0:kr, :])
        nisa.tensor_tensor(dst=acc[0:mr, :], data1=acc[0:mr, :], data2=part[0:mr, :], op=nl.add)
    y = nl.ndarray((pmax, nn), dtype=out.dtype, buffer=nl.sbuf)
    if epilogue == "none":
        nisa.tensor_copy(dst=y[0:mr, :], src=acc[0:mr, :])
    else:
        bias = nl.ndarray((pmax, nn), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=bias, src=b.ap([[0, pmax], [1, nn]], offset=n0))  # the bias row on every partition
        if epilogue == "gelu":
            pre = nl.ndarray((pmax, nn), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=pre[0:mr, :], data1=acc[0:mr, :], data2=bias[0:mr, :], op=nl.add)
            nisa.activation(dst=y[0:mr, :], op=nl.gelu_apprx_tanh, data=pre[0:mr, :])
        elif epilogue == "residual":
            res = nl.ndarray((pmax, nn), dtype=residual.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=res[0:mr, :], src=residual[m0 : m0 + mr, n0 : n0 + nn])
            pre = nl.ndarray((pmax, nn), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=pre[0:mr, :], data1=acc[0:mr, :], data2=bias[0:mr, :], op=nl.add)
            nisa.tensor_tensor(dst=y[0:mr, :], data1=pre[0:mr, :], data2=res[0:mr, :], op=nl.add)
        else:
            nisa.tensor_tensor(dst=y[0:mr, :], data1=acc[0:mr, :], data2=bias[0:mr, :], op=nl.add)
    nisa.dma_copy(dst=out[m0 : m0 + mr, n0 : n0 + nn], src=y[0:mr, :])


@nki.jit
def linear_kernel(x, w, b, residual, epilogue):
    m = x.shape[0]
    n = w.shape[1]
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax, fmax = nl.tile_size.pmax, nl.tile_size.psum_bank_fmax
    for m0 in range(0, m, pmax):
        for n0 in range(0, n, fmax):
            _tile(x, w, b, residual, out, epilogue, m0, min(pmax, m - m0), n0, min(fmax, n - n0))
    return out


def linear(x, w, b=None, residual=None, epilogue=None):
    """``x @ w`` (+ b, then GELU or + residual); the epilogue defaults from the arguments given."""
    if epilogue is None:
        epilogue = "residual" if residual is not None else ("bias" if b is not None else "none")
    if epilogue not in EPILOGUES:
        raise ValueError(f"linear: epilogue must be one of {', '.join(EPILOGUES)}, got {epilogue!r}")
    if len(x.shape) != 2 or len(w.shape) != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"linear takes x (M, K) and w (K, N), got {tuple(x.shape)} and {tuple(w.shape)}")
    (m, k), n = tuple(x.shape), w.shape[1]
    if k > MAX_K or n > MAX_N:
        raise ValueError(f"linear: K {k} and N {n} must be at most {MAX_K} and {MAX_N} (the weight stays in SBUF)")
    if epilogue != "none" and (b is None or tuple(b.shape) != (n,)):
        raise ValueError(f"linear: epilogue {epilogue!r} needs a bias of shape ({n},)")
    if epilogue == "residual" and (residual is None or tuple(residual.shape) != (m, n)):
        raise ValueError(f"linear: the residual must have the output's shape ({m}, {n})")
    _check_dtypes("linear", [x, w] + [b] * (epilogue != "none") + [residual] * (epilogue == "residual"))
    return linear_kernel(x, w, b, residual, epilogue)


def mlp(x, w1, b1, w2, b2, residual):
    """``residual + gelu(x @ w1 + b1) @ w2 + b2`` as two launches, for the calls the launcher's fused ``mlp`` takes
    (its shape, dtype and size checks; not its SBUF boxes, which bound the fused kernel only)."""
    m, k = tuple(x.shape)
    if tuple(w1.shape[:1]) != (k,) or w2.shape[0] != w1.shape[1] or tuple(residual.shape) != (m, w2.shape[1]):
        raise ValueError(f"mlp takes x (M, K), w1 (K, H), w2 (H, N), residual (M, N); got {tuple(x.shape)}, "
                         f"{tuple(w1.shape)}, {tuple(w2.shape)}, {tuple(residual.shape)}")  # fmt: skip
    if tuple(b1.shape) != (w1.shape[1],) or tuple(b2.shape) != (w2.shape[1],):
        raise ValueError("mlp: b1 must be (H,) and b2 (N,)")
    _check_dtypes("mlp", (x, w1, b1, w2, b2, residual))
    if _dtype_name(x) not in ("bfloat16", "float16"):
        raise ValueError(f"mlp: dtype {_dtype_name(x)} is not supported; x^T comes in by DMA transpose, which takes "
                         f"2-byte dtypes only (use bfloat16 or float16, or two linear launches)")  # fmt: skip
    if k > MAX_K or w1.shape[1] > MAX_N or w2.shape[1] > MAX_N:
        raise ValueError(f"mlp: K, H and N must be at most {MAX_K} (the widths the families cover)")
    return linear(linear(x, w1, b1, epilogue="gelu"), w2, b2, residual, epilogue="residual")
