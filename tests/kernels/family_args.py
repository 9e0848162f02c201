"""The stand-in a launcher gets for a shape family's argument at publish time (hub_client/bundle.py hands it the
same): the argument's spec, its shape (symbolic dimensions included) and dtype, so the launcher's checks and
choices run on what a family declares."""

import numpy as np


class FamilyArg:
    def __init__(self, spec, shape, dtype):
        self.spec, self.shape, self.ndim, self.dtype = spec, shape, len(shape), np.dtype(dtype)
