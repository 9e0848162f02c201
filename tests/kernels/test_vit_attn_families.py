"""vit-attn's ``attention_qkv`` families over B, S and the width (``kernels/vit_attn/families.py``, kernel.toml's
``B x S x W`` lines): traced through the launcher as the bundle builder does, proved for the declared ranges, and
instantiated at sequence lengths and head dims no model fixed. Per (batch element, head) an instance runs
``attention``'s family schedule (``seq_family.py``) instruction for instruction, so it is checked bit for bit
against that family's instance on the same q, k and v, and close to float64; the concrete trace (resident strip
or flash, tuned per shape) is another schedule, checked close."""

import re

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.vit_attn import families, reference
from kernels.vit_attn.launcher import (
    MAX_HEAD_DIM,
    MAX_SEQ,
    VitAttnShapeError,
    plan_attention,
    plan_attention_qkv,
    plan_attention_split,
)
from tests.kernels.family_args import FamilyArg as _Arg

BF16 = nl.bfloat16
TOLERANCE = {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 2e-2)}
CAST = {"float32": np.float32, "bfloat16": BF16}


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the tests name their backends.)"""
    return None


_TRACED: dict = {}


def _box(dtype, seq, heads):
    return next(f for f in families.qkv_families() if f[0] == dtype and f[1][0] <= seq <= f[1][1] and f[3] == heads)


def _qkv_family(dtype, seq, heads):
    _, s_range, b_top, h = _box(dtype, seq, heads)
    key = ("qkv", dtype, s_range, h)
    if key not in _TRACED:
        spec = nki.spec(("B", "S", "W"), dtype, dims={"B": (1, b_top), "S": s_range, "W": (3 * h, 384 * h, 3 * h)})
        launch, args, kwargs = plan_attention_qkv(_Arg(spec, nki.symbolic_shapes(spec)[0], dtype), h)
        _TRACED[key] = nki.trace(launch, spec, target="trn2", **kwargs)
    return _TRACED[key]


def _attention_family(dtype, seq):
    """``attention``'s family holding ``seq`` (kernel.toml's ranges of it)."""
    s_range, _ = next(b for b in families.attention_boxes(dtype) if b[0][0] <= seq <= b[0][1])
    key = ("bhsd", dtype, s_range)
    if key not in _TRACED:
        spec = nki.spec(("B", "H", "S", "D"), dtype, dims={"B": (1, 2), "H": (1, 16), "S": s_range, "D": (1, 128)})
        launch, args, kwargs = plan_attention(*[_Arg(spec, nki.symbolic_shapes(spec)[0], dtype)] * 3)
        _TRACED[key] = nki.trace(launch, *[spec] * 3, target="trn2", **kwargs)
    return _TRACED[key]


def _qkv(dtype, b, seq, h, d):
    rng = np.random.default_rng(seq * 131 + d * 7 + h)
    return rng.standard_normal((b, seq, 3 * h * d)).astype(np.float32).astype(CAST[dtype])


def _split(qkv, h):
    b, s, w = qkv.shape
    parts = qkv.reshape(b, s, 3, h, w // (3 * h)).transpose(2, 0, 3, 1, 4)  # (3, b, h, s, d)
    return [np.ascontiguousarray(p) for p in parts]


def _run(dtype, b, seq, h, d, backend):
    qkv = _qkv(dtype, b, seq, h, d)
    family = _qkv_family(dtype, seq, h)
    got = family.instantiate(qkv, target="trn2").compile(backend).run({family.param_names[0]: qkv})
    assert got.shape == (b, seq, h * d) and got.dtype == qkv.dtype
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), reference.attention_qkv(qkv, h).astype(np.float64),
                               rtol=rtol, atol=atol)  # fmt: skip
    return qkv, got


CASES = [("float32", 1, s, 2, 64) for s in (1, 127, 128, 129, 197, 300, 513)]
CASES += [("float32", 2, 300, 3, d) for d in (1, 128)] + [("bfloat16", 2, 129, 3, 72), ("bfloat16", 1, 197, 12, 64)]
SLOW = [("float32", 1, 2048, 16, 64), ("bfloat16", 1, 8192, 2, 128), ("float32", 1, 16384, 1, 1),
        ("bfloat16", 1, 16384, 12, 128)]  # fmt: skip


@pytest.mark.parametrize("dtype, b, seq, h, d", CASES)
def test_instances_are_the_attention_familys_numbers_at_any_sequence_length_and_head_dim(dtype, b, seq, h, d):
    qkv, got = _run(dtype, b, seq, h, d, "numpy")
    q, k, v = _split(qkv, h)
    bhsd = _attention_family(dtype, seq)
    want = bhsd.instantiate(q, k, v, target="trn2").compile("numpy").run(dict(zip(bhsd.param_names, (q, k, v))))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want).transpose(0, 2, 1, 3).reshape(got.shape))


@pytest.mark.slow
@pytest.mark.parametrize("dtype, b, seq, h, d", SLOW)
def test_instances_at_box_tops_and_the_launchers_limit(dtype, b, seq, h, d):
    _run(dtype, b, seq, h, d, "numpy")


@pytest.mark.parametrize("dtype, b, seq, h, d", [("float32", 1, 129, 2, 64), ("bfloat16", 1, 513, 2, 80)])
def test_on_the_simulator_the_instance_matches_the_concrete_trace(dtype, b, seq, h, d):
    qkv, got = _run(dtype, b, seq, h, d, "simulator")
    launch, args, kwargs = plan_attention_qkv(qkv, h)
    want = nki.trace(launch, *args, target="trn2", **kwargs).compile("numpy").run({"qkv": qkv})
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, b, seq, h, d", [("float32", 2, 129, 3, 64), ("bfloat16", 1, 300, 2, 80)])
def test_on_jax(dtype, b, seq, h, d):
    _run(dtype, b, seq, h, d, "jax")


def test_kernel_toml_lists_the_families():
    """kernel.toml's ``B x S x W`` lines are ``families.qkv_families()``' (``python -m kernels.vit_attn.families``),
    after the models' fixed-shape families (a call matches the first family holding it)."""
    section = re.search(r"\[entry-points\.attention_qkv\]\n(.*?)\n\]\n", families.TOML.read_text(), re.S).group(1)
    lines = [ln for ln in section.split("\n") if ln.lstrip().startswith("{ args")]
    listed = [ln for ln in lines if "B x S x W" in ln]
    assert listed == [families.qkv_line(*f) for f in families.qkv_families()]
    assert lines[-len(listed):] == listed


