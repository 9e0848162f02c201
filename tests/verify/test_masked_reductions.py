"""The verifier and masks over reduced axes (``reduce_mask``): the out-of-bounds rule reads a reduction's input
under its mask (bn_stats over a ragged tail), and parsed IR must keep the mask's variables in scope."""

from __future__ import annotations

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.ir.affine import Affine, Mask

X = np.zeros((128, 1000), np.float32)


def _bn_stats_tail(bound: int | None):
    @nki.jit
    def kernel(x):
        n = x.shape[1]
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
        i_p, i_f, i_s = nl.arange(128)[:, None], nl.arange(512)[None, :], nl.arange(6)[None, :]
        xt = nl.load(x)
        for j in nl.affine_range(2):
            mask = None if bound is None else (j * 512 + i_f < n + bound)
            stats[i_p, j * 6 + i_s] = nisa.bn_stats(xt[i_p, j * 512 + i_f], mask=mask)
        nl.store(out, value=nisa.bn_aggr(stats))
        return out

    return kernel


def test_bn_stats_over_a_masked_tail_is_in_bounds(traced):
    traced(_bn_stats_tail(0), X)


def test_golden_bn_stats_past_the_tile_end_without_a_mask(golden, rejected):
    golden("out-of-bounds", rejected(_bn_stats_tail(None), X), "bn-stats-tail")


def test_a_mask_that_lets_ten_columns_past_the_end_is_still_refused(rejected):
    (diag,) = rejected(_bn_stats_tail(10), X).diagnostics
    assert diag.rule == "out-of-bounds"
    assert diag.op == "nisa.bn_stats"
    assert "index range [0, 1009] exceeds dimension size of 1000" in diag.message


def test_nl_sum_over_masked_columns_of_a_too_narrow_tile(rejected, traced):
    def kernel_with(bound):
        @nki.jit
        def kernel(x):
            out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
            i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
            xt = nl.load(x)
            nl.store(out, value=nl.sum(xt[i_p, 500 + i_f], axis=1, mask=(500 + i_f < bound)))
            return out

        return kernel

    traced(kernel_with(1000), X)
    (diag,) = rejected(kernel_with(1001), X).diagnostics
    assert (diag.rule, diag.op) == ("out-of-bounds", "nl.sum")
    assert "index range [500, 1000] exceeds dimension size of 1000" in diag.message


def _with_reduce_mask(ir, op_name: str, mask: Mask):
    for stmt, _ in ir.walk():
        if getattr(stmt, "name", None) == op_name:
            stmt.attrs["reduce_mask"] = mask
            return ir
    raise AssertionError(f"no {op_name} in the kernel")


@nki.jit
def row_mean(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.mean(nl.load(x), axis=1))
    return out


def test_parsed_reduce_mask_on_a_mean_is_refused(traced, reverified):
    ir = _with_reduce_mask(traced(row_mean, X), "nl.mean", Mask.of(Affine.var("d1", -1) + 299))
    (diag,) = reverified(ir).diagnostics
    assert diag.rule == "mask-vars"
    assert "reduce_mask on nl.mean would change the element count it divides by" in diag.message


def test_parsed_reduce_mask_naming_an_axis_the_input_lacks_is_refused(traced, reverified):
    @nki.jit
    def row_sum(x):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.sum(nl.load(x), axis=1))
        return out

    ir = _with_reduce_mask(traced(row_sum, X), "nl.sum", Mask.of(Affine.var("d2", -1) + 5))
    (diag,) = reverified(ir).diagnostics
    assert diag.rule == "mask-vars"
    assert "reduce_mask uses d2, but there are only 2 axes (d0, d1); it ranges over the axes of operand 'x'" in (
        diag.message
    )


def test_parsed_reduce_mask_that_is_not_a_mask_is_a_structure_error(traced, reverified):
    ir = _with_reduce_mask(traced(row_mean, X), "nl.mean", "d1 < 3")
    (diag,) = reverified(ir).diagnostics
    assert (diag.rule, diag.message) == ("structure", "attribute 'reduce_mask' is not a conjunction of affine "
                                                      "constraints")


def test_a_reduce_mask_is_measured_against_the_expression_budget(traced):
    from nki_dsl.verify.budgets import measure

    ir = traced(row_mean, X)
    _with_reduce_mask(ir, "nl.mean", Mask.of(*(Affine.var("d1", -1) + k for k in range(300))))
    assert measure(ir)["expression_terms"] == 300
