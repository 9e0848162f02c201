"""Lesson 2: a tiled matrix multiplication, and what the verifier says when a tile is too big.

The Tensor engine multiplies a *stationary* tile [K <= 128, M <= 128] by a *moving* tile [K <= 128, N <= 512],
contracting along the partition dimension K of both, and writes fp32 results into PSUM. So to compute
``lhsT.T @ rhs`` we pass the left operand already transposed ([K, M]) and accumulate over K tiles in PSUM.

The kernel is the kernel library's ``matmul_tiled``: read it in ``kernels/matmul/kernel.py`` (about twenty
lines: an ``nl.zeros`` PSUM accumulator declared outside the K loop, ``acc += nl.matmul(..., transpose_x=True)``
inside it, and an ``nl.copy`` out of PSUM before the store). Its ``tile_m`` parameter is the stationary tile's
width, which this lesson sets too wide on purpose at the end.
Run it: ``python tutorials/02_tiled_matmul.py``.
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.matmul import matmul_tiled


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
