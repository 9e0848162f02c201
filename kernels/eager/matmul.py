"""The eager matmul: ``x @ w`` as a framework runs a matmul op, i.e. the library's linear kernel with no epilogue
(the same Tensor-engine schedule; the bias, activation and residual then run as their own ops)."""

from kernels.linear.kernel import linear_kernel


def plan_matmul(x, w):
    return linear_kernel, (x, w), {"epilogue": "none"}
