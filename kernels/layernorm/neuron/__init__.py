"""layernorm, as Hugging Face ``kernels`` loads it on a Trainium machine (build variant ``torch-neuron``).

    kernel = kernels.get_kernel("ORG/layernorm", version=1)   # HF kernels, with torch-neuronx and nki installed
    y = kernel.layernorm(x, gamma, beta, epsilon=1e-6)         # x (rows, n), gamma/beta (n,): tensors on the device

Written against AWS's current ``nki`` package; not imported by the ``kernels.layernorm`` package (nki_dsl),
published unchanged as ``build/torch-neuron/``.
"""

from .layernorm import MAX_COLUMNS, layernorm, layernorm_kernel

__all__ = ["layernorm", "layernorm_kernel", "MAX_COLUMNS"]
