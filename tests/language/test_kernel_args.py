"""Kernel arguments: Python values are compile-time constants and part of the trace cache key; ``nki.typing``
annotations on parameters and locals are accepted."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
import nki_dsl.typing as nt
from tests.backend_fixture import backend_independent
from tests.language.support import F32, rand


@nki.jit
def scaled_kernel(x, scale, activation=None, shape=(128, 32)):
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0 : shape[0], 0 : shape[1]]) * scale
    if activation is not None:  # a constant: ordinary Python control flow at trace time
        t = activation(t)
    nl.store(out, value=t)
    return out


def test_constants_are_part_of_the_cache_key():
    # A jit object of its own: its cache starts empty whatever other tests traced (and in whatever order they ran).
    kernel = nki.jit(scaled_kernel.fn)
    x = rand((128, 64), F32, seed=1)
    np.testing.assert_array_equal(kernel(x, 2.0), x[:, :32] * 2)
    np.testing.assert_array_equal(kernel(x, 3.0), x[:, :32] * 3)  # not the 2.0 trace
    np.testing.assert_array_equal(kernel(x, 2.0), x[:, :32] * 2)  # the 2.0 trace again
    assert len(kernel._traced) == 2
    np.testing.assert_array_equal(kernel(x, 1.0, nl.abs), np.abs(x[:, :32]))
    np.testing.assert_array_equal(kernel(x, 1.0, shape=(64, 64)), x[:64])  # a tuple constant
    assert len(kernel._traced) == 4


@backend_independent
def test_constants_appear_in_the_ir():
    text = nki.trace(scaled_kernel, rand((128, 64), F32), 0.5).text
    assert 'const "scale" = 0.5' in text


@nki.jit
def typed_kernel(a: nt.tensor[128, 512], b: nt.tensor[128, 512]) -> nt.tensor[128, 512]:
    out: nt.tensor[128, 512] = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta: nt.tensor[128, 512] = nl.load(a)
    nl.store(out, value=ta - nl.load(b))
    return out


def test_typing_annotations():
    a, b = rand((128, 512), F32, seed=2), rand((128, 512), F32, seed=3)
    np.testing.assert_array_equal(typed_kernel(a, b), a - b)
    assert repr(nt.tensor[128, 512]) == "nki.typing.tensor"
