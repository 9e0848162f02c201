"""matmul, as Hugging Face ``kernels`` loads it on a Trainium machine (build variant ``torch-neuron``).

    kernel = kernels.get_kernel("ORG/matmul", version=1)   # HF kernels, with torch-neuronx and nki installed
    y = kernel.matmul(lhsT, rhs)                            # lhsT (K, M), rhs (K, N) on the Neuron device

The kernel is written against AWS's current ``nki`` package and compiled by it at the first call for each shape.
This directory is not imported by the ``kernels.matmul`` package (which is written in nki_dsl); it is published
unchanged as ``build/torch-neuron/``.
"""

from .matmul import matmul, matmul_kernel

__all__ = ["matmul", "matmul_kernel"]
