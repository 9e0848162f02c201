"""Sub-kernels: an ``@nki.jit(mode='trace')`` (or plain ``@nki.jit``) function called from inside a kernel runs
inline on the caller's tiles and HBM tensors, with its ops at its own source lines."""

import inspect

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.nodes import Loop
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.language.support import F32, exact, rand
from tests.trace import subkernel_helpers


@pytest.fixture
def traces():
    seen = []
    hook = lambda kernel, target: seen.append(kernel)
    TRACE_HOOKS.append(hook)
    yield seen
    TRACE_HOOKS.remove(hook)


@nki.jit(mode="trace")
def softmax_rows(scores, scale):
    """SBUF tile in, SBUF tile out: softmax of ``scale * scores`` along the free axis."""
    row_max = nl.max(scores, axis=1, keepdims=True)
    e = nl.exp(nl.multiply(nl.subtract(scores, row_max), scale))
    return nl.divide(e, nl.sum(e, axis=1, keepdims=True))


@nki.jit
def row_softmax_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[nl.ds(i * 128, 128), :])
        nl.store(out[nl.ds(i * 128, 128), :], value=softmax_rows(t, 0.5))
    return out


def _softmax(x, scale):
    v = exact(x) * scale
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _all_ops(body):
    for s in body:
        if isinstance(s, Loop):
            yield from _all_ops(s.body)
        else:
            yield s


def test_a_trace_mode_helper_on_sbuf_tiles_is_inlined(traces):
    x = rand((256, 64), F32, -4, 4, seed=21)
    got = row_softmax_kernel(x)
    np.testing.assert_allclose(got, _softmax(x, 0.5), rtol=1e-5, atol=1e-7)
    assert [k.name for k in traces] == ["row_softmax_kernel"]  # the helper is not a kernel of its own
    kernel = traces[0]
    assert [p.name for p in kernel.params] == ["x"]
    assert {op.name for op in _all_ops(kernel.body)} >= {"nl.exp", "nl.divide", "nl.max", "nl.sum"}


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_helper_ops_keep_the_helpers_source_lines():
    kernel = nki.trace(row_softmax_kernel, rand((128, 64), F32)).ir
    exp = next(op for op in _all_ops(kernel.body) if op.name == "nl.exp")
    assert exp.loc.line == _line_of(softmax_rows.fn, "nl.exp(")
    assert exp.loc.file == inspect.getsourcefile(softmax_rows.fn)
    store = next(op for op in _all_ops(kernel.body) if op.name == "nl.store")
    assert store.loc.line == _line_of(row_softmax_kernel.fn, "nl.store(")


@nki.jit
def store_scaled(dst, tile, factor):
    """Writes into an HBM tensor its caller owns."""
    nl.store(dst, value=nl.multiply(tile, factor))


