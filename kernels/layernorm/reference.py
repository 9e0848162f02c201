"""The NumPy reference the kernel is checked against: computed in float64, returned in the input's dtype."""

import numpy as np


def layernorm(x, gamma, beta, epsilon=1e-6):
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + epsilon) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)
    return y.astype(x.dtype)
