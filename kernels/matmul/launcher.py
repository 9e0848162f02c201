"""The user-facing matmul: checks the operands, picks the kernel (the blocked one when the shapes fill its blocks,
the tiled one otherwise) and runs it.

``plan_matmul`` is what the Hub bundle builder traces for each declared specialisation; it passes the caller's
arrays to the kernel unchanged and in order, so a loader without this Python can match a call to the published IR.
"""

import numpy as np

import nki_dsl as nki

from .kernel import TILE_K, TILE_M, TILE_N, matmul_blocked, matmul_tiled

BLOCK_M, BLOCK_N = 4 * TILE_M, 2 * TILE_N  # matmul_blocked's default blocks (BM=4, BN=2)
# matmul_blocked keeps a block's whole K strips in SBUF: tutorial 4's K = 8192 (192 KiB per partition in bf16) no
# longer fits a trn1 core, 4096 does; deeper K takes the tiled kernel.
MAX_BLOCKED_K = 4096
# Every dimension at most 16384, as the published families (kernel.toml): a loaded kernel's op executions are bounded
# by the untrusted-IR budget (nki.IRBudget.max_iterations, 4,194,304: each is a NumPy call or a simulated
# instruction), which the tiled kernel meets up to 16384^3 (2,109,441) and not at 32768^3 (16.8 million).
MAX_DIM = 16384
# The Tensor engine's float dtypes this kernel is written for (fp32 at a quarter rate, §3.2); both operands alike.
DTYPES = ("float32", "bfloat16", "float16")


def plan_matmul(lhsT, rhs):
    if len(lhsT.shape) != 2 or len(rhs.shape) != 2 or lhsT.shape[0] != rhs.shape[0]:
        raise ValueError(f"matmul takes lhsT (K, M) and rhs (K, N), got {tuple(lhsT.shape)} and {tuple(rhs.shape)}")
    (k, m), n = lhsT.shape, rhs.shape[1]
    if k % TILE_K or m % TILE_M or n % TILE_N:
        raise ValueError(f"matmul: K, M and N must be multiples of {TILE_K}, {TILE_M} and {TILE_N}, got {k}, {m}, {n}")
    if k > MAX_DIM or m > MAX_DIM or n > MAX_DIM:
        raise ValueError(f"matmul: K, M and N must be at most {MAX_DIM} (the published families' ranges, held by the "
                         f"untrusted-IR iteration budget), got {k}, {m}, {n}")  # fmt: skip
    dtype = np.dtype(lhsT.dtype).name
    if dtype not in DTYPES or np.dtype(rhs.dtype).name != dtype:
        raise ValueError(f"matmul: lhsT and rhs must share a dtype among {', '.join(DTYPES)}, got {dtype} and "
                         f"{np.dtype(rhs.dtype).name}")  # fmt: skip
    if _fills_blocks(k, m, n):
        return matmul_blocked, (lhsT, rhs), {}
    return matmul_tiled, (lhsT, rhs), {}


def _fills_blocks(k, m, n) -> bool:
    """Whether the blocked kernel takes the shape. A shape family (kernel.toml) whose shapes go both ways (M in
    128..4096 step 128 holds multiples of 512 and others) takes the tiled kernel for all of them: one IR serves a
    family, and the tiled kernel runs every shape this launcher accepts. The manifest lists the blocked families
    first, so a call whose shape fills the blocks matches one of them and runs what a concrete trace would."""
    try:
        return bool(m % BLOCK_M == 0 and n % BLOCK_N == 0 and k <= MAX_BLOCKED_K)
    except nki.InconclusiveDimensionError:
        return False


def matmul(lhsT, rhs, *, backend: str | None = None):
    """``lhsT.T @ rhs``, accumulated in fp32, returned in ``lhsT``'s dtype."""
    launch, args, kwargs = plan_matmul(lhsT, rhs)
    return launch(*args, backend=backend, **kwargs)
