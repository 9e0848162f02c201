"""rmsnorm: a first-party Hub kernel package (``kernels publish kernels/rmsnorm --repo ORG/rmsnorm``)."""

from .launcher import plan_rmsnorm, rmsnorm
from .reference import rmsnorm as rmsnorm_reference
from .whole_row import rmsnorm_rows

__all__ = ["rmsnorm", "plan_rmsnorm", "rmsnorm_reference", "rmsnorm_rows"]
