"""softmax: a first-party Hub kernel package (``kernels publish kernels/softmax --repo ORG/softmax``)."""

from .launcher import plan_softmax, softmax
from .reference import softmax as softmax_reference

__all__ = ["softmax", "plan_softmax", "softmax_reference"]
