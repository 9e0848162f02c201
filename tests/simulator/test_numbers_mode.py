"""Numbers-and-timing mode: the simulator takes the traced IR, lowers and allocates it itself, and returns the NumPy
reference run of the LOWERED IR (what it times). Those outputs equal the NumPy reference of the traced IR bit for
bit for every op family, the benchmark kernels and the tutorials' kernels (float32, and fp16 in tutorial 1).

Documented tolerance: ``nl.cos`` / ``nl.tan`` lower to the Scalar engine's ``sin`` of ``x + pi/2`` and differ by
the fp32 rounding of that sum (2e-6 here, as in tests/passes/test_lower_ops.py); nothing else needs one."""

import runpy
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from benchmarks import reference_cases
from kernels.matmul import matmul_tiled
from kernels.rmsnorm import rmsnorm_rows
from kernels.softmax import softmax_rows
from kernels.softmax.kernel import softmax_kernel
from nki_dsl import backends
from nki_dsl.backends.simulator import simulate
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.ir.ops.language import REDUCTIONS, UNARY_NL
from nki_dsl.passes import run_pipeline
from nki_dsl.targets import get_target
from nki_dsl.trace.jit import as_launch
from tests.passes import test_lower_ops as ops
from tests.passes.test_lower_select import _where_kernel

ROOT = Path(__file__).parents[2]
TRN2 = get_target("trn2")
RNG = np.random.default_rng(5)
X = (RNG.standard_normal((128, 64)) * 3).astype(np.float32)
Y = (RNG.standard_normal((128, 64)) * 3).astype(np.float32)
APPROXIMATE = {"cos": 2e-6, "tan": 2e-6}


def traced(kernel, *args):
    launch = as_launch(kernel)
    ir, arrays, _ = launch.jit.specialize(launch.grid, args, {}, TRN2)
    return ir, arrays


def outputs_match(kernel, *args, tol=0.0):
    """Simulate ``kernel`` with data; its outputs must equal the NumPy reference of the traced IR."""
    ir, arrays = traced(kernel, *args)
    want = backends.load("numpy").compile_kernel(ir).run(arrays)
    got, prof = simulate(ir, arrays, TRN2)
    want, got = (w if isinstance(w, tuple) else (w,) for w in (want, got))
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape
        if tol:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), atol=tol, rtol=tol)
        else:
            np.testing.assert_array_equal(g, w)
    assert prof.instructions > 0 and prof.latency_ns > 0
    return prof


@pytest.mark.parametrize("fn", UNARY_NL)
def test_unary(fn):
    x = np.abs(X) + 0.5 if fn in ops.POSITIVE else X
    if fn == "invert":
        x = ops.INTS
    elif fn == "logical_not":
        x = X.round()
    elif fn == "tan":
        x = np.clip(X, -1.2, 1.2)
    outputs_match(ops._unary_kernel(fn), x, tol=APPROXIMATE.get(fn, 0.0))


@pytest.mark.parametrize("form", ["tiles", "imm_left", "column_right"])
@pytest.mark.parametrize("fn", ops.FLOAT_BINARY)
def test_binary(fn, form):
    y = np.abs(Y) + 0.5 if fn in ("power", "mod", "fmod", "divide") else Y
    outputs_match(ops._binary_kernel(fn, form), np.abs(X) if fn == "power" else X, y)


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name):
    outputs_match(ops._reduce_kernel(name, True), X.round() if name == "all" else X)


def test_reductions_in_bf16():
    for name in ("mean", "var", "sum"):
        outputs_match(ops._reduce_kernel(name, True), X.astype(ml_dtypes.bfloat16))


def test_data_movement_transposes_broadcasts_and_assignments():
    outputs_match(ops._movement, X, Y[:1])


def test_matmul_layouts_psum_accumulation_and_fills():
    outputs_match(ops._matmuls, X, np.concatenate([Y, Y], axis=1))


def test_masked_transposing_load_and_store():
    outputs_match(ops._masked, X[:100])


def test_expand_dims():
    outputs_match(ops._expand, X)


@pytest.mark.parametrize("x_kind, y_kind", [("tile", "number"), ("row", "col")])
def test_where(x_kind, y_kind):
    row, col = Y[:1], Y[:, :1]
    outputs_match(_where_kernel(x_kind, y_kind), X, Y, row, col)


@nki.jit
def _isa_kernel(x, w):
    """nisa instructions called directly: each keeps the engine it names."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(w)  # [128, 128]
    act = nisa.activation(nl.exp, a, bias=nisa.tensor_reduce(nl.maximum, a, axis=1, keepdims=True, negate=True),
                          scale=1.0)  # fmt: skip
    s = nisa.tensor_scalar(act, nl.multiply, 0.5, op1=nl.add, operand1=1.0)
    tt = nisa.tensor_tensor(s, a, nl.subtract)
    m = nisa.nc_matmul(b, tt)  # b.T @ tt in PSUM
    idx = nisa.iota(nl.arange(128)[:, None] + nl.arange(64)[None, :], dtype=nl.float32)
    sel = nisa.affine_select(nl.arange(128)[:, None] >= nl.arange(64)[None, :], m, 0.0)
    nl.store(out, value=nl.add(sel, idx))
    return out


def test_nisa_instructions():
    outputs_match(_isa_kernel, X, np.concatenate([Y, Y], axis=1) / 8)


CASES = reference_cases.cases(np.random.default_rng(0))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_benchmark_kernels(case):
    _, kernel, _, args = case
    outputs_match(kernel, *args)


def _lesson(name):
    return runpy.run_path(str(ROOT / "tutorials" / name), run_name="lesson")


def test_tutorial_kernels():
    rng = np.random.default_rng(1)
    a, b = (rng.random((256, 1024)).astype(np.float16) for _ in range(2))
    outputs_match(_lesson("01_tensor_add.py")["add_kernel"][2, 2], a, b)
    lhsT, rhs = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((512, 1024)).astype(np.float32)
    outputs_match(matmul_tiled, lhsT, rhs)  # lesson 2 runs the library's kernel
    outputs_match(softmax_kernel, rng.standard_normal((384, 256)).astype(np.float32))  # lesson 3 reads the library's


def test_lowering_and_allocation_are_cached_per_kernel_and_target():
    ir, _ = traced(softmax_rows, X)
    a, b, c = prepare(ir, get_target("trn2")), prepare(ir, get_target("trn2")), prepare(ir, get_target("trn1"))
    assert a is b and a is not c
    assert a.stream() is b.stream()


def test_an_already_lowered_kernel_simulates_the_same():
    ir, arrays = traced(rmsnorm_rows, X, X[0])
    low = run_pipeline(ir, TRN2)
    out_traced, p_traced = simulate(ir, arrays, TRN2)
    out_lowered, p_lowered = simulate(low, arrays, TRN2)
    np.testing.assert_array_equal(out_traced, out_lowered)
    assert p_traced.latency_ns == p_lowered.latency_ns and p_traced.instructions == p_lowered.instructions
