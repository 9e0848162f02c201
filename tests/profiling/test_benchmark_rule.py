"""``nki.benchmark``'s one rule: NKI's decorator when the call carries no kernel arguments (nothing after the
kernel but NKI's decorator keywords), the modelled Profile otherwise; the kernel's signature is never consulted."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl


def _scaled(x, iters=1.0):
    """A kernel with a parameter that shares its name with a decorator keyword."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x) * iters)
    return out


def _constant():
    """A kernel without parameters."""
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.full((128, 8), 3.0, dtype=nl.float32))
    return out


X = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)


def _is_profile(value) -> bool:
    return type(value).__name__ == "Profile" and value.latency_us > 0


@pytest.mark.parametrize(
    "decorate",
    [
        lambda f: nki.benchmark(f),
        lambda f: nki.benchmark()(f),
        lambda f: nki.benchmark(warmup=10, iters=100)(f),
        lambda f: nki.benchmark(f, warmup=2, iters=3, save_neff_name="k.neff", save_trace_name="k.ntff"),
        lambda f: nki.benchmark(kernel=f, additional_compile_opt="-O1"),
    ],
)
def test_calls_without_kernel_arguments_decorate(decorate):
    kernel = decorate(_scaled)
    assert isinstance(kernel, nki.jit(_scaled).__class__)
    # iters here is a decorator option, not the kernel's parameter: the kernel keeps its default of 1.0
    np.testing.assert_array_equal(kernel(X), X)


def test_decorating_a_jit_kernel_keeps_it():
    kernel = nki.jit(_scaled)
    assert nki.benchmark(kernel) is kernel and nki.benchmark(kernel, iters=5) is kernel


def test_kernel_arguments_make_it_the_profiler():
    kernel = nki.jit(_scaled)
    spec = nki.spec(X.shape, "float32")
    assert _is_profile(nki.benchmark(kernel, spec))  # a positional argument
    assert _is_profile(nki.benchmark(kernel, x=spec))  # a keyword that is not a decorator option
    assert nki.benchmark(kernel, spec, iters=2.0).target.name == "trn2"  # iters after an argument: the kernel's
    assert _is_profile(nki.benchmark(kernel, x=spec, iters=2.0, target="trn1"))  # target= decides as well


def test_a_kernel_without_parameters_is_profiled_with_a_target():
    kernel = nki.jit(_constant)
    assert nki.benchmark(kernel) is kernel  # no kernel arguments: the decorator
    assert nki.benchmark(kernel, target="trn2").target.name == "trn2"


def test_an_unknown_keyword_on_a_plain_function_is_a_profiler_call_that_asks_for_jit():
    with pytest.raises(nki.NkiApiError, match="decorate it with @nki.jit"):
        nki.benchmark(_scaled, x=nki.spec(X.shape, "float32"))
