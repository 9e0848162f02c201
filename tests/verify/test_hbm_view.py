"""``hbm.view`` (ir/hbm_views.py) in IR from outside: the text round-trips through the printer and both readers,
the ``hbm-view`` rule refuses every view the backends could not alias (past its source, a different size or
shape, part of a tensor, another memory, ``bool``, a last dimension that does not divide), naming file:line, op,
operand and rule; and the dependence rules see a view and its tensor as one storage. Each refusal has an accepted
counterpart that runs."""

import numpy as np
import pytest

from nki_dsl.backends.numpy_ref import compile_kernel
from nki_dsl.ir import parser
from nki_dsl.ir.budget import DEFAULT_BUDGET
from nki_dsl.ir.fastread import Reader
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes.verifier import verify_kernel
from nki_dsl.targets import get_target

DMA = '{dst_rmw_op = none, oob_mode = "error", dge_mode = "unknown"}'
VIEWED = f"""\
kernel k(%bits: i32[128, 64] hbm) -> (%0) {{
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 64] shared_hbm loc(3)
  %v = hbm.view(x=%0) : i32[128, 64] shared_hbm loc(4)
  %t = alloc() : i32[128, 64] sbuf loc(5)
  nisa.dma_copy(dst=%t, src=%bits) {DMA} loc(6)
  nisa.dma_copy(dst=%v, src=%t) {DMA} loc(7)
}}
"""


def _diagnostics(text: str):
    return verify_kernel(parse_kernel(text), get_target("trn2"))


def test_the_accepted_view_round_trips_through_both_readers_and_writes_its_tensors_bits():
    fast = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(Reader(VIEWED).start())
    slow = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(parser._lark().parse(VIEWED))
    assert print_kernel(fast) == print_kernel(slow) == VIEWED
    assert _diagnostics(VIEWED) == []
    bits = np.random.default_rng(3).integers(-(2**31), 2**31 - 1, (128, 64)).astype(np.int32)
    out = compile_kernel(parse_kernel(VIEWED)).run({"bits": bits})
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.view(np.int32), bits)


@pytest.mark.parametrize("old, new, message", [
    ("%v = hbm.view(x=%0) : i32[128, 64]", "%v = hbm.view(x=%0) : i32[128, 65]",
     "result %v i32[128, 65] in 'shared_hbm' reaches 512 bytes past the end of its source: a view of %0 f32[128, 64] "
     "in 'shared_hbm' as int32 has shape [128, 64] (the last dimension scaled by 4/4, §2.7)"),
    ("%v = hbm.view(x=%0) : i32[128, 64]", "%v = hbm.view(x=%0) : i32[64, 128]",
     "result %v i32[64, 128] in 'shared_hbm' holds the same bytes in another shape: a view of %0 f32[128, 64] in "
     "'shared_hbm' as int32 has shape [128, 64]"),
    ("%v = hbm.view(x=%0) : i32[128, 64]", "%v = hbm.view(x=%0) : u8[128, 100]",
     "result %v u8[128, 100] in 'shared_hbm' covers 12800 of its source's 32768 bytes: a view of %0 f32[128, 64] in "
     "'shared_hbm' as uint8 has shape [128, 256] (the last dimension scaled by 4/1, §2.7)"),
    ("%v = hbm.view(x=%0) : i32[128, 64]", "%v = hbm.view(x=%0[d0, d1 ; 64x64]) : i32[64, 64]",
     "operand 'x' %0[64, 64] in 'shared_hbm' is part of %0; a view covers its whole source"),
    ("%v = hbm.view(x=%0) : i32[128, 64] shared_hbm", "%v = hbm.view(x=%0) : i32[128, 64] hbm",
     "result %v i32[128, 64] in 'hbm' is in 'hbm' but its source %0 f32[128, 64] in 'shared_hbm' is in 'shared_hbm': "
     "a view is the same storage"),
    ("%v = hbm.view(x=%0) : i32[128, 64]", "%v = hbm.view(x=%0) : bool[128, 256]",
     "view(bool_) of a float32 tensor: bool_ has no defined bit layout; view it as uint8"),
])  # fmt: skip
def test_what_the_hbm_view_rule_refuses(old, new, message):
    assert old in VIEWED
    (diag,) = [x for x in _diagnostics(VIEWED.replace(old, new)) if x.rule == "hbm-view"]
    assert str(diag).startswith(f"k.py:4: hbm.view: {message}")


