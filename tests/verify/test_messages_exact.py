"""Diagnostics read exactly as documented: the whole message of each wording branch (the hint that names the fix
for each wrong buffer, loops of one and of several levels, HBM and on-chip fixes), and the wording helpers of
``describe`` on their edges (sizes around 1 KiB, plurals, buffer lists). A check on a fragment would let a changed
or garbled fix text pass. Source lines in messages are matched as numbers, the rest character for character."""

import re

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.errors import SourceLoc
from nki_dsl.ir.nodes import Loop
from nki_dsl.ir.ops.spec import HBM, ON_CHIP
from nki_dsl.verify import describe as d

A = np.zeros((128, 512), np.float32)
HBM_WORDS = "HBM ('hbm', 'shared_hbm' or 'private_hbm')"


def messages(error) -> list[tuple[str, str]]:
    return [(diag.rule, diag.message) for diag in error.diagnostics]


def matches(pattern: str, text: str) -> bool:
    """``pattern`` with ``{line}`` standing for any source line number, everything else literal."""
    return re.fullmatch(re.escape(pattern).replace(re.escape("{line}"), r"\d+"), text) is not None


# --- operand-buffer: one fix per wrong buffer -------------------------------------------------------------------------


def test_each_wrong_buffer_names_its_fix_in_full(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        again = nl.load(t)  # load from SBUF
        nl.store(t, value=again)  # store into SBUF
        out[...] = t  # assign into HBM
        p = nl.matmul(t[:, 0:128], t[:, 0:128], transpose_x=True)
        q = nl.matmul(p, t[:, 0:128], transpose_x=True)  # matmul reads PSUM
        nl.store(out[:, 0:128], value=q)
        return out

    assert messages(rejected(kernel, A)) == [
        ("operand-buffer", f"operand 'src' %1[128, 512] is in 'sbuf'; expected {HBM_WORDS} "
                           "(nl.load moves data from HBM; copy on-chip tiles with nl.copy)"),
        ("operand-buffer", f"operand 'dst' %1[128, 512] is in 'sbuf'; expected {HBM_WORDS} "
                           "(nl.store writes to HBM; write an on-chip tensor with t[...] = value)"),
        ("operand-buffer", "operand 'dst' %0[128, 512] is in 'shared_hbm'; expected 'sbuf' or 'psum' "
                           "(t[...] = value writes on-chip tensors; write to HBM with nl.store)"),
        ("operand-buffer", "operand 'x' %3[128, 128] is in 'psum'; expected 'sbuf' "
                           "(the Tensor engine reads SBUF only; nl.copy the PSUM tile to SBUF first)"),
    ]  # fmt: skip


def test_a_compute_op_on_hbm_is_told_to_load_first(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.exp(a))
        return out

    assert messages(rejected(kernel, A)) == [
        ("operand-buffer", "operand 'x' %a[128, 512] is in 'hbm'; expected 'sbuf' or 'psum' "
                           "(nl.load it into SBUF first)"),
    ]  # fmt: skip


# --- one report per cause -------------------------------------------------------------------------------------------


def test_an_oversized_matmul_is_reported_once_by_matmul_shape(rejected):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)  # N = 1024: two banks of result too
        nl.store(out, value=nl.copy(p))
        return out

    error = rejected(kernel, np.zeros((128, 128), np.float32), np.zeros((128, 1024), np.float32))
    assert messages(error) == [
        ("matmul-shape", "moving tile [128, 1024] exceeds the moving free-size limit of 512 (operand 'y' "
                         "%2[128, 1024] in 'sbuf'); split N into tiles of at most 512"),
    ]  # fmt: skip


