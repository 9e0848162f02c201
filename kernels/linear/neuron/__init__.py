"""linear, as Hugging Face ``kernels`` loads it on a Trainium machine (build variant ``torch-neuron``).

    kernel = kernels.get_kernel("ORG/linear", version=1)   # HF kernels, with torch-neuronx and nki installed
    y = kernel.linear(x, w, b, epilogue="gelu")             # x (M, K), w (K, N), b (N,): tensors on the device
    y = kernel.mlp(x, w1, b1, w2, b2, residual)             # residual + gelu(x @ w1 + b1) @ w2 + b2

Written against AWS's current ``nki`` package; not imported by the ``kernels.linear`` package (nki_dsl), published
unchanged as ``build/torch-neuron/``.
"""

from .linear import EPILOGUES, linear, linear_kernel, mlp

__all__ = ["linear", "linear_kernel", "mlp", "EPILOGUES"]
