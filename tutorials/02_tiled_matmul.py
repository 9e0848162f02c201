"""Lesson 2: a tiled matrix multiplication, and what the verifier says when a tile is too big.

The Tensor engine multiplies a *stationary* tile [K <= 128, M <= 128] by a *moving* tile [K <= 128, N <= 512],
contracting along the partition dimension K of both, and writes fp32 results into PSUM. So to compute
``lhsT.T @ rhs`` we pass the left operand already transposed ([K, M]) and accumulate over K tiles in PSUM.
Run it: ``python tutorials/02_tiled_matmul.py``.
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs, tile_m=nl.tile_size.gemm_stationary_fmax):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_K = nl.tile_size.pmax  # 128 partitions to contract over
    TILE_N = nl.tile_size.gemm_moving_fmax  # 512: one PSUM bank of fp32
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


def main():
    rng = np.random.default_rng(0)
    K, M, N = 512, 256, 1024
    lhsT = rng.standard_normal((K, M)).astype(np.float32)
    rhs = rng.standard_normal((K, N)).astype(np.float32)

    out = matmul_tiled(lhsT, rhs)
    expected = lhsT.T @ rhs
    err = float(np.max(np.abs(out - expected)))
    assert np.allclose(out, expected, rtol=1e-4, atol=1e-3), err
    print(f"matmul_tiled: [{M}, {K}] @ [{K}, {N}] matches NumPy (max |err| = {err:.2e})")

    # bfloat16 inputs: the products accumulate in fp32 PSUM; only the final copy rounds to bfloat16.
    a16, b16 = lhsT.astype(nl.bfloat16), rhs.astype(nl.bfloat16)
    out16 = matmul_tiled(a16, b16)
    ref16 = (a16.astype(np.float32).T @ b16.astype(np.float32)).astype(nl.bfloat16)
    assert np.allclose(out16.astype(np.float32), ref16.astype(np.float32), rtol=2e-2, atol=1e-1)
    print("matmul_tiled in bfloat16 matches NumPy with fp32 accumulation")

    # A stationary tile wider than the 128 PE columns is rejected before anything runs, naming the line.
    try:
        matmul_tiled(lhsT, rhs, tile_m=256)
    except nki.NkiVerificationError as e:
        print("tile_m=256 is refused by the verifier:")
        print(" ", str(e).splitlines()[0])
    else:
        raise AssertionError("a 256-wide stationary tile must be rejected")


if __name__ == "__main__":
    main()
