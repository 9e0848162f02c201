"""The compile cache: keyed by source hash, argument shapes/dtypes, compile-time constants and grid."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.trace.jit import TRACE_HOOKS


@pytest.fixture
def traces():
    """The names of kernels traced while the test runs."""
    seen = []
    hook = lambda kernel, target: seen.append(kernel.name)
    TRACE_HOOKS.append(hook)
    yield seen
    TRACE_HOOKS.remove(hook)


def _scale(a, factor):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(a), factor))
    return out


def test_same_specs_trace_once(traces):
    scale = nki.jit(_scale)
    a = np.ones((128, 64), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(scale(a, 2.0), 2 * a)
    np.testing.assert_array_equal(scale(a + 1, 2.0), 2 * (a + 1))  # new values, same spec: no retrace
    assert traces.count("_scale") == 1


def test_shape_dtype_and_constants_are_part_of_the_key(traces):
    scale = nki.jit(_scale)
    a = np.ones((128, 32), np.float32)
    scale(a, 3.0)
    scale(a, 3.0)
    scale(a, 4.0)  # a constant argument is baked into the IR: a new specialisation
    scale(a.astype(np.float16), 4.0)
    scale(np.ones((64, 32), np.float32), 4.0)
    assert traces.count("_scale") == 4
    np.testing.assert_array_equal(scale(a, 4.0), 4 * a)


def test_grid_is_part_of_the_key(traces):
    @nki.jit
    def fill_rows(a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        nl.store(out[rows, nl.arange(8)[None, :]], value=nl.add(nl.load(a[rows, nl.arange(8)[None, :]]), 1.0))
        return out

    a = np.zeros((256, 8), np.float32)
    np.testing.assert_array_equal(fill_rows[2](a), a + 1)
    np.testing.assert_array_equal(fill_rows[2](a), a + 1)
    half = fill_rows[1](a)
    assert traces.count("fill_rows") == 2
    np.testing.assert_array_equal(half[:128], 1)
    assert np.isnan(half[128:]).all(), "rows no program wrote must read as poison, not zero"
