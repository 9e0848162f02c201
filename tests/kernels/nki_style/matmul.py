"""Matrix multiplication, in the style of the legacy NKI matmul tutorial: a single tile, the tiled kernel, then
three optimisations (hoisted loads, blocking the free dimensions, and full blocking with SBUF-resident result
tiles), plus a ragged-edge kernel using masks. ``lhsT`` is ``[K, M]`` and ``rhs`` is ``[K, N]``: the contraction
runs along the partition dimension of both operands, so the result is ``lhsT.T @ rhs``.
"""

import math

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def nki_matmul_basic_(lhsT, rhs):
    """[128, 64] x [128, 512] -> [64, 512] in one matmul."""
    result = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    i_lhsT_p, i_lhsT_f = nl.mgrid[0:128, 0:64]
    i_rhs_p, i_rhs_f = nl.mgrid[0:128, 0:512]
    i_out_p, i_out_f = nl.mgrid[0:64, 0:512]

    lhs_tile = nl.load(lhsT[i_lhsT_p, i_lhsT_f])
    rhs_tile = nl.load(rhs[i_rhs_p, i_rhs_f])

    result_psum = nl.matmul(lhs_tile, rhs_tile, transpose_x=True)
    result_sbuf = nl.copy(result_psum, dtype=result.dtype)
    nl.store(result[i_out_p, i_out_f], value=result_sbuf)
    return result


@nki.jit
def nki_matmul_tiled_(lhsT, rhs):
    """Tiles of [128 (K), 128 (M)] and [128 (K), 512 (N)], accumulated into PSUM over K."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_, "lhsT and rhs must have the same contraction dimension"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    TILE_M = nl.tile_size.gemm_stationary_fmax  # 128
    TILE_K = nl.tile_size.pmax  # 128
    TILE_N = nl.tile_size.gemm_moving_fmax  # 512

    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                lhsT_tile[...] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                rhs_tile[...] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                res_psum += nl.matmul(lhsT_tile[...], rhs_tile[...], transpose_x=True)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], value=res_sb)
    return result


@nki.jit
def nki_matmul_hoist_load_(lhsT, rhs):
    """Loads hoisted out of the innermost loop into block tensors (``nl.par_dim``), indexed ``t[k, i.p, i.x]``."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax

    i_lhsT = nl.mgrid[0:TILE_K, 0:TILE_M]
    i_rhs = nl.mgrid[0:TILE_K, 0:TILE_N]
    i_res = nl.mgrid[0:TILE_M, 0:TILE_N]

    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TILE_K):
            lhsT_tiles[k, i_lhsT.p, i_lhsT.x] = nl.load(lhsT[k * TILE_K + i_lhsT.p, m * TILE_M + i_lhsT.x])

        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TILE_K):
                rhs_tiles[k, i_rhs.p, i_rhs.x] = nl.load(rhs[k * TILE_K + i_rhs.p, n * TILE_N + i_rhs.x])

            res_psum = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                res_psum[...] += nl.matmul(lhsT_tiles[k, i_lhsT.p, i_lhsT.x], rhs_tiles[k, i_rhs.p, i_rhs.x],
                                           transpose_x=True)

            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TILE_M + i_res.p, n * TILE_N + i_res.x], value=res_sb)
    return result


