"""A linear layer with bias, GELU (tanh approximation) and residual, NKI 0.6 convenience wrappers
(`nl.load` / `nl.matmul` / `nl.store` and the elementwise math of `nki.language`), composed as production libraries
compose theirs: a plain Python entry point calling `@nki.jit` sub-kernels.

x: [T, K], w: [K, N], b: [N], res: [T, N] -> y [T, N] = gelu_tanh(x @ w + b) + res
T, K multiples of 128; N a multiple of 512 or at most 512.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit(mode="trace")
def load_transposed(x, row0, k0):
    """x[row0:row0+128, k0:k0+128]^T as an SBUF tile (TensorE transpose)."""
    blk = nl.load(x[nl.ds(row0, 128), nl.ds(k0, 128)])
    return nl.transpose(blk)


@nki.jit(mode="trace")
def gelu_tanh(z):
    # 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))
    z3 = nl.multiply(nl.multiply(z, z), z)
    inner = nl.multiply(nl.add(z, nl.multiply(z3, 0.044715)), 0.7978845608028654)
    return nl.multiply(nl.multiply(z, 0.5), nl.add(nl.tanh(inner), 1.0))


@nki.jit
def linear_gelu_residual(x, w, b, res):
    T, K = x.shape
    N = w.shape[1]
    NT = min(N, 512)
    y = nl.ndarray((T, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // NT):
        bias = nl.broadcast_to(nl.load(b.reshape((1, N))[0:1, nl.ds(n * NT, NT)]), shape=(128, NT))
        for t in nl.affine_range(T // 128):
            acc = nl.zeros((128, NT), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                xT = load_transposed(x, t * 128, k * 128)
                wk = nl.load(w[nl.ds(k * 128, 128), nl.ds(n * NT, NT)])
                acc += nl.matmul(xT, wk, transpose_x=True)
            z = nl.add(acc, bias)
            out = nl.add(gelu_tanh(z), nl.load(res[nl.ds(t * 128, 128), nl.ds(n * NT, NT)]), dtype=x.dtype)
            nl.store(y[nl.ds(t * 128, 128), nl.ds(n * NT, NT)], value=out)
    return y


def mlp_block(x, w1, b1, w2, b2):
    """Two linear layers, each with its residual: a plain function over kernels, as nki.simulate accepts."""
    h = linear_gelu_residual(x, w1, b1, x)
    return linear_gelu_residual(h, w2, b2, h)


@nki.jit(debug_kernel=True, show_compiler_tb=True)
def scaled_copy(x, factor):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.device_print("scaled_copy input", t)
    nl.store(out, value=nl.multiply(t, factor))
    if nisa.get_nc_version() == nisa.nc_version.gen2:
        raise AssertionError("this kernel targets trn2 and later")
    return out
