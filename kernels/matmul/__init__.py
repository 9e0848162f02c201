"""matmul: a first-party Hub kernel package (``kernels publish kernels/matmul --repo ORG/matmul``): ``lhsT.T @ rhs``
tiled for the Tensor engine, the optimisation steps tutorials/04_profiling.py measures, and the matmul guide's kernels
in the current NKI API (``current_api``)."""

from . import current_api
from .kernel import matmul_block_free, matmul_blocked, matmul_hoisted, matmul_tiled
from .launcher import matmul, plan_matmul
from .reference import matmul as matmul_reference

__all__ = ["matmul", "plan_matmul", "matmul_reference", "matmul_tiled", "matmul_hoisted", "matmul_block_free",
           "matmul_blocked", "current_api"]  # fmt: skip