def test_a_tile_computed_from_a_tall_tile_is_not_reported_again(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # free size below 128: only the height is wrong
        nl.store(out, value=nl.exp(t))
        return out

    assert messages(rejected(kernel, A)) == [
        ("partition-limit", "tensor %1 f32[256, 64] in 'sbuf' has 256 partitions, exceeding the partition limit of "
                            "128; split it into tiles of at most 128 partitions"),
    ]  # fmt: skip


# --- loops of one and of several levels ------------------------------------------------------------------------


@nki.jit
def same_elements_in_two_loops(a, onchip):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    for _ in nl.affine_range(2):
        for _ in nl.affine_range(3):
            if onchip:
                t[...] = nl.load(a)
            else:
                nl.store(out, value=nl.load(a))
    if onchip:
        nl.store(out, value=t)
    return out


@pytest.mark.parametrize(("onchip", "operand", "fix"), [
    (False, "%0[128, 512] in 'shared_hbm'", "store once after the loop"),
    (True, "%1[128, 512] in 'sbuf'", "accumulate with t[...] += x"),
])  # fmt: skip
def test_a_write_repeated_by_two_loops_names_both_and_the_fix_for_its_buffer(onchip, operand, fix, rejected):
    ((rule, message),) = messages(rejected(same_elements_in_two_loops, A, onchip=onchip))
    assert rule == "affine-dependence"
    assert matches(f"operand 'dst' {operand} writes the same elements in every iteration of affine_range loops "
                   f"i0 (line {{line}}) and i1 (line {{line}}), so the result depends on which iteration runs last; "
                   f"index the write with i0 and i1, {fix}, or use nl.sequential_range", message), message  # fmt: skip


def test_an_overrun_through_two_kinds_of_loop_names_each_loop(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for j in nl.sequential_range(2):
                x = nl.load(a[nl.arange(128)[:, None] + 64 * i + 32 * j, nl.arange(512)[None, :]])
                nl.store(out[:, 256 * i:256 * i + 256], value=x[:, 0:256])
        return out

    found = messages(rejected(kernel, A))
    (message,) = [m for rule, m in found if rule == "out-of-bounds"]
    assert matches("out-of-bound access for tensor %a f32[128, 512] on dimension 0: index range [0, 223] exceeds "
                   "dimension size of 128; the index is d0 + 64*i0 + 32*i1 with i0 in [0, 1] from the affine_range "
                   "loop at line {line} and i1 in [0, 1] from the sequential_range loop at line {line} (operand 'src' "
                   "%a[128, 512] in 'hbm'); fix the loop bounds or restrict the op to the valid elements with mask=",
                   message), message  # fmt: skip


def _loop(kind, var, line):
    return Loop(kind, var, 0, 2, 1, [], SourceLoc("k.py", line))


def test_loops_are_named_by_their_api():
    assert d.loop(_loop("affine", "i0", 3)) == "affine_range loop i0 (line 3)"
    assert d.loop(_loop("sequential", "i1", 4)) == "sequential_range loop i1 (line 4)"
    assert d.loops([_loop("sequential", "i1", 4)]) == "sequential_range loop i1 (line 4)"
    two = [_loop("sequential", "i0", 3), _loop("sequential", "i2", 9)]
    assert d.loops(two) == "sequential_range loops i0 (line 3) and i2 (line 9)"


# --- describe helpers -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1025, "1.0 KiB"),
                                         (1536, "1.5 KiB"), (229376, "224 KiB"), (229377, "224.0 KiB")])  # fmt: skip
def test_sizes_read_in_bytes_below_one_kib_and_in_kib_from_it(n, text):
    assert d.nbytes(n) == text


def test_plurals():
    assert d.plural(1, "bank") == "1 bank"
    assert d.plural(2, "bank") == "2 banks"
    assert d.plural(0, "bank") == "0 banks"
    assert d.plural(3, "copy", "copies") == "3 copies"
    assert d.plural(1, "copy", "copies") == "1 copy"


@pytest.mark.parametrize(("allowed", "text"), [
    (HBM, HBM_WORDS),
    (HBM + ON_CHIP, "any buffer"),
    (ON_CHIP + HBM, "any buffer"),
    (("sbuf",), "'sbuf'"),
    (("sbuf", "psum"), "'sbuf' or 'psum'"),
    (("sbuf", "psum", "hbm"), "'sbuf', 'psum' or 'hbm'"),
    (("psum", "hbm", "shared_hbm", "sbuf"), "'psum', 'hbm', 'shared_hbm' or 'sbuf'"),
])  # fmt: skip
def test_buffer_lists(allowed, text):
    assert d.buffers(allowed) == text


