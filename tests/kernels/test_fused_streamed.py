"""The fused MLPs with the weights streamed through SBUF by hidden blocks (``kernels/linear/fused_streamed.py``): the
schedule the launchers pick where both weights do not fit (ViT-H/14's MLP), and the families declared after the
resident ones. PSUM sums every output in hidden-tile order, as the resident kernels do, so where both fit the two
schedules compute the same numbers bit for bit; a family instance computes its concrete trace's; both are close to
float64."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.linear import fused_streamed, fused_widths, reference
from kernels.linear.fused_mlp import schedule_of
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import get_target
from nki_dsl.verify.budgets import measure
from tests.kernels.family_args import FamilyArg
from tests.kernels.test_fused_width_families import (
    CONSTANTS,
    DTYPES,
    ITEMSIZE,
    PLANS,
    TOLERANCE,
    _inputs,
    _ranges,
    _shapes,
    scalars,
)


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the tests name their backends themselves.)"""
    return None


STREAMED = {"schedule": "streamed"}


def _streamed_box(entry, dtype, k, h, n):
    box = fused_widths._holding(fused_widths.streamed_boxes(entry, ITEMSIZE[dtype]), entry, k, n, h)
    assert box is not None, (entry, dtype, k, h, n)
    return box


def _family(entry, dtype, box):
    ranges = _ranges(entry, box)
    specs = [nki.spec(s, dtype, dims={d: ranges[d] for d in s if isinstance(d, str)})
             for s in _shapes(entry, "M", "K", "H", "N")]  # fmt: skip
    stand_ins = [FamilyArg(s, shape, DTYPES[dtype]) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = PLANS[entry](*stand_ins, **CONSTANTS[entry], **STREAMED)
    specs = [a.spec if isinstance(a, FamilyArg) else nki.spec(a.shape, str(a.dtype)) for a in args]  # (+ epsilon)
    return nki.trace(launch, *specs, target="trn2", **kwargs)


def _instance_run(family, entry, arrays):
    given = arrays + scalars(entry, CONSTANTS[entry])
    compiled = family.instantiate(*given, target="trn2").compile("numpy")
    return np.asarray(compiled.run(dict(zip(family.param_names, given))), np.float64)


def _run(entry, arrays, backend, **schedule):
    launch, args, kwargs = PLANS[entry](*arrays, **CONSTANTS[entry], **schedule)
    traced = nki.trace(launch, *args, target="trn2", **kwargs)
    return np.asarray(traced.compile(backend).run(dict(zip(traced.param_names, args))), np.float64)


def _close_to_float64(entry, dtype, arrays, got):
    want = getattr(reference, entry)(*[np.asarray(a, np.float64) for a in arrays], **CONSTANTS[entry])
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# (entry, dtype, (M, K, H, N)): shapes both schedules fit, ragged in every width
BOTH_FIT = [("mlp", "bfloat16", (130, 200, 700, 300), "numpy"),
            ("layernorm_mlp", "float32", (130, 300, 700, 0), "numpy"),
            ("mlp", "float16", (70, 129, 513, 600), "simulator")]  # fmt: skip


@pytest.mark.parametrize("entry, dtype, mkhn, backend", BOTH_FIT)
def test_streamed_computes_the_resident_schedules_numbers(entry, dtype, mkhn, backend):
    arrays = _inputs(entry, *mkhn, dtype, np.random.default_rng(3))
    streamed = _run(entry, arrays, backend, schedule="streamed")
    np.testing.assert_array_equal(streamed, _run(entry, arrays, backend, schedule="resident"))
    _close_to_float64(entry, dtype, arrays, streamed)


def test_a_streamed_family_instance_computes_the_concrete_trace():
    """At widths nobody declared, small enough for the default run: the instance, the concrete streamed trace and
    float64."""
    entry, dtype, (m, k, h, n) = "mlp", "bfloat16", (200, 130, 1100, 700)
    family = _family(entry, dtype, _streamed_box(entry, dtype, k, h, n))
    arrays = _inputs(entry, m, k, h, n, dtype, np.random.default_rng(4))
    got = _instance_run(family, entry, arrays)
    np.testing.assert_array_equal(got, _run(entry, arrays, "numpy", schedule="streamed"))
    _close_to_float64(entry, dtype, arrays, got)


# past every resident box: the launcher streams ("auto"), and a streamed family serves the shape
BEYOND_RESIDENT = [
    ("mlp", "bfloat16", (197, 1280, 5120, 1280)),  # ViT-H/14
    ("layernorm_mlp", "bfloat16", (197, 1280, 5120, 0)),
    ("layernorm_mlp", "float32", (130, 1100, 5000, 0)),  # ragged
]


@pytest.mark.parametrize("entry, dtype, mkhn", BEYOND_RESIDENT)
def test_the_launchers_stream_where_no_resident_box_holds_the_widths(entry, dtype, mkhn):
    m, k, h, n = mkhn
    n = n or k
    assert fused_widths.resident_box(entry, ITEMSIZE[dtype], k, n, h) is None
    assert fused_widths.box_of(entry, ITEMSIZE[dtype], k, n, h) == _streamed_box(entry, dtype, k, h, n)
    assert schedule_of(entry, ITEMSIZE[dtype], k, h, n) == "streamed"
    arrays = [np.zeros(s, DTYPES[dtype]) for s in _shapes(entry, *mkhn)]
    launch, args, kwargs = PLANS[entry](*arrays, **CONSTANTS[entry])
    specs = [nki.spec(a.shape, dtype) for a in args]
    compile_for_target(nki.trace(launch, *specs, target="trn2", **kwargs).ir, get_target("trn2"))  # verified, placed


@pytest.mark.slow  # 20-40 s each on NumPy
@pytest.mark.parametrize("entry, dtype, mkhn", BEYOND_RESIDENT)
def test_streamed_family_instances_past_the_resident_boxes(entry, dtype, mkhn):
    m, k, h, n = mkhn
    family = _family(entry, dtype, _streamed_box(entry, dtype, k, h, n or k))
    arrays = _inputs(entry, m, k, h, n, dtype, np.random.default_rng(5))
    got = _instance_run(family, entry, arrays)
    np.testing.assert_array_equal(got, _run(entry, arrays, "numpy"))
    _close_to_float64(entry, dtype, arrays, got)


def _top(entry, box, m):
    top = {name: hi for name, (lo, hi, *_) in _ranges(entry, box).items()}
    return _shapes(entry, m, top["K"], top.get("H", 0), top.get("N", 0)) + [(1,)] * len(fused_widths.SCALARS[entry])


def _check_box(entry, dtype, box):
    """The family proved for its box (the proof applies the untrusted-IR budget at the top of the ranges), its
    instance at the top placed by the allocator, and the op-count estimate the boxes are cut with an upper bound of
    the traced kernel's."""
    family = _family(entry, dtype, box)
    compile_for_target(family.instantiate(*_top(entry, box, 300), target="trn2").ir, get_target("trn2"))
    top = _top(entry, box, 65536)
    executions = measure(family.instantiate(*top, target="trn2").ir)["iterations"]
    m, k = top[0]
    h, n = top[3] if entry == "mlp" else (top[3][1], k)
    assert executions <= fused_streamed.op_executions(entry, m, k, h, n) <= fused_streamed.MAX_ITERATIONS


def test_the_widest_streamed_boxes_hold():
    for entry, dtype in (("mlp", "bfloat16"), ("layernorm_mlp", "float32")):
        boxes = fused_widths.streamed_boxes(entry, ITEMSIZE[dtype])
        _check_box(entry, dtype, boxes[0])
        _check_box(entry, dtype, boxes[-1])


@pytest.mark.slow  # ~20 s
def test_every_streamed_box_holds():
    for entry, dtypes in fused_widths.DTYPES.items():
        for dtype in dtypes:
            if entry != "layernorm_qkv" and dtype != "float16":  # (float16's tensors are bfloat16's sizes)
                for box in fused_widths.streamed_boxes(entry, ITEMSIZE[dtype]):
                    _check_box(entry, dtype, box)


def test_the_streamed_boxes_reach_the_launchers_widths():
    """H to 8192 in every box; N to the accumulators' 3072; K from 1 (layernorm_mlp: its N) without gaps."""
    for entry in ("mlp", "layernorm_mlp"):
        for itemsize in (4, 2):
            boxes = fused_widths.streamed_boxes(entry, itemsize)
            assert all(box[1] == (1, fused_widths.MAX_N) for box in boxes)
            n_ranges = [box[2] for box in boxes] if entry == "mlp" else [box[0] for box in boxes]
            assert n_ranges[0][0] == 1 and n_ranges[-1][1] == fused_streamed.MAX_N
            assert all(a[1] + 1 == b[0] for a, b in zip(n_ranges, n_ranges[1:]))


def test_an_unknown_schedule_is_refused():
    arrays = [FamilyArg(nki.spec(s, "bfloat16"), s, nl.bfloat16) for s in _shapes("mlp", 4, 128, 128, 128)]
    with pytest.raises(ValueError, match="schedule must be one of 'auto', 'resident', 'tiled', 'streamed', got 'fast'"):
        PLANS["mlp"](*arrays, schedule="fast")
