"""The XLA options the JAX backend compiles its programs with (``executables.compiler_options``): LLVM level 1 by
default, ``NKI_JAX_XLA_OPT_LEVEL`` overriding it, the options reaching XLA, and results equal bit for bit at
every level (no fast-math: the level changes machine code, not floating point)."""

import jax
import numpy as np
import pytest

import nki_dsl as nki
from kernels.softmax import softmax_rows
from nki_dsl.backends.jax import executables
from nki_dsl.errors import NkiError


def test_level_1_by_default_and_the_environment_overrides_it(monkeypatch):
    monkeypatch.delenv("NKI_JAX_XLA_OPT_LEVEL", raising=False)
    assert executables.compiler_options() == {"xla_backend_optimization_level": 1}
    monkeypatch.setenv("NKI_JAX_XLA_OPT_LEVEL", "3")
    assert executables.compiler_options() == {"xla_backend_optimization_level": 3}
    monkeypatch.setenv("NKI_JAX_XLA_OPT_LEVEL", "xla")
    assert executables.compiler_options() is None  # XLA's own defaults


def test_other_platforms_keep_xlas_default_unless_the_environment_asks(monkeypatch):
    monkeypatch.delenv("NKI_JAX_XLA_OPT_LEVEL", raising=False)
    assert executables.compiler_options("gpu") is None  # the level was measured on CPU only
    monkeypatch.setenv("NKI_JAX_XLA_OPT_LEVEL", "2")
    assert executables.compiler_options("tpu") == {"xla_backend_optimization_level": 2}


def test_a_level_that_is_not_an_integer_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("NKI_JAX_XLA_OPT_LEVEL", "fast")
    with pytest.raises(NkiError, match="NKI_JAX_XLA_OPT_LEVEL='fast'"):
        nki.jit(softmax_rows.fn)(np.ones((128, 8), np.float32), backend="jax")


def test_the_options_reach_xla(monkeypatch):
    seen = []
    compile_ = jax.stages.Lowered.compile

    def spy(self, compiler_options=None):
        seen.append(compiler_options)
        return compile_(self, compiler_options)

    monkeypatch.setattr(jax.stages.Lowered, "compile", spy)
    monkeypatch.setenv("NKI_JAX_XLA_OPT_LEVEL", "2")
    nki.jit(softmax_rows.fn)(np.ones((128, 8), np.float32), backend="jax")
    assert seen == [{"xla_backend_optimization_level": 2}]


def test_results_are_the_same_bits_at_every_level(monkeypatch):
    x = np.random.default_rng(0).standard_normal((200, 96)).astype(np.float32)  # a ragged last tile: masked ops
    got = {}
    for level in ("xla", "1", "0"):
        monkeypatch.setenv("NKI_JAX_XLA_OPT_LEVEL", level)
        got[level] = np.asarray(nki.jit(softmax_rows.fn)(x, backend="jax"))  # a fresh kernel: compiled again
    np.testing.assert_array_equal(got["1"], got["xla"])
    np.testing.assert_array_equal(got["0"], got["xla"])
    np.testing.assert_allclose(got["1"], softmax_rows(x), rtol=1e-6, atol=1e-7)
