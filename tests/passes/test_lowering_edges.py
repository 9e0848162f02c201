"""lower-language at its edges: the largest transpose the Vector engine takes and one past it, an accumulation
whose loop does not start at zero, a loop that never runs (possible in parsed IR only: the tracer drops it), and a
load converting its dtype into a tile of another. Each lowered kernel must compute what the traced one computes,
bit for bit (``lowered_matches``)."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.nodes import Op
from nki_dsl.ir.ops.isa import VECTOR_TRANSPOSE_MAX
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes import run_pipeline
from tests.passes.lowering import lowered_matches, run, traced


def ops(kernel, name):
    return [s for s, _ in kernel.walk() if isinstance(s, Op) and s.name == name]


@nki.jit
def transpose_tile(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.transpose(nl.load(x)))
    return out


@pytest.mark.parametrize("shape", [(VECTOR_TRANSPOSE_MAX, VECTOR_TRANSPOSE_MAX), (8, VECTOR_TRANSPOSE_MAX)])
def test_a_transpose_of_at_most_the_vector_limit_runs_on_the_vector_engine(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    low = lowered_matches(transpose_tile, x)
    (t,) = ops(low, "nisa.nc_transpose")
    assert t.attrs["engine"] == "vector"
    assert not ops(low, "nisa.tensor_copy"), "a Vector-engine transpose writes SBUF directly: no copy out of PSUM"


@pytest.mark.parametrize("shape", [(VECTOR_TRANSPOSE_MAX + 1, VECTOR_TRANSPOSE_MAX), (8, VECTOR_TRANSPOSE_MAX + 1)])
def test_a_transpose_one_past_the_vector_limit_runs_on_the_tensor_engine(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    low = lowered_matches(transpose_tile, x)
    (t,) = ops(low, "nisa.nc_transpose")
    assert t.attrs["engine"] == "tensor"
    assert t.result.type.buffer.value == "psum"


@nki.jit
def matmul_sum(a, b, start, stop):
    """The sum over ``start <= i < stop`` of a[i].T @ b[i], accumulated in PSUM from zeros."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(start, stop):
        acc += nl.matmul(nl.load(a[i]), nl.load(b[i]), transpose_x=True)
    nl.store(out, value=acc)
    return out


def _matmul_inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal((3, 128, 128)).astype(np.float32), rng.standard_normal((3, 128, 512)).astype(np.float32)


def test_an_accumulation_in_a_loop_from_a_non_zero_start_begins_at_zero():
    a, b = _matmul_inputs()
    low = lowered_matches(matmul_sum, a, b, start=1, stop=3)
    (acc,) = [op for op in ops(low, "assign") if op.attrs.get("zero_first")]  # the memset was folded away
    want = sum(a[i].T.astype(np.float64) @ b[i] for i in (1, 2))
    np.testing.assert_allclose(run(low, {"a": a, "b": b})[0], want, rtol=1e-4, atol=1e-3)


def test_an_accumulation_loop_that_never_runs_leaves_the_zeros():
    a, b = _matmul_inputs()
    ir, arrays = traced(matmul_sum, a, b, start=0, stop=2)
    text = print_kernel(ir)
    assert text.count("range(0, 2, 1)") == 1
    never = parse_kernel(text.replace("range(0, 2, 1)", "range(0, 0, 1)"))  # only hand-written IR has this
    low = run_pipeline(never, nki.get_target("trn2"))
    assert ops(low, "nisa.memset"), "the zeros cannot fold into a loop with no first iteration"
    (got,) = run(low, arrays)
    np.testing.assert_array_equal(got, np.zeros((128, 512), np.float32))


@nki.jit
def load_converted_into(a, load_dtype):
    """An fp32 tile written by a load of ``load_dtype`` (a dtype name)."""
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    t[...] = nl.load(a, dtype=getattr(nl, load_dtype))
    nl.store(out, value=t)
    return out