@nki.jit
def nki_matmul_block_free_dimension_(lhsT, rhs):
    """Blocks of TILES_IN_BLOCK_M x TILES_IN_BLOCK_N output tiles share their loaded operands."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax

    TILES_IN_BLOCK_M = 2
    TILES_IN_BLOCK_N = 2
    BLOCK_M = TILE_M * TILES_IN_BLOCK_M
    BLOCK_N = TILE_N * TILES_IN_BLOCK_N
    assert M % BLOCK_M == 0
    assert N % BLOCK_N == 0

    for m in nl.affine_range(M // BLOCK_M):
        lhsT_tiles = nl.ndarray((TILES_IN_BLOCK_M, K // TILE_K, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype,
                                buffer=nl.sbuf)
        for bm in nl.affine_range(TILES_IN_BLOCK_M):
            for k in nl.affine_range(K // TILE_K):
                lhsT_tiles[bm, k] = nl.load(
                    lhsT[k * TILE_K:(k + 1) * TILE_K,
                         (m * TILES_IN_BLOCK_M + bm) * TILE_M:((m * TILES_IN_BLOCK_M + bm) + 1) * TILE_M])

        for n in nl.affine_range(N // BLOCK_N):
            rhs_tiles = nl.ndarray((TILES_IN_BLOCK_N, K // TILE_K, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype,
                                   buffer=nl.sbuf)
            for bn in nl.affine_range(TILES_IN_BLOCK_N):
                for k in nl.affine_range(K // TILE_K):
                    rhs_tiles[bn, k] = nl.load(
                        rhs[k * TILE_K:(k + 1) * TILE_K,
                            (n * TILES_IN_BLOCK_N + bn) * TILE_N:((n * TILES_IN_BLOCK_N + bn) + 1) * TILE_N])

            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    result_tile = nl.zeros((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        result_tile += nl.matmul(lhsT_tiles[bm, k], rhs_tiles[bn, k], transpose_x=True)

                    result_sbuf = nl.copy(result_tile, dtype=result.dtype)
                    nl.store(result[(m * TILES_IN_BLOCK_M + bm) * TILE_M:((m * TILES_IN_BLOCK_M + bm) + 1) * TILE_M,
                                    (n * TILES_IN_BLOCK_N + bn) * TILE_N:((n * TILES_IN_BLOCK_N + bn) + 1) * TILE_N],
                             value=result_sbuf)
    return result


def _fully_optimized(use_isa: bool):
    @nki.jit
    def nki_matmul_fully_optimized_(lhsT, rhs, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=2, TILES_IN_BLOCK_K=2):
        """Blocking in all three dimensions. The K blocks run in a ``sequential_range``; each block's partial
        products are accumulated into SBUF-resident result tiles (``result_tiles[...] += res_tile``), which are
        packed and stored once per N block."""
        K, M = lhsT.shape
        K_, N = rhs.shape
        assert K == K_
        result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

        TILE_M = nl.tile_size.gemm_stationary_fmax
        TILE_K = nl.tile_size.pmax
        TILE_N = nl.tile_size.gemm_moving_fmax

        BLOCK_M = TILE_M * TILES_IN_BLOCK_M
        BLOCK_N = TILE_N * TILES_IN_BLOCK_N
        BLOCK_K = TILE_K * TILES_IN_BLOCK_K
        assert M % BLOCK_M == 0
        assert N % BLOCK_N == 0
        assert K % BLOCK_K == 0

        NUM_BLOCK_M = M // BLOCK_M
        NUM_BLOCK_N = N // BLOCK_N
        NUM_BLOCK_K = K // BLOCK_K

        for n in nl.affine_range(NUM_BLOCK_N):
            result_tiles = nl.zeros((NUM_BLOCK_M, TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, nl.par_dim(TILE_M), TILE_N),
                                    dtype=lhsT.dtype, buffer=nl.sbuf)

            for k in nl.sequential_range(NUM_BLOCK_K):
                i_rhs = nl.mgrid[0:TILE_K, 0:BLOCK_N]
                rhs_tiles = nl.ndarray((TILES_IN_BLOCK_K, nl.par_dim(TILE_K), BLOCK_N), dtype=rhs.dtype,
                                       buffer=nl.sbuf)
                for bk_r in nl.affine_range(TILES_IN_BLOCK_K):
                    rhs_tiles[bk_r, i_rhs.p, i_rhs.x] = nl.load(
                        rhs[(TILES_IN_BLOCK_K * k + bk_r) * TILE_K + i_rhs.p, BLOCK_N * n + i_rhs.x])

                for m in nl.affine_range(NUM_BLOCK_M):
                    i_lhsT = nl.mgrid[0:TILE_K, 0:BLOCK_M]
                    lhsT_tiles = nl.ndarray((TILES_IN_BLOCK_K, nl.par_dim(TILE_K), BLOCK_M), dtype=lhsT.dtype,
                                            buffer=nl.sbuf)
                    for bk_l in nl.affine_range(TILES_IN_BLOCK_K):
                        lhsT_tiles[bk_l, i_lhsT.p, i_lhsT.x] = nl.load(
                            lhsT[(TILES_IN_BLOCK_K * k + bk_l) * TILE_K + i_lhsT.p, BLOCK_M * m + i_lhsT.x])

                    i_lhsT_mm = nl.mgrid[0:TILE_K, 0:TILE_M]
                    i_rhs_mm = nl.mgrid[0:TILE_K, 0:TILE_N]
                    i_res_mm = nl.mgrid[0:TILE_M, 0:TILE_N]
                    for bn in nl.affine_range(TILES_IN_BLOCK_N):
                        for bm in nl.affine_range(TILES_IN_BLOCK_M):
                            res_tile = nl.zeros((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                            for bk in nl.affine_range(TILES_IN_BLOCK_K):
                                stationary = lhsT_tiles[bk, i_lhsT_mm.p, bm * TILE_M + i_lhsT_mm.x]
                                moving = rhs_tiles[bk, i_rhs_mm.p, bn * TILE_N + i_rhs_mm.x]
                                if use_isa:
                                    res_tile[...] += nisa.nc_matmul(stationary, moving)
                                else:
                                    res_tile[...] += nl.matmul(stationary, moving, transpose_x=True)
                            result_tiles[m, bm, bn, i_res_mm.p, i_res_mm.x] += res_tile[i_res_mm.p, i_res_mm.x]

            for m in nl.affine_range(NUM_BLOCK_M):
                for bm in nl.affine_range(TILES_IN_BLOCK_M):
                    i_res = nl.mgrid[0:TILE_K, 0:TILE_N]
                    i_res_packed = nl.mgrid[0:TILE_K, 0:BLOCK_N]
                    result_packed = nl.ndarray((TILE_K, BLOCK_N), dtype=result_tiles.dtype, buffer=nl.sbuf)
                    for bn in nl.affine_range(TILES_IN_BLOCK_N):
                        result_packed[i_res.p, bn * TILE_N + i_res.x] = nl.copy(result_tiles[m, bm, bn, i_res.p,
                                                                                             i_res.x])
                    nl.store(result[(TILES_IN_BLOCK_M * m + bm) * TILE_K + i_res_packed.p,
                                    BLOCK_N * n + i_res_packed.x],
                             value=result_packed[i_res_packed.p, i_res_packed.x])
        return result

    return nki_matmul_fully_optimized_


nki_matmul_fully_optimized_ = _fully_optimized(use_isa=False)
nki_matmul_fully_optimized_isa = _fully_optimized(use_isa=True)


@nki.jit
def nki_matmul_ragged(lhsT, rhs):
    """Any K, M, N: operand tiles start zeroed and are filled by masked loads, so the lanes past a ragged edge
    contribute nothing to the contraction; the result is stored under a mask."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    TILE_M, TILE_K, TILE_N = 128, 128, 512
    i_lhsT_p, i_lhsT_f = nl.mgrid[0:TILE_K, 0:TILE_M]
    i_rhs_p, i_rhs_f = nl.mgrid[0:TILE_K, 0:TILE_N]
    i_res_p, i_res_f = nl.mgrid[0:TILE_M, 0:TILE_N]

    for m in nl.affine_range(math.ceil(M / TILE_M)):
        for n in nl.affine_range(math.ceil(N / TILE_N)):
            res_psum = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(math.ceil(K / TILE_K)):
                lhsT_tile = nl.zeros((TILE_K, TILE_M), dtype=lhsT.dtype)
                rhs_tile = nl.zeros((TILE_K, TILE_N), dtype=rhs.dtype)
                lhsT_tile[i_lhsT_p, i_lhsT_f] = nl.load(
                    lhsT[k * TILE_K + i_lhsT_p, m * TILE_M + i_lhsT_f],
                    mask=(k * TILE_K + i_lhsT_p < K) & (m * TILE_M + i_lhsT_f < M))
                rhs_tile[i_rhs_p, i_rhs_f] = nl.load(
                    rhs[k * TILE_K + i_rhs_p, n * TILE_N + i_rhs_f],
                    mask=(k * TILE_K + i_rhs_p < K) & (n * TILE_N + i_rhs_f < N))
                res_psum += nl.matmul(lhsT_tile, rhs_tile, transpose_x=True)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TILE_M + i_res_p, n * TILE_N + i_res_f], value=res_sb,
                     mask=(m * TILE_M + i_res_p < M) & (n * TILE_N + i_res_f < N))
    return result


@nki.jit
def nki_matmul_no_transpose(x, y):
    """``nl.matmul(x, y)`` without ``transpose_x``: ``x`` is ``[M, K]`` and is transposed on the way."""
    M, K = x.shape
    _, N = y.shape
    result = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                x_tile = nl.load(x[m * 128:(m + 1) * 128, k * 128:(k + 1) * 128])
                y_tile = nl.load(y[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                acc += nl.matmul(x_tile, y_tile)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=nl.copy(acc, dtype=x.dtype))
    return result
