"""Shared harness helpers: seeded inputs, bf16 via ml_dtypes, comparisons in float64."""

import ml_dtypes
import numpy as np
import pytest

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
# Tolerances for a float64 reference: bf16 rounds every stored tile to 8 bits of mantissa.
TOLERANCE = {"float32": dict(rtol=2e-5, atol=2e-5), "bfloat16": dict(rtol=4e-2, atol=4e-2)}


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def as64(x):
    return np.asarray(x).astype(np.float64)
