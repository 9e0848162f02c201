"""``nl.full`` lowers to a memset of the constant as the tile's dtype holds it: integers keep their exact value
(an fp32 detour would round 2**25 + 1 to 2**25), floats round once to the dtype."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.passes.lowering import lowered_matches


@nki.jit
def filled(x, value, dtype):
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    t = nl.full(x.shape, value, dtype=dtype, buffer=nl.sbuf)
    nl.store(out, value=t)
    return out


@pytest.mark.parametrize("value, dtype", [
    (2**25 + 1, "int32"), (-(2**31) - 5, "int32"), (300, "int8"), (1.0 + 2**-10, "bfloat16"), (1e39, "float32"),
])  # fmt: skip
def test_lowered_fill_holds_the_same_value_as_the_traced_one(value, dtype):
    x = np.zeros((128, 8), np.float32)
    lowered_matches(filled, x, value, dtype)
    if dtype == "int32" and value > 0:
        assert (filled(x, value, dtype) == value).all()