def test_a_bf16_load_into_an_fp32_tile_keeps_the_bf16_rounding():
    a = np.random.default_rng(2).standard_normal((128, 512)).astype(np.float32)
    low = lowered_matches(load_converted_into, a, load_dtype="bfloat16")
    (got,) = run(low, {"a": a})
    np.testing.assert_array_equal(got, a.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert not np.array_equal(got, a)


def test_a_load_of_the_tile_dtype_writes_the_tile_in_one_dma():
    a = np.random.default_rng(3).standard_normal((128, 512)).astype(np.float32)
    low = lowered_matches(load_converted_into, a, load_dtype="float32")
    assert len(ops(low, "nisa.dma_copy")) == 2 and not ops(low, "nisa.tensor_copy")


# --- rules that only some kernels reach -------------------------------------------------------------------------------


@nki.jit
def lowering_cases(x, y, w, case):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    a, b = nl.load(x), nl.load(y)
    if case == "masked_binary":  # the mask stays on the instruction: outside it the result is never written
        r = nl.add(a, b, mask=(i_f < 40))
    elif case == "invert_bool":
        r = nl.copy(nl.invert(nl.greater(a, b)), dtype=nl.float32)
    elif case == "invert_int":
        r = nl.copy(nl.invert(nl.copy(a * 100, dtype=nl.int32)), dtype=nl.float32)
    elif case == "mean_bf16":  # the sum stays fp32 until the division (by 48: not a power of two), as np.mean
        r = nl.copy(nl.mean(nl.copy(a[:, 0:48], dtype=nl.bfloat16), axis=1, keepdims=True), dtype=nl.float32)
        r = nl.broadcast_to(r, shape=(128, 64))
    else:  # transpose_psum: a Tensor-engine transpose of a PSUM tile goes through SBUF first
        p = nl.matmul(nl.load(w), a, transpose_x=True)  # [128, 64] in PSUM
        r = nl.transpose(nl.transpose(p))
    nl.store(out, value=r)
    return out


@pytest.mark.parametrize("case", ["masked_binary", "invert_bool", "invert_int", "mean_bf16", "transpose_psum"])
def test_lowered_rules_compute_what_the_traced_kernel_computes(case):
    rng = np.random.default_rng(4)
    x, y = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((128, 128)).astype(np.float32)
    lowered_matches(lowering_cases, x, y, w, case=case)


def test_a_filled_hbm_tensor_is_written_by_a_dma():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        ones = nl.full((128, 64), 2.5, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(ones), nl.load(x)))
        return out

    x = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    low = lowered_matches(kernel, x)
    (fill,) = [op for op in ops(low, "nisa.dma_copy") if op.operands["dst"].tensor.type.buffer.value == "shared_hbm"
               and op.operands["dst"].tensor.name != low.outputs[0].name]  # fmt: skip
    assert fill.loc.line > 0  # located at the nl.full it comes from
    np.testing.assert_array_equal(run(low, {"x": x})[0], x + np.float32(2.5))


def test_an_sbuf_destination_is_written_by_the_vector_instruction_itself():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        t[...] = nl.add(nl.load(x), 1.0)  # the add writes t: no copy
        nl.store(out, value=t)
        return out

    low = lowered_matches(kernel, np.random.default_rng(6).standard_normal((128, 64)).astype(np.float32))
    assert not ops(low, "nisa.tensor_copy")


def test_lowered_tiles_are_named_after_what_they_hold():
    """``%1_0`` is the memset tile of ``%1``'s zeros, ``%store_0`` the SBUF copy a store of PSUM needs: names a
    reader of the lowered listing can trace back."""
    a, b = _matmul_inputs()
    ir, _ = traced(matmul_sum, a, b, start=0, stop=2)
    never = parse_kernel(print_kernel(ir).replace("range(0, 2, 1)", "range(0, 0, 1)"))
    text = print_kernel(run_pipeline(never, nki.get_target("trn2")))
    assert "%1_0 = nisa.memset(" in text and "%store_0 = nisa.tensor_copy(src=%1)" in text
