"""The NKI matrix-multiplication guide's five kernels (reference/nki.md §4.1: basic, tiled, hoisted loads, blocked
free dimensions, fully blocked with SBUF accumulation) in the current NKI API (``nki_dsl.current``), written as the
current guide writes them: every tensor allocated explicitly, every instruction writing its ``dst``, loads hoisted
into Python lists of tiles. Each takes ``lhsT [K, M]`` and ``rhs [K, N]`` in HBM and returns ``lhsT.T @ rhs``.

``matmul_tiled`` is ``kernel.py``'s legacy-API ``matmul_tiled`` in the other generation: both lower to one engine
program (same numbers, same modelled latency). tutorials/07_current_api.py runs the two side by side;
tests/current_api checks every kernel here against a float64 formula and against its legacy twin.
"""

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl

TILE_M, TILE_K, TILE_N = 128, 128, 512  # stationary free, contraction (partitions), moving free (§3.2)


@nki.jit
def matmul_basic(lhsT, rhs):
    """One [64, 128] x [128, 512] tile."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhs_tile = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tile = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=lhs_tile, src=lhsT)
    nisa.dma_copy(dst=rhs_tile, src=rhs)
    result_psum = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=result_psum, stationary=lhs_tile, moving=rhs_tile)
    result_sbuf = nl.ndarray(result_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result_sbuf, src=result_psum)
    nisa.dma_copy(dst=result, src=result_sbuf)
    return result


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result


@nki.jit
def matmul_hoisted(lhsT, rhs):
    """Loads hoisted out of the inner loops into Python lists of tiles, indexed by another loop's variable."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = []
        for k in nl.affine_range(K // TILE_K):
            lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
            lhsT_tiles.append(lhsT_tile)
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = []
            for k in nl.affine_range(K // TILE_K):
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                rhs_tiles.append(rhs_tile)
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[k], moving=rhs_tiles[k])
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result


@nki.jit
def matmul_block_free(lhsT, rhs, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=2):
    """Blocks of TILES_IN_BLOCK_M x TILES_IN_BLOCK_N output tiles share their loaded operands."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    BLOCK_M, BLOCK_N = TILE_M * TILES_IN_BLOCK_M, TILE_N * TILES_IN_BLOCK_N
    for m in nl.affine_range(M // BLOCK_M):
        lhsT_tiles = []
        for bm in nl.affine_range(TILES_IN_BLOCK_M):
            lhsT_tiles_internal = []
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                row = (m * TILES_IN_BLOCK_M + bm) * TILE_M
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, row:row + TILE_M])
                lhsT_tiles_internal.append(lhsT_tile)
            lhsT_tiles.append(lhsT_tiles_internal)
        for n in nl.affine_range(N // BLOCK_N):
            rhs_tiles = []
            for bn in nl.affine_range(TILES_IN_BLOCK_N):
                rhs_tiles_internal = []
                for k in nl.affine_range(K // TILE_K):
                    rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                    col = (n * TILES_IN_BLOCK_N + bn) * TILE_N
                    nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_N])
                    rhs_tiles_internal.append(rhs_tile)
                rhs_tiles.append(rhs_tiles_internal)
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    result_tile = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        nisa.nc_matmul(dst=result_tile, stationary=lhsT_tiles[bm][k], moving=rhs_tiles[bn][k])
                    result_tmp = nl.ndarray(result_tile.shape, dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=result_tmp, src=result_tile)
                    row = (m * TILES_IN_BLOCK_M + bm) * TILE_M
                    col = (n * TILES_IN_BLOCK_N + bn) * TILE_N
                    nisa.dma_copy(dst=result[row:row + TILE_M, col:col + TILE_N], src=result_tmp)
    return result


@nki.jit
def matmul_fully_blocked(lhsT, rhs, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=2, TILES_IN_BLOCK_K=2):
    """Blocked along M, N and K; partial sums of each K block accumulate in SBUF across a sequential K loop."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    BLOCK_M, BLOCK_N, BLOCK_K = TILE_M * TILES_IN_BLOCK_M, TILE_N * TILES_IN_BLOCK_N, TILE_K * TILES_IN_BLOCK_K
    NUM_BLOCK_M, NUM_BLOCK_N, NUM_BLOCK_K = M // BLOCK_M, N // BLOCK_N, K // BLOCK_K
    for n in nl.affine_range(NUM_BLOCK_N):
        result_tiles = []
        for m in nl.affine_range(NUM_BLOCK_M):  # noqa: B007 - as in the guide
            result_tiles_m = []
            for bm in nl.affine_range(TILES_IN_BLOCK_M):  # noqa: B007
                result_tiles_bm = []
                for bn in nl.affine_range(TILES_IN_BLOCK_N):  # noqa: B007
                    result_tile = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.memset(dst=result_tile, value=0.0)
                    result_tiles_bm.append(result_tile)
                result_tiles_m.append(result_tiles_bm)
            result_tiles.append(result_tiles_m)
        for k in nl.sequential_range(NUM_BLOCK_K):
            rhs_tiles = []
            for bk_r in range(TILES_IN_BLOCK_K):
                rhs_tile = nl.ndarray((TILE_K, BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
                row = (TILES_IN_BLOCK_K * k + bk_r) * TILE_K
                nisa.dma_copy(dst=rhs_tile, src=rhs[row:row + TILE_K, BLOCK_N * n:BLOCK_N * (n + 1)])
                rhs_tiles.append(rhs_tile)
            for m in nl.affine_range(NUM_BLOCK_M):
                lhsT_tiles = []
                for bk_l in nl.affine_range(TILES_IN_BLOCK_K):
                    lhsT_tile = nl.ndarray((TILE_K, BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                    row = (TILES_IN_BLOCK_K * k + bk_l) * TILE_K
                    nisa.dma_copy(dst=lhsT_tile, src=lhsT[row:row + TILE_K, BLOCK_M * m:BLOCK_M * (m + 1)])
                    lhsT_tiles.append(lhsT_tile)
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    for bm in nl.affine_range(TILES_IN_BLOCK_M):
                        result_tile = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(TILES_IN_BLOCK_K):
                            nisa.nc_matmul(dst=result_tile,
                                           stationary=lhsT_tiles[bk][:, bm * TILE_M:(bm + 1) * TILE_M],
                                           moving=rhs_tiles[bk][:, bn * TILE_N:(bn + 1) * TILE_N])
                        acc = result_tiles[m][bm][bn]
                        nisa.tensor_tensor(dst=acc, data1=acc, data2=result_tile, op=nl.add)
        for m in nl.affine_range(NUM_BLOCK_M):
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                result_packed = nl.ndarray((TILE_M, BLOCK_N), dtype=result.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    nisa.tensor_copy(dst=result_packed[0:TILE_M, bn * TILE_N:(bn + 1) * TILE_N],
                                     src=result_tiles[m][bm][bn][0:TILE_M, 0:TILE_N])
                row = (TILES_IN_BLOCK_M * m + bm) * TILE_M
                nisa.dma_copy(dst=result[row:row + TILE_M, BLOCK_N * n:BLOCK_N * (n + 1)], src=result_packed)
    return result
