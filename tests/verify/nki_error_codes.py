"""Kernels for NKI's documented error codes (reference/nki.md §5.1, §1.3) that the tracer refuses before any IR
exists: for each code, a kernel that breaks it and an accepted counterpart that does the same thing legally.
``docs/verifier_rules.md`` maps every code to the check that enforces it; ``test_nki_error_codes.py`` runs these
against goldens (``golden_trace/<code>.txt``) and checks the doc's table against the rules and these cases."""

from __future__ import annotations

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


def _out():
    return nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)


# err_1d_arange_not_supported ---------------------------------------------------------------------------------------
def arange_1d_bad(a):
    out = _out()
    nl.store(out[nl.arange(128)[:, None], nl.arange(512)[None, :]], value=nl.load(a[nl.arange(128), 0:512]))
    return out


def arange_1d_good(a):
    out = _out()
    i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
    nl.store(out[i_p, i_f], value=nl.load(a[i_p, i_f]))
    return out


# err_unsupported_mixing_basic_advanced_tensor_indexing ---------------------------------------------------------
def mixing_bad(a):
    out = _out()
    nl.store(out, value=nl.load(a[nl.arange(128)[:, None], 0:512]))
    return out


def mixing_good(a):
    out = _out()
    nl.store(out, value=nl.load(a[0:128, 0:512]))
    return out


# err_control_flow_condition_depending_on_arange -----------------------------------------------------------------
def control_flow_on_index_bad(a):
    out = _out()
    for i in nl.affine_range(2):
        if i == 0:
            nl.store(out, value=nl.load(a))
    return out


def control_flow_on_index_good(a):
    out = _out()
    for i in nl.static_range(2):  # unrolled: i is a Python int
        if i == 0:
            nl.store(out, value=nl.load(a))
    return out


# err_dynamic_control_flow_not_supported / err_ambiguous_tensor_truth_value ------------------------------------
def truth_value_bad(a):
    out = _out()
    x = nl.load(a)
    if x:
        x = nl.exp(x)
    nl.store(out, value=x)
    return out


def truth_value_good(a):
    out = _out()
    x = nl.load(a)
    nl.store(out, value=nl.where(nl.greater(x, 0.0), nl.exp(x), x))
    return out


# err_while_loop_requires_unconditional_entry: a while over tile values is refused as control flow on data -----
def while_on_tile_bad(a):
    out = _out()
    x = nl.load(a)
    while x:
        x = nl.multiply(x, 0.5)
    nl.store(out, value=x)
    return out


def while_on_tile_good(a):
    out = _out()
    x = nl.load(a)
    n = 0
    while n < 3:  # a Python condition: unrolled at trace time
        x = nl.multiply(x, 0.5)
        n += 1
    nl.store(out, value=x)
    return out


# err_nested_kernel_with_spmd_grid ---------------------------------------------------------------------------------
@nki.jit
def _copy(a):
    out = _out()
    nl.store(out, value=nl.load(a))
    return out


def nested_grid_bad(a):
    return _copy[2](a)


def nested_grid_good(a):
    return _copy(a)


# err_activation_bias_invalid_type -----------------------------------------------------------------------------------
def bias_bad(a):
    out = _out()
    x = nl.load(a)
    nl.store(out, value=nisa.activation(np.exp, x, bias=x))
    return out


def bias_good(a):
    out = _out()
    x = nl.load(a)
    nl.store(out, value=nisa.activation(np.exp, x, bias=x[:, 0:1]))
    return out


# err_activation_scale_invalid_type ---------------------------------------------------------------------------------
def scale_bad(a):
    out = _out()
    nl.store(out, value=nisa.activation(np.exp, nl.load(a), scale="2"))
    return out


def scale_good(a):
    out = _out()
    nl.store(out, value=nisa.activation(np.exp, nl.load(a), scale=2.0))
    return out


# err_cannot_assign_to_index (reference/nki.md §1.3: index tensors are not assignable) --------------------------
def assign_index_bad(a):
    out = _out()
    i_p = nl.arange(128)[:, None]
    i_p[0] = 1
    nl.store(out, value=nl.load(a))
    return out


def assign_index_good(a):
    out = _out()
    ids = nisa.iota(nl.arange(128)[:, None] + 0 * nl.arange(512)[None, :], dtype=nl.float32)
    nl.store(out, value=nl.add(nl.load(a), ids))
    return out


# err_unsupported_expression_in_mask (the tracer's side; mask-vars holds parsed IR to it) -------------------------
def mask_or_bad(a):
    out = _out()
    i_p = nl.arange(128)[:, None]
    nl.store(out, value=nl.exp(nl.load(a), mask=(i_p < 10) | (i_p > 100)))
    return out


def mask_or_good(a):
    out = _out()
    i_p = nl.arange(128)[:, None]
    nl.store(out, value=nl.exp(nl.load(a), mask=(i_p >= 10) & (i_p <= 100)))
    return out


# err_nki_api_outside_of_nki_kernel: the refused call is made from test code, outside any kernel
def api_outside_bad():
    return nl.exp(np.zeros((128, 512), np.float32))


def api_outside_good(a):
    out = _out()
    nl.store(out, value=nl.exp(nl.load(a)))
    return out


# err_indirect_indices_free_dim --------------------------------------------------------------------------------
def indirect_free_dim_bad(a):
    out = _out()
    cols = nl.load(a[0:1, 0:512], dtype=nl.int32)  # one row of indices: they would pick columns, a free axis
    nl.store(out, value=nl.load(a[nl.arange(128)[:, None], cols]))
    return out


def indirect_free_dim_good(a):
    out = _out()
    rows = nl.load(a[0:128, 0:1], dtype=nl.int32)  # one index per partition: a gather of rows
    nl.store(out, value=nl.load(a[rows, nl.arange(512)[None, :]]))
    return out


NOT_CASES: set[str] = set()

# code -> (refused kernel, accepted kernel), for the tracer's checks
TRACER_CASES = {
    "err_1d_arange_not_supported": (arange_1d_bad, arange_1d_good),
    "err_unsupported_mixing_basic_advanced_tensor_indexing": (mixing_bad, mixing_good),
    "err_control_flow_condition_depending_on_arange": (control_flow_on_index_bad, control_flow_on_index_good),
    "err_dynamic_control_flow_not_supported": (truth_value_bad, truth_value_good),
    "err_ambiguous_tensor_truth_value": (truth_value_bad, truth_value_good),
    "err_while_loop_requires_unconditional_entry": (while_on_tile_bad, while_on_tile_good),
    "err_nested_kernel_with_spmd_grid": (nested_grid_bad, nested_grid_good),
    "err_activation_bias_invalid_type": (bias_bad, bias_good),
    "err_activation_scale_invalid_type": (scale_bad, scale_good),
    "err_cannot_assign_to_index": (assign_index_bad, assign_index_good),
    "err_unsupported_expression_in_mask": (mask_or_bad, mask_or_good),
    "err_indirect_indices_free_dim": (indirect_free_dim_bad, indirect_free_dim_good),
}
