"""The tiled matmul ``lhsT.T @ rhs`` (``lhsT`` [K, M], ``rhs`` [K, N]; the contraction runs along the partitions
of both) and the three optimisations tutorials/04_profiling.py measures, each changing one thing.

The Tensor engine multiplies a stationary tile [K <= 128, M <= 128] by a moving tile [K <= 128, N <= 512] and
writes fp32 results into PSUM (reference/nki.md §3.2), so every kernel passes the left operand already transposed
and accumulates over K tiles in PSUM. Tile sizes are ``nl.tile_size``'s.
"""

import nki_dsl as nki
import nki_dsl.language as nl

TILE_K = nl.tile_size.pmax  # 128: the partitions the Tensor engine contracts over
TILE_M = nl.tile_size.gemm_stationary_fmax  # 128: the stationary tile's free size (PE columns)
TILE_N = nl.tile_size.gemm_moving_fmax  # 512: the moving tile's free size (one PSUM bank of fp32)


# The tiled matmul (tutorial 2; step 1 of tutorial 4): every (m, n) output tile loads its K strips of both operands.
@nki.jit
def matmul_tiled(lhsT, rhs, tile_m=TILE_M):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // tile_m):
        for n in nl.affine_range(N // TILE_N):
            # Declared outside the k loop: `+=` below is an associative accumulation, which affine_range allows.
            acc = nl.zeros((tile_m, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * tile_m:(m + 1) * tile_m])
                rhs_tile = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                acc += nl.matmul(lhsT_tile, rhs_tile, transpose_x=True)
            # PSUM cannot be stored directly by the engines' convention: copy to SBUF, converting to the output dtype.
            nl.store(result[m * tile_m:(m + 1) * tile_m, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=result.dtype))  # fmt: skip
    return result


# Step 2: the K strip of lhsT for one m is loaded once, into a par_dim block tensor, and reused by every n.
@nki.jit
def matmul_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_strip = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TILE_K):
            lhsT_strip[k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            rhs_strip = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TILE_K):
                rhs_strip[k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                acc += nl.matmul(lhsT_strip[k], rhs_strip[k], transpose_x=True)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=result.dtype))  # fmt: skip
    return result


# Step 3: a block of BM x BN output tiles shares its loaded strips.
@nki.jit
def matmul_block_free(lhsT, rhs, BM=2, BN=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (BM * TILE_M)):
        lhsT_strips = nl.ndarray((BM, K // TILE_K, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(BM):
            for k in nl.affine_range(K // TILE_K):
                col = (m * BM + bm) * TILE_M
                lhsT_strips[bm, k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_M])
        for n in nl.affine_range(N // (BN * TILE_N)):
            rhs_strips = nl.ndarray((BN, K // TILE_K, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(BN):
                for k in nl.affine_range(K // TILE_K):
                    col = (n * BN + bn) * TILE_N
                    rhs_strips[bn, k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_N])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        acc += nl.matmul(lhsT_strips[bm, k], rhs_strips[bn, k], transpose_x=True)
                    row, col = (m * BM + bm) * TILE_M, (n * BN + bn) * TILE_N
                    nl.store(result[row:row + TILE_M, col:col + TILE_N], value=nl.copy(acc, dtype=result.dtype))
    return result


# Step 4: every DMA moves a whole block row; the matmuls read their tiles as slices of the blocks. K is not blocked:
# a block's whole K strips must fit SBUF (tutorial 4 says where that stops).
@nki.jit
def matmul_blocked(lhsT, rhs, BM=4, BN=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    BLOCK_M, BLOCK_N = BM * TILE_M, BN * TILE_N
    for m in nl.affine_range(M // BLOCK_M):
        lhsT_block = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TILE_K):
            lhsT_block[k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * BLOCK_M:(m + 1) * BLOCK_M])
        for n in nl.affine_range(N // BLOCK_N):
            rhs_block = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TILE_K):
                rhs_block[k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * BLOCK_N:(n + 1) * BLOCK_N])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        acc += nl.matmul(lhsT_block[k, :, bm * TILE_M:(bm + 1) * TILE_M],
                                         rhs_block[k, :, bn * TILE_N:(bn + 1) * TILE_N], transpose_x=True)  # fmt: skip
                    row, col = m * BLOCK_M + bm * TILE_M, n * BLOCK_N + bn * TILE_N
                    nl.store(result[row:row + TILE_M, col:col + TILE_N], value=nl.copy(acc, dtype=result.dtype))
    return result