def test_listings_stop_after_the_limit():
    assert d.listing(["a", "b"]) == "a, b"
    assert d.listing([str(k) for k in range(7)]) == "0, 1, 2, 3, 4 and 2 more"
    assert d.listing(["a", "b", "c"], limit=2) == "a, b and 1 more"


# --- matmul-shape: the layout each matmul form expects -------------------------------------------------------------


@pytest.mark.parametrize(("form", "layout"), [
    ("isa", "the stationary operand is [K, M] and the moving operand [K, N]"),
    ("transposed", "with transpose_x=True, x is [K, M] and y [K, N]"),
    ("plain", "nl.matmul(x, y) computes x @ y: x is [M, K] and y [K, N]"),
])  # fmt: skip
def test_a_contraction_mismatch_explains_the_layout_of_its_matmul_form(form, layout, traced, reverified):
    """Parsed IR may hold a matmul the tracer would refuse: its moving operand cut to 64 rows here."""
    import nki_dsl.isa as nisa
    from nki_dsl.ir.nodes import Access

    @nki.jit
    def kernel(a, b, form):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        if form == "isa":
            p = nisa.nc_matmul(x, y)
        else:
            p = nl.matmul(x, y, transpose_x=form == "transposed")
        nl.store(out, value=nl.copy(p))
        return out

    ir = traced(kernel, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32), form=form)
    op = next(s for s, _ in ir.walk() if getattr(s, "name", "") in ("nisa.nc_matmul", "nl.matmul"))
    name = "moving" if form == "isa" else "y"
    y = op.operands[name]
    op.operands[name] = Access(y.tensor, y.index, (64, 512))
    s_name = "stationary" if form == "isa" else "x"
    s_km = "[128, 128]"
    transposed = ", transposed" if form == "plain" else ""
    found = [m for m in messages(reverified(ir)) if m[0] == "matmul-shape"]  # the shape rule reports it too
    assert found == [
        ("matmul-shape", f"contraction sizes differ: stationary tile {s_km} (operand '{s_name}' %1[128, 128] in "
                         f"'sbuf'{transposed}) has K=128, moving tile [64, 512] (operand '{name}' %2[64, 512] in "
                         f"'sbuf') has K=64; {layout}"),
    ]  # fmt: skip


def test_a_tall_result_of_operands_at_exactly_the_partition_limit_is_reported(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)  # [128, 256]: exactly 128 partitions, not tall itself
        nl.store(out, value=nl.transpose(t))
        return out

    assert messages(rejected(kernel, np.zeros((128, 256), np.float32))) == [
        ("partition-limit", "result %2 f32[256, 128] in 'sbuf' has 256 partitions, exceeding the partition limit of "
                            "128; split it into tiles of at most 128 partitions"),
    ]  # fmt: skip


def test_assigning_from_hbm_is_told_to_load_first(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        t[...] = a  # the source of an assign in HBM: a load, not an assign
        nl.store(out, value=t)
        return out

    assert messages(rejected(kernel, A)) == [
        ("operand-buffer", "operand 'src' %a[128, 512] is in 'hbm'; expected 'sbuf' or 'psum' "
                           "(nl.load it into SBUF first)"),
    ]  # fmt: skip


def test_an_access_spanning_more_partitions_than_its_tile_has_names_the_operand(traced, reverified):
    """Parsed IR can read a [256, 512] window of a 128-partition tile (the tracer cannot build it)."""
    from nki_dsl.ir.nodes import Access

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.exp(nl.load(a)))
        return out

    ir = traced(kernel, A)
    exp = next(s for s, _ in ir.walk() if getattr(s, "name", "") == "nl.exp")
    x = exp.operands["x"]
    exp.operands["x"] = Access(x.tensor, x.index, (256, 512))
    found = [m for m in messages(reverified(ir)) if m[0] == "partition-limit"]
    assert found == [("partition-limit", "operand 'x' %1[256, 512] in 'sbuf' spans 256 partitions, exceeding the "
                                         "partition limit of 128")]  # fmt: skip
