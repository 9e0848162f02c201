"""The public entry points around ``@nki.jit``: emit, simulate_kernel, the NKI run decorators, parse_ir."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl


def _softplus(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.log(nl.add(nl.exp(nl.load(x)), 1.0)))
    return out


X = np.random.default_rng(1).standard_normal((128, 32)).astype(np.float32)
EXPECTED = np.log1p(np.exp(X.astype(np.float64)))  # the kernel rounds twice in fp32: allow a few ulps


def test_emit_returns_the_numpy_source_that_runs():
    source = nki.emit(nki.jit(_softplus), X, backend="numpy")
    compile(source, "<emitted>", "exec")
    assert "np.exp(" in source and "np.log(" in source
    assert nki.emit(nki.jit(_softplus), X) == source  # numpy is the default backend


def test_emit_target_is_the_deprecated_spelling_of_backend():
    kernel = nki.jit(_softplus)
    with pytest.warns(DeprecationWarning, match="backend="):
        old = nki.emit(kernel, X, target="simulator")
    assert old == nki.emit(kernel, X, backend="simulator") != nki.emit(kernel, X, backend="numpy")


def test_simulate_kernel_runs_on_the_numpy_reference():
    np.testing.assert_allclose(nki.simulate_kernel(nki.jit(_softplus), X), EXPECTED, rtol=1e-5)


@pytest.mark.parametrize("decorator", [nki.benchmark, nki.profile, nki.baremetal])
def test_run_decorators_run_the_kernel(decorator):
    plain = decorator(_softplus)
    with_options = decorator(warmup=2, iters=5, save_neff_name="file.neff")(_softplus)
    for kernel in (plain, with_options):
        np.testing.assert_allclose(kernel(X), EXPECTED, rtol=1e-5)


def test_parse_ir_verifies_what_it_parses():
    text = nki.trace(nki.jit(_softplus), X).text
    assert nki.parse_ir(text).text == text
    tall = text.replace("f32[128, 32]", "f32[256, 32]")
    with pytest.raises(nki.NkiVerificationError, match="exceeding the partition limit of 128"):
        nki.parse_ir(tall)


def test_a_function_without_jit_is_refused_by_name():
    with pytest.raises(nki.NkiApiError, match="'_softplus' is not an NKI kernel: decorate it with @nki.jit"):
        nki.simulate_kernel(_softplus, X)


def test_parsed_ir_compiles_on_each_backend_without_its_python():
    text = nki.trace(nki.jit(_softplus), X).text
    parsed = nki.parse_ir(text)
    assert parsed.param_names == ["x"] and {"numpy", "simulator"} <= set(nki.backend_names())
    for backend in nki.backend_names():
        np.testing.assert_allclose(parsed.compile(backend, target="trn1").run({"x": X}), EXPECTED, rtol=1e-5)


def test_public_tool_entry_points():
    """The public names the benchmarks time the simulator and the parser with."""
    kernel = nki.jit(_softplus)
    traced = nki.trace(kernel, X)
    first, again = traced.profile("trn1"), traced.profile("trn1")
    assert first is not again and first.latency_us == again.latency_us  # simulated every call, same model
    assert first.target is nki.get_target("trn1") and isinstance(first.target, nki.Target)
    ir = nki.parse_ir_unverified(traced.text)
    assert nki.TracedKernel(ir).text == traced.text
    tall = traced.text.replace("f32[128, 32]", "f32[256, 32]")
    assert nki.parse_ir_unverified(tall).params[0].type.shape == (256, 32)  # parsed, not verified
    with pytest.raises(nki.NkiVerificationError):
        nki.parse_ir(tall)
