"""rmsnorm, as Hugging Face ``kernels`` loads it on a Trainium machine (build variant ``torch-neuron``).

    kernel = kernels.get_kernel("ORG/rmsnorm", version=1)   # HF kernels, with torch-neuronx and nki installed
    y = kernel.rmsnorm(x, g, epsilon=1e-6)                   # x (rows, n), g (n,): torch tensors on the device

Written against AWS's current ``nki`` package; not imported by the ``kernels.rmsnorm`` package (nki_dsl), published
unchanged as ``build/torch-neuron/``.
"""

from .rmsnorm import rmsnorm, rmsnorm_kernel

__all__ = ["rmsnorm", "rmsnorm_kernel"]
