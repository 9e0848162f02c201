"""layernorm: a first-party Hub kernel package (``kernels publish kernels/layernorm --repo ORG/layernorm``)."""

from .launcher import layernorm, plan_layernorm
from .reference import layernorm as layernorm_reference
from .whole_row import layernorm_rows

__all__ = ["layernorm", "plan_layernorm", "layernorm_reference", "layernorm_rows"]
