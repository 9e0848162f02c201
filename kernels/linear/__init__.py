"""linear: a first-party Hub kernel package (``kernels publish kernels/linear --repo ORG/linear``)."""

from .launcher import linear, mlp, plan_linear, plan_mlp
from .reference import gelu_tanh
from .reference import linear as linear_reference

__all__ = ["linear", "plan_linear", "mlp", "plan_mlp", "linear_reference", "gelu_tanh"]