def test_the_families_cover_every_sequence_length_and_head_dim_the_launcher_takes():
    """Per dtype and head count: S from 1 to the launcher's 16384 in nested boxes (as far as one batch element
    fits the budget: 8192 past 21 heads) and every head_dim 1..128 (the width's multiples of 3 * heads)."""
    fams = families.qkv_families()
    for dtype in ("float32", "bfloat16"):
        for h in families.HEADS:
            boxes = [f[1] for f in fams if f[0] == dtype and f[3] == h]
            assert all(b[0] == 1 for b in boxes) and all(p[1] < n[1] for p, n in zip(boxes, boxes[1:]))
            assert boxes[-1][1] == (MAX_SEQ if h <= 21 else 8192), (dtype, h, boxes)  # 21 heads of 16384 tokens
    for f in fams:  # the declared widths are exactly 3 * heads * D for D in 1..128
        h = f[3]
        lo, hi, step = map(int, re.search(r'W = "(\d+)\.\.(\d+) step (\d+)"', families.qkv_line(*f)).groups())
        assert step == 3 * h and [w // step for w in range(lo, hi + 1, step)] == list(range(1, MAX_HEAD_DIM + 1))


@pytest.mark.slow
def test_every_family_is_proved_at_its_declared_top():
    """Each family traces and proves over its ranges: the budget holds at the top (the caps are derived from
    attention's B x H at the box's top, not tried; they are not tight: at 1..2048 tokens bf16 one more batch element
    still fits up to 24 heads, attention's 40 x 32 being 1280 of the 1296 (batch element, head) pairs the budget
    holds there)."""
    for dtype, s_range, b_top, h in families.qkv_families():
        spec = nki.spec(("B", "S", "W"), dtype, dims={"B": (1, b_top), "S": s_range, "W": (3 * h, 384 * h, 3 * h)})
        launch, args, kwargs = plan_attention_qkv(_Arg(spec, nki.symbolic_shapes(spec)[0], dtype), h)
        nki.trace(launch, spec, target="trn2", **kwargs)
    for dtype, t_range, h, d in families.split_families():
        specs = [nki.spec(s, dtype, dims={"T": t_range}) for s in ((2 * h * d, "T"), ("T", h * d))]
        args = [_Arg(s, shape, dtype) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
        launch, _, kwargs = plan_attention_split(*args, h, batch=1)
        nki.trace(launch, *specs, target="trn2", **kwargs)


# -- attention_split over the token count of one sequence (kernel.toml's ``batch = 1`` lines) -------------------------


def _split_family(dtype, tokens, heads, d):
    _, t_range, h, _ = next(f for f in families.split_families() if f[0] == dtype and f[2:] == (heads, d)
                            and f[1][0] <= tokens <= f[1][1])  # fmt: skip
    key = ("split", dtype, t_range, h, d)
    if key not in _TRACED:
        specs = [nki.spec(s, dtype, dims={"T": t_range}) for s in ((2 * h * d, "T"), ("T", h * d))]
        args = [_Arg(s, shape, dtype) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
        launch, _, kwargs = plan_attention_split(*args, h, batch=1)
        _TRACED[key] = nki.trace(launch, *specs, target="trn2", **kwargs)
    return _TRACED[key]


SPLIT_CASES = [("float32", t, 6, 64) for t in (1, 127, 128, 129, 197, 300, 513)]
SPLIT_CASES += [("bfloat16", 300, 16, 80), ("float32", 129, 16, 72), ("bfloat16", 577, 12, 64)]


@pytest.mark.parametrize("dtype, tokens, heads, d", SPLIT_CASES)
def test_split_instances_are_the_attention_familys_numbers_at_any_sequence_length(dtype, tokens, heads, d):
    """One sequence of ``tokens`` from the split layout: close to float64, and bit for bit what ``attention``'s
    family computes from the same q, k (already scaled: scale 1) and v."""
    rng = np.random.default_rng(tokens * 17 + heads)
    hd = heads * d
    qkT = rng.standard_normal((2 * hd, tokens)).astype(np.float32).astype(CAST[dtype])
    v = rng.standard_normal((tokens, hd)).astype(np.float32).astype(CAST[dtype])
    family = _split_family(dtype, tokens, heads, d)
    got = family.instantiate(qkT, v, target="trn2").compile("numpy").run(dict(zip(family.param_names, (qkT, v))))
    rtol, atol = TOLERANCE[dtype]
    want64 = reference.attention_split(qkT, v, heads, batch=1).astype(np.float64)
    np.testing.assert_allclose(np.asarray(got, np.float64), want64, rtol=rtol, atol=atol)
    q, k = (np.ascontiguousarray(qkT[i * hd:(i + 1) * hd].T.reshape(1, tokens, heads, d).transpose(0, 2, 1, 3))
            for i in (0, 1))  # fmt: skip
    vv = np.ascontiguousarray(v.reshape(1, tokens, heads, d).transpose(0, 2, 1, 3))
    s_range, _ = next(b for b in families.attention_boxes(dtype) if b[0][0] <= tokens <= b[0][1])
    spec = nki.spec(("B", "H", "S", "D"), dtype, dims={"B": (1, 2), "H": (1, 16), "S": s_range, "D": (1, 128)})
    launch, _, kwargs = plan_attention(*[_Arg(spec, nki.symbolic_shapes(spec)[0], dtype)] * 3, scale=1.0)
    bhsd = nki.trace(launch, *[spec] * 3, target="trn2", **kwargs)
    ref = bhsd.instantiate(q, k, vv, target="trn2").compile("numpy").run(dict(zip(bhsd.param_names, (q, k, vv))))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref).transpose(0, 2, 1, 3).reshape(tokens, hd))


@pytest.mark.slow
@pytest.mark.parametrize("dtype, tokens, heads, d", [("float32", 8192, 16, 64), ("bfloat16", 16384, 6, 64)])
def test_split_instances_at_the_tops(dtype, tokens, heads, d):
    rng = np.random.default_rng(3)
    qkT = rng.standard_normal((2 * heads * d, tokens)).astype(np.float32).astype(CAST[dtype])
    v = rng.standard_normal((tokens, heads * d)).astype(np.float32).astype(CAST[dtype])
    family = _split_family(dtype, tokens, heads, d)
    got = family.instantiate(qkT, v, target="trn2").compile("numpy").run(dict(zip(family.param_names, (qkT, v))))
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), reference.attention_split(qkT, v, heads, batch=1),
                               rtol=rtol, atol=atol)  # fmt: skip


