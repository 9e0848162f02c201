"""The NKI matrix-multiplication guide's five kernels (reference/nki.md §4.1) in the current API are the library's
(``kernels/matmul/current_api.py``); their legacy twins are the library's legacy steps where one exists
(``matmul_tiled`` and ``matmul_hoisted`` lower to the same engine program as the guide's legacy kernels: only
``nl.matmul(transpose_x=True)`` is spelled ``nisa.nc_matmul`` there) and, for the one-tile basic kernel, which the
library has no step for, a conformance kernel here. Each takes ``lhsT [K, M]`` and ``rhs [K, N]`` in HBM and returns
``lhsT.T @ rhs``."""

import nki_dsl as legacy_nki
import nki_dsl.isa as lisa
import nki_dsl.language as lnl
from kernels.matmul import matmul_hoisted as legacy_hoisted
from kernels.matmul import matmul_tiled as legacy_tiled
from kernels.matmul.current_api import (
    matmul_basic,
    matmul_block_free,
    matmul_fully_blocked,
    matmul_hoisted,
    matmul_tiled,
)

CURRENT = {"basic": matmul_basic, "tiled": matmul_tiled, "hoisted": matmul_hoisted, "block_free": matmul_block_free,
           "fully_blocked": matmul_fully_blocked}  # fmt: skip


# -- legacy twin of the basic kernel (neuronxcc.nki style: tile-returning ops) --------------------------------------
@legacy_nki.jit
def legacy_basic(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = lnl.ndarray((M, N), dtype=lhsT.dtype, buffer=lnl.shared_hbm)
    lhs_tile = lnl.load(lhsT)
    rhs_tile = lnl.load(rhs)
    result_psum = lisa.nc_matmul(lhs_tile, rhs_tile)
    lnl.store(result, lnl.copy(result_psum, dtype=result.dtype))
    return result


LEGACY = {"basic": legacy_basic, "tiled": legacy_tiled, "hoisted": legacy_hoisted}
