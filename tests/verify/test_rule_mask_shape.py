"""Rule ``mask-shape``: a mask's index has the op's extent or 1 on every axis it is aligned to.

The first kernel is the bug vit-attn had (80e24e4): heads sharing the partitions divide as one ``[128, pair, d]``
op, and the last query tile's rows mask was the 2-D ``[128, 1]`` one of the single-head ops. Aligned as NumPy
aligns it, its 128 rows landed on the pair axis: with a 1-row last tile only the first head of the pair was
written, and the kernel returned NaN."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiVerificationError
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes.verifier import verify_kernel
from nki_dsl.targets import get_target
from tests.examples import examples

PMAX, PAIR, D = 128, 2, 64


@nki.jit
def pair_division(x, s, rows_3d):
    """``out[r, g, :] = x[r, g*D:(g+1)*D] / s[r, g]`` for both heads of a pair, one query tile at a time."""
    seq = x.shape[0]
    out = nl.ndarray((seq, PAIR, D), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p3, i_g3, i_d3 = nl.arange(PMAX)[:, None, None], nl.arange(PAIR)[None, :, None], nl.arange(D)[None, None, :]
    for t in nl.affine_range((seq + PMAX - 1) // PMAX):
        q0 = t * PMAX
        pair_rows = q0 + i_p3 < seq  # [128, 1, 1]: the rows, on the partition axis
        rows = q0 + nl.arange(PMAX)[:, None] < seq  # [128, 1]: the single-head ops' rows mask
        xt = nl.load(x[q0 + i_p3, i_g3 * D + i_d3], mask=pair_rows)
        st_ = nl.load(s[q0 + i_p3, i_g3 + 0 * i_d3], mask=pair_rows)
        o = nisa.tensor_tensor(xt, st_, np.divide, mask=pair_rows if rows_3d else rows)
        nl.store(out[q0 + i_p3, i_g3, i_d3], value=o, mask=pair_rows)
    return out


def _pair_inputs(seq=129):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((seq, PAIR * D)).astype(np.float32)
    s = rng.uniform(1, 2, (seq, PAIR)).astype(np.float32)
    return x, s


def test_golden_a_rows_mask_broadcast_onto_the_pair_axis(golden, rejected):
    x, s = _pair_inputs()
    golden("mask-shape", rejected(pair_division, x, s, False))


def test_the_rows_mask_at_the_op_s_rank_is_accepted_and_writes_every_head():
    x, s = _pair_inputs()
    out = pair_division(x, s, True)
    np.testing.assert_allclose(out, x.reshape(-1, PAIR, D) / s[:, :, None], rtol=1e-6)


A = np.zeros((256, 512), np.float32)


@nki.jit
def masked_exp(a, mask_of):
    """``nl.exp`` of one tile of ``a`` under ``mask_of(t, i_p, i_f)``, stored unmasked into a fresh output."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
    for t in nl.affine_range(1):
        x = nl.load(a[i_p, i_f])
        y = nl.exp(x, mask=mask_of(t, i_p, i_f))
        nl.store(out[i_p, i_f], value=y)
    return out


@pytest.mark.parametrize("mask_of", [
    lambda t, i_p, i_f: i_p < 100,  # the ragged-edge pattern of reference/nki.md §1.3: [128, 1]
    lambda t, i_p, i_f: i_f < 300,  # [1, 512]
    lambda t, i_p, i_f: (i_p < 100) & (i_f >= 8),  # [128, 512]
    lambda t, i_p, i_f: nl.arange(512) < 300,  # 1-D, aligned onto the free axis
    lambda t, i_p, i_f: t * 128 < 200,  # loop indices only: no axis
])  # fmt: skip
def test_masks_built_for_the_op_s_axes_are_accepted(traced, mask_of):
    traced(masked_exp, A, mask_of)


