"""softmax, as Hugging Face ``kernels`` loads it on a Trainium machine (build variant ``torch-neuron``).

    kernel = kernels.get_kernel("ORG/softmax", version=1)   # HF kernels, with torch-neuronx and nki installed
    y = kernel.softmax(x)                                    # x: 2-D torch tensor on the Neuron device

The kernel is written against AWS's current ``nki`` package and compiled by it at the first call for each shape.
This directory is not imported by the ``kernels.softmax`` package (which is written in nki_dsl); it is published
unchanged as ``build/torch-neuron/``.
"""

from .softmax import MAX_COLUMNS, softmax, softmax_kernel

__all__ = ["softmax", "softmax_kernel", "MAX_COLUMNS"]
