"""linear: a first-party Hub kernel package (``kernels publish kernels/linear --repo ORG/linear``)."""

from .launcher import (
    layernorm_linear,
    layernorm_mlp,
    layernorm_qkv,
    linear,
    mlp,
    plan_layernorm_linear,
    plan_layernorm_mlp,
    plan_layernorm_qkv,
    plan_linear,
    plan_mlp,
)
from .reference import gelu_tanh
from .reference import layernorm_linear as layernorm_linear_reference
from .reference import layernorm_mlp as layernorm_mlp_reference
from .reference import layernorm_qkv as layernorm_qkv_reference
from .reference import linear as linear_reference

__all__ = [
    "linear", "plan_linear", "mlp", "plan_mlp", "layernorm_linear", "plan_layernorm_linear", "layernorm_mlp",
    "plan_layernorm_mlp", "layernorm_qkv", "plan_layernorm_qkv", "linear_reference", "layernorm_linear_reference",
    "layernorm_mlp_reference", "layernorm_qkv_reference", "gelu_tanh",
]  # fmt: skip