def test_kernel_toml_lists_the_split_families():
    """kernel.toml's one-sequence ``attention_split`` lines are ``families.split_families()``', after the models' own
    families (whose constants fix seq: a call giving ``batch=1`` matches only these)."""
    section = re.search(r"\[entry-points\.attention_split\]\n(.*?)\n\]\n", families.TOML.read_text(), re.S).group(1)
    lines = [ln for ln in section.split("\n") if ln.lstrip().startswith("{ args")]
    listed = [ln for ln in lines if "batch = 1 }" in ln]
    assert listed == [families.split_line(*f) for f in families.split_families()] and lines[-len(listed):] == listed
    assert {(h, d) for _, _, h, d in families.split_families()} == {(6, 64), (12, 64), (16, 64), (16, 80), (16, 72)}


def test_the_split_launcher_takes_batch_or_seq():
    qkT, v = np.zeros((256, 300), np.float32), np.zeros((300, 128), np.float32)
    assert plan_attention_split(qkT, v, 2, batch=1)[2]["seq"] == 300
    assert plan_attention_split(qkT, v, 2, batch=2)[2]["seq"] == 150 == plan_attention_split(qkT, v, 2, 150)[2]["seq"]
    for kwargs, why in [({}, "needs seq"), ({"batch": 7}, "not batch"), ({"seq": 100, "batch": 2}, "not batch"),
                        ({"batch": 0}, "batch must be")]:  # fmt: skip
        with pytest.raises(VitAttnShapeError, match=why):
            plan_attention_split(qkT, v, 2, **kwargs)