@pytest.mark.parametrize("mask_of, lands", [
    (lambda t, i_p, i_f: nl.arange(64)[:, None] < 10, "extent 64 on axis d0 of extent 128"),
    (lambda t, i_p, i_f: nl.arange(128) < 10, "extent 128 on axis d1 of extent 512"),
    (lambda t, i_p, i_f: nl.arange(513)[None, :] < 10, "extent 513 on axis d1 of extent 512"),
])  # fmt: skip
def test_a_mask_of_another_extent_is_refused(rejected, mask_of, lands):
    (diag,) = rejected(masked_exp, A, mask_of).diagnostics
    assert (diag.rule, diag.op) == ("mask-shape", "nl.exp")
    assert f"it puts its {lands}, an axis it was not built for" in diag.message
    assert "its result %" in diag.message  # the operand whose axes it lands on
    assert diag.loc.line == masked_exp.fn.__code__.co_firstlineno + 7


@nki.jit
def masked_row_sum(a, mask_of):
    out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    x = nl.load(a[i_p, i_f])
    nl.store(out, value=nl.sum(x, axis=1, keepdims=True, mask=mask_of(i_p, i_f)))
    return out


def test_a_reduction_s_mask_over_its_input_is_accepted(traced):
    ir = traced(masked_row_sum, A, lambda i_p, i_f: (i_p < 100) & (i_f < 300))
    (op,) = [op for op in ir.body if op.name == "nl.sum"]
    assert (op.mask_shape.extents, op.mask_shape.over) == ((128, 512), "x")


def test_a_reduction_s_mask_of_another_free_extent_is_refused(rejected):
    error = rejected(masked_row_sum, A, lambda i_p, i_f: nl.arange(128)[:, None] + nl.arange(256)[None, :] < 300)
    (diag,) = error.diagnostics
    assert diag.rule == "mask-shape"
    assert "ranges over the axes of operand 'x' %" in diag.message
    assert "extent 256 on axis d1 of extent 512" in diag.message


def test_parsed_ir_keeps_no_mask_shape(traced):
    # The IR text says what the mask constrains, exactly; there is no index it was built from to check.
    ir = traced(masked_exp, A, lambda t, i_p, i_f: i_p < 100)
    again = parse_kernel(print_kernel(ir))
    assert all(op.mask_shape is None for op in again.body if hasattr(op, "mask_shape"))
    assert verify_kernel(again, get_target("trn2")) == []


# -- the rule is NumPy's broadcasting -----------------------------------------------------------------------------


@st.composite
def mask_and_op_shapes(draw):
    op = tuple(draw(st.lists(st.integers(1, 6), min_size=2, max_size=4)))
    rank = draw(st.integers(0, len(op)))
    tail = op[len(op) - rank:]
    mask = tuple(draw(st.sampled_from(sorted({1, s, draw(st.integers(1, 7))}))) for s in tail)
    return mask, op


def _index_of_shape(shape):
    """An index whose shape is ``shape``: the sum of one arange per axis, each on its own axis."""
    n = len(shape)
    total = None
    for k, e in enumerate(shape):
        one = nl.arange(e)[tuple(slice(None) if j == k else None for j in range(n))] if n > 1 else nl.arange(e)
        total = one if total is None else total + one
    return total


@nki.jit
def masked_tile(a, mask_shape):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    idx = _index_of_shape(mask_shape) if mask_shape else nl.program_id(0) * 0
    nl.store(out, value=nl.exp(x, mask=idx >= 0))
    return out


@settings(max_examples=examples(120), deadline=None)
@given(mask_and_op_shapes())
def test_accepted_exactly_when_numpy_broadcasts_the_mask_onto_the_op(shapes):
    mask, op = shapes
    try:
        fits = np.broadcast_shapes(mask, op) == op
    except ValueError:
        fits = False
    a = np.zeros(op, np.float32)
    if fits:
        nki.trace(masked_tile, a, mask)
        return
    with pytest.raises(NkiVerificationError) as info:
        nki.trace(masked_tile, a, mask)
    assert {d.rule for d in info.value.diagnostics} == {"mask-shape"}