def test_a_last_dimension_that_does_not_divide():
    text = """\
kernel k(%a: u8[128, 6] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : i32[128, 1] shared_hbm loc(3)
  %v = hbm.view(x=%a) : i32[128, 1] hbm loc(4)
  %t = alloc() : i32[128, 1] sbuf loc(5)
  nisa.dma_copy(dst=%t, src=%v) {DMA} loc(6)
  nisa.dma_copy(dst=%0, src=%t) {DMA} loc(7)
}
""".replace("{DMA}", DMA)
    (diag,) = _diagnostics(text)
    assert diag.rule == "hbm-view"
    assert str(diag) == ("k.py:4: hbm.view: the last dimension of %a u8[128, 6] in 'hbm' holds 6 bytes, not a whole "
                         "number of 4-byte int32 elements")  # fmt: skip
    accepted = text.replace("u8[128, 6]", "u8[128, 4]")
    assert _diagnostics(accepted) == []
    a = np.arange(512, dtype=np.uint8).reshape(128, 4)
    np.testing.assert_array_equal(compile_kernel(parse_kernel(accepted)).run({"a": a}), a.view(np.int32))


def test_a_view_of_an_on_chip_tile_is_refused_by_the_operand_buffer_rule():
    text = VIEWED.replace("%v = hbm.view(x=%0) : i32[128, 64] shared_hbm loc(4)\n", "").replace(
        "  nisa.dma_copy(dst=%v", "  %v = hbm.view(x=%t) : f32[128, 64] sbuf loc(4)\n  nisa.dma_copy(dst=%v")
    rules = {x.rule for x in _diagnostics(text)}
    assert "operand-buffer" in rules


def _affine(read_offset: str, read_through: str = "%0", read_dtype: str = "f32") -> str:
    """Three iterations of an affine loop, each writing its 32-row block of %0 through the int32 view %v and
    reading a block of %0 (or of another view of it) at ``32*i0 + read_offset``."""
    extra = "  %u = hbm.view(x=%v) : u8[128, 256] shared_hbm loc(5)\n" if read_through == "%u" else ""
    cols = 256 if read_through == "%u" else 64
    return f"""\
kernel k(%x: i32[128, 64] hbm) -> (%0) {{
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 64] shared_hbm loc(3)
  %v = hbm.view(x=%0) : i32[128, 64] shared_hbm loc(4)
{extra}  affine i0 = range(0, 3, 1) loc(6) {{
    %t = alloc() : i32[32, 64] sbuf loc(7)
    nisa.dma_copy(dst=%t, src=%x[d0 + 32*i0, d1 ; 32x64]) {DMA} loc(8)
    nisa.dma_copy(dst=%v[d0 + 32*i0, d1 ; 32x64], src=%t) {DMA} loc(9)
    %f = alloc() : {read_dtype}[32, {cols}] sbuf loc(10)
    nisa.dma_copy(dst=%f, src={read_through}[d0 + 32*i0{read_offset}, d1 ; 32x{cols}]) {DMA} loc(11)
  }}
  nisa.dma_copy(dst=%0[d0 + 96, d1 ; 32x64], src=%x[d0 + 96, d1 ; 32x64]) {DMA} loc(12)
}}
"""


@pytest.mark.parametrize("through, dtype", [("%0", "f32"), ("%u", "u8")], ids=["the tensor", "another view"])
def test_a_write_through_a_view_and_a_read_in_another_iteration_are_a_dependence(through, dtype):
    diags = [x for x in _diagnostics(_affine(" + 32", through, dtype)) if x.rule == "affine-dependence"]
    assert [str(x) for x in diags] == [
        f"k.py:9: nisa.dma_copy: operand 'dst' %v[32, 64] in 'shared_hbm' writes at [d0 + 32*i0, d1] while line 11 "
        f"reads {through} at [d0 + 32*i0 + 32, d1] in the same affine_range loop i0 (line 6) (%v and {through} are "
        f"views of the same bytes): one iteration reads what another writes; use nl.sequential_range"
    ]
    accepted = _affine("", through, dtype)  # each iteration reads back its own block: independent
    assert _diagnostics(accepted) == []


def test_golden_a_view_past_its_source(golden, reverified):
    past = VIEWED.replace("i32[128, 64] shared_hbm loc(4)", "i32[128, 65] shared_hbm loc(4)")
    golden("hbm-view", reverified(parse_kernel(past.replace("dst=%v,", "dst=%v[d0, d1 ; 128x64],"))))
