"""Where a call that names no backend runs (``nki_dsl/backends/__init__.py``): ``nki.use_backend``, then
``NKI_BACKEND``, then JAX for JAX arrays in, then the NumPy reference; ``backend=`` always wins. The same rule for a
plain launch, a library launcher, ``TracedKernel.compile``, a current-API kernel and a Hub entry point."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nki_dsl as nki
from kernels.softmax import softmax
from kernels.softmax.reference import softmax as softmax_reference
from nki_dsl.errors import NkiApiError

X = np.random.default_rng(0).standard_normal((130, 64)).astype(np.float32)  # a ragged second row tile


@pytest.fixture(autouse=True)
def no_default_set(monkeypatch):
    monkeypatch.delenv("NKI_BACKEND", raising=False)


def _ran_on(kernel) -> set[str]:
    return {backend for (_, backend) in kernel._compiled}


def test_numpy_arrays_run_on_the_reference_and_jax_arrays_on_jax():
    from kernels.softmax.kernel import softmax_kernel

    assert nki.default_backend(X) == "numpy" and nki.default_backend() == "numpy"
    assert isinstance(softmax(X), np.ndarray)
    out = softmax(jnp.asarray(X))
    assert isinstance(out, jax.Array) and nki.default_backend(jnp.asarray(X)) == "jax"
    np.testing.assert_allclose(np.asarray(out), softmax_reference(X), rtol=1e-5, atol=1e-7)
    assert _ran_on(softmax_kernel) >= {"numpy", "jax"}
    assert isinstance(softmax(jnp.asarray(X), backend="numpy"), np.ndarray)  # named: it wins


def test_a_launcher_inside_jax_jit_runs_on_jax():
    double = jax.jit(lambda x: 2.0 * softmax(x))  # x is a tracer: NumPy could not take it
    np.testing.assert_allclose(np.asarray(double(X)), 2.0 * softmax_reference(X), rtol=1e-5, atol=1e-7)


def test_use_backend_and_the_environment_choose_where_unnamed_calls_run(monkeypatch):
    with nki.use_backend("jax"):
        assert nki.default_backend(X) == "jax"
        assert isinstance(softmax(X), jax.Array)  # NumPy arrays in, JAX arrays out
        assert isinstance(softmax(X, backend="numpy"), np.ndarray)
        with nki.use_backend("numpy"):
            assert isinstance(softmax(jnp.asarray(X)), np.ndarray)  # set explicitly: not overridden by the input
        assert nki.default_backend() == "jax"
    assert nki.default_backend() == "numpy"
    monkeypatch.setenv("NKI_BACKEND", "jax")
    assert isinstance(softmax(X), jax.Array)
    with nki.use_backend("numpy"):  # the block is nearer the call than the environment
        assert isinstance(softmax(X), np.ndarray)


def test_unknown_names_are_refused_naming_where_they_came_from(monkeypatch):
    with pytest.raises(NkiApiError, match=r"use_backend='gpu' names no backend; available: jax, numpy"):
        nki.use_backend("gpu").__enter__()
    monkeypatch.setenv("NKI_BACKEND", "cuda")
    with pytest.raises(NkiApiError, match=r"NKI_BACKEND='cuda' names no backend"):
        softmax(X)


def test_traced_kernels_and_current_api_kernels_follow_the_default(monkeypatch):
    from kernels.softmax.kernel import softmax_kernel

    traced = nki.trace(softmax_kernel, X)
    with nki.use_backend("jax"):
        out = traced.compile().run({"x": X})
    assert isinstance(out, jax.Array)
    assert isinstance(traced.compile().run({"x": X}), np.ndarray)

    import nki_dsl.compat

    nki_dsl.compat.install()
    import importlib.util
    import sys
    from pathlib import Path

    name = "_test_default_backend_neuron_softmax"
    path = Path(__file__).parents[2] / "kernels" / "softmax" / "neuron" / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    with nki.use_backend("jax"):
        assert isinstance(module.softmax(X), jax.Array)
        monkeypatch.setenv("NKI_SIMULATOR", "1")  # NKI's own switch, for launches that name no backend
        assert isinstance(module.softmax(X), np.ndarray)
        assert "simulator" in _ran_on(module.softmax_kernel)
