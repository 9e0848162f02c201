"""linear: a first-party Hub kernel package (``kernels publish kernels/linear --repo ORG/linear``)."""

from .launcher import (
    layernorm_linear,
    layernorm_mlp,
    linear,
    mlp,
    plan_layernorm_linear,
    plan_layernorm_mlp,
    plan_linear,
    plan_mlp,
)
from .reference import gelu_tanh
from .reference import layernorm_linear as layernorm_linear_reference
from .reference import layernorm_mlp as layernorm_mlp_reference
from .reference import linear as linear_reference

__all__ = ["linear", "plan_linear", "mlp", "plan_mlp", "layernorm_linear", "plan_layernorm_linear", "layernorm_mlp",
           "plan_layernorm_mlp", "linear_reference", "layernorm_linear_reference", "layernorm_mlp_reference",
           "gelu_tanh"]