@nki.jit
def add_one(x):
    """A complete kernel, also usable as a sub-kernel: its output becomes a tensor of the caller."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        rows = nl.ds(i * 128, 128)
        nl.store(out[rows, :], value=nl.add(nl.load(x[rows, :]), 1.0))
    return out


@nki.jit
def scaled_rows_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        rows = nl.ds(i * 128, 128)
        store_scaled(out[rows, :], nl.load(x[rows, :]), 3.0)
    return out, add_one(x)


def test_a_helper_writes_into_the_callers_hbm_output(traces):
    x = rand((256, 32), F32, seed=22)
    scaled, plus_one = scaled_rows_kernel(x)
    np.testing.assert_array_equal(scaled, (x * np.float32(3)).astype(F32))
    np.testing.assert_array_equal(plus_one, (exact(x) + 1).astype(F32))
    assert [k.name for k in traces] == ["scaled_rows_kernel"]
    assert [p.name for p in traces[0].params] == ["x"]
    np.testing.assert_array_equal(add_one(x), plus_one)  # and on its own it is still a kernel


@nki.jit(mode="trace")
def bad_matmul(a, b):
    return nl.matmul(a, b, transpose_x=True)


@nki.jit
def calls_bad_matmul(a, b):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=bad_matmul(nl.load(a), nl.load(b)))
    return out


def test_errors_inside_a_helper_name_the_helpers_line():
    line = _line_of(bad_matmul.fn, "nl.matmul(")
    with pytest.raises(nki.NkiError, match=rf"test_subkernels.py:{line}: nl.matmul: .*contraction"):
        calls_bad_matmul(rand((128, 128), F32), rand((64, 64), F32))


@nki.jit
def grid_call_kernel(x, how):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if how == "grid":
        store_scaled[2](out, nl.load(x), 2.0)
    else:
        store_scaled(out, nl.load(x))
    return out


def test_sub_kernel_misuse_is_reported_at_the_call():
    x = rand((128, 8), F32)
    line = _line_of(grid_call_kernel.fn, "store_scaled[2]")
    with pytest.raises(nki.NkiApiError, match=rf"test_subkernels.py:{line}: sub-kernel store_scaled is called with "
                                              r"a launch grid \[2\]"):  # fmt: skip
        grid_call_kernel(x, "grid")
    with pytest.raises(nki.NkiApiError, match=rf"test_subkernels.py:{line + 2}: sub-kernel store_scaled: missing"):
        grid_call_kernel(x, "args")


@nki.jit
def rms_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=subkernel_helpers.rms_scale(nl.load(x), 1e-6))
    return out


def test_a_helper_from_another_file_keeps_its_file_in_the_ir():
    x = rand((128, 96), F32, seed=23)
    v = exact(x)
    want = v / np.sqrt((v * v).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(rms_kernel(x), want, rtol=1e-5)
    traced = nki.trace(rms_kernel, x)
    rsqrt = next(op for op in _all_ops(traced.ir.body) if op.name == "nl.rsqrt")
    assert rsqrt.loc.file == inspect.getsourcefile(subkernel_helpers.rms_scale.fn)
    assert f'loc("{rsqrt.loc.file}":{_line_of(subkernel_helpers.rms_scale.fn, "nl.rsqrt(")})' in traced.text
    assert nki.parse_ir(traced.text).text == traced.text


# -- the trace cache key covers the helpers a kernel inlines -------------------------------------------------------


@nki.jit(mode="trace")
def _scaled_a(tile):
    return nl.multiply(tile, 2.0)


@nki.jit(mode="trace")
def _scaled_b(tile):
    return nl.multiply(tile, 3.0)


@nki.jit(mode="trace")
def _scaled_c(tile, eps):
    return nl.multiply(tile, 3.0)


def _times(t):
    return nl.multiply(t, 5.0)


_helper = _scaled_a
_plain_helper = _times


@nki.jit
def _calls_helper(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=_helper(nl.load(x)))
    return out


@nki.jit
def _calls_plain_helper(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=_plain_helper(nl.load(x)))
    return out


def test_rebinding_a_trace_mode_helper_retraces_its_caller(monkeypatch):
    x = rand((128, 32), F32, -1, 1, seed=3)
    np.testing.assert_array_equal(_calls_helper(x), x * np.float32(2))
    count = _calls_helper.trace_count
    np.testing.assert_array_equal(_calls_helper(x), x * np.float32(2))
    assert _calls_helper.trace_count == count  # unchanged helper: the trace is reused
    monkeypatch.setitem(globals(), "_helper", _scaled_b)  # the helper edited (a cell run again, a reload)
    np.testing.assert_array_equal(_calls_helper(x), x * np.float32(3))
    assert _calls_helper.trace_count == count + 1


def test_editing_a_plain_helper_function_retraces_its_caller(monkeypatch):
    x = rand((128, 32), F32, -1, 1, seed=4)
    np.testing.assert_array_equal(_calls_plain_helper(x), x * np.float32(5))
    edited = lambda t: nl.multiply(t, 7.0)  # noqa: E731 - a function object with other code
    monkeypatch.setitem(globals(), "_plain_helper", edited)
    np.testing.assert_array_equal(_calls_plain_helper(x), x * np.float32(7))


def test_a_helper_reached_through_a_module_attribute_is_in_the_key(monkeypatch):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=subkernel_helpers.rms_scale(nl.load(x), 1e-6))
        return out

    x = rand((128, 32), F32, -1, 1, seed=5)
    first = k(x)
    monkeypatch.setattr(subkernel_helpers, "rms_scale", _scaled_c)
    np.testing.assert_array_equal(k(x), x * np.float32(3))
    assert not np.array_equal(first, k(x))
