"""Shared check for lowering tests: trace a kernel, lower it, and compare the NumPy reference run of the lowered IR
with the run of the traced IR."""

from __future__ import annotations

import numpy as np

from nki_dsl import backends
from nki_dsl.ir.nodes import Op
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes import run_pipeline
from nki_dsl.passes.engines import EXEMPT, fused_writes
from nki_dsl.passes.verifier import check
from nki_dsl.targets import get_target
from nki_dsl.trace.jit import as_launch


def traced(kernel, *args, **kwargs):
    launch = as_launch(kernel)
    ir, arrays, _ = launch.jit.specialize(launch.grid, args, kwargs, get_target("trn2"))
    return ir, arrays


def run(ir, arrays):
    out = backends.load("numpy").compile_kernel(ir).run(arrays)
    return out if isinstance(out, tuple) else (out,)


def lowered_matches(kernel, *args, atol=0.0, rtol=0.0, target="trn2", **kwargs):
    """Lower ``kernel`` for these arguments; assert the lowered IR is engine-level, verifies, round-trips through
    its text, and computes what the traced IR computes (bit for bit unless a tolerance is given). Returns it."""
    ir, arrays = traced(kernel, *args, **kwargs)
    target = get_target(target)
    low = run_pipeline(ir, target)
    assert print_kernel(ir) != print_kernel(low) or not any(isinstance(s, Op) for s, _ in ir.walk())
    text = print_kernel(low)
    again = parse_kernel(text)
    assert print_kernel(again) == text
    check(again, target)
    fused = set(fused_writes(low).values())
    for stmt, _ in low.walk():
        if isinstance(stmt, Op):
            assert not stmt.name.startswith("nl.") or stmt.name in EXEMPT, f"{stmt.name} left in lowered IR"
            assert stmt.name != "assign" or stmt in fused, f"assign at line {stmt.loc.line} follows no producer"
    for want, got in zip(run(ir, arrays), run(again, arrays), strict=True):
        assert want.dtype == got.dtype and want.shape == got.shape
        if atol == 0.0 and rtol == 0.0:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol)
    return low
