"""softmax: a first-party Hub kernel package (``kernels publish kernels/softmax --repo ORG/softmax``)."""

from .launcher import plan_softmax, softmax
from .reference import softmax as softmax_reference
from .whole_row import softmax_rows

__all__ = ["softmax", "plan_softmax", "softmax_reference", "softmax_rows"]
