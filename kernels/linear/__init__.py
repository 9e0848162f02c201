"""linear: a first-party Hub kernel package (``kernels publish kernels/linear --repo ORG/linear``)."""

from .launcher import linear, plan_linear
from .reference import gelu_tanh
from .reference import linear as linear_reference

__all__ = ["linear", "plan_linear", "linear_reference", "gelu_tanh"]
