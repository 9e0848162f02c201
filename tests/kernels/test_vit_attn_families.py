"""vit-attn's ``attention_qkv`` and ``attention_split`` families over B, S, H and D (``kernels/vit_attn/families.py``,
kernel.toml's per-head view lines, ``head_views.py``): traced through the launcher as the bundle builder does
(the per-head view of the arrays, ``num_heads`` the symbol H), proved for the declared ranges, and instantiated at
sequence lengths, head counts and head dims no model fixed. Per (batch element, head) an instance runs
``attention``'s family schedule (``seq_family.py``) instruction for instruction, so it is checked bit for bit
against that family's instance on the same q, k and v, and close to float64; the concrete trace (resident strip
or flash, tuned per shape) is another schedule, checked close. The coverage tests enumerate what the launchers
accept and check each class is run by a family (above its B or H range as instances over slices) or refused by the
launcher itself."""

import re

import numpy as np
import pytest

import kernels
import nki_dsl as nki
import nki_dsl.language as nl
from hub_client.package import read_package
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
TOLERANCE = {"float32": (2e-5, 2e-5), "bfloat16": (2e-2, 2e-2)}  # kernel.toml's fp32, and bf16 a little wider
CAST = {"float32": np.float32, "bfloat16": BF16}


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the tests name their backends.)"""
    return None


_TRACED: dict = {}


def _box(dtype, seq):
    return next(f for f in families.families() if f[0] == dtype and f[1][0] <= seq <= f[1][1])


def _dims(dtype, seq, top=False):
    """The box's ranges (``top``: as kernel.toml declares them; else B and H cut to 1..3 and 1..16, which traces
    the same IR but proves quicker)."""
    _, s_range, b_top, h_top = _box(dtype, seq)
    return {"B": (1, b_top if top else 3), "S": s_range, "H": (1, h_top if top else 16), "D": (1, MAX_HEAD_DIM)}


def _qkv_family(dtype, seq, top=False, scale=None):
    """The per-head qkv family holding ``seq``; with ``scale``, its runtime-scale twin (a [1] float32 parameter)."""
    key = ("qkv", dtype, _box(dtype, seq)[1], top, scale is not None)
    if key not in _TRACED:
        spec = nki.spec(("B", "S", 3, "H", "D"), dtype, dims=_dims(dtype, seq, top))
        shape = nki.symbolic_shapes(spec)[0]
        launch, args, kwargs = plan_attention_qkv(_Arg(spec, shape, dtype), shape[3], scale=scale)
        runtime = [nki.spec((1,), "float32")] if scale is not None else []
        assert len(args) == 1 + len(runtime)
        _TRACED[key] = nki.trace(launch, spec, *runtime, target="trn2", **kwargs)
    return _TRACED[key]


def _split_family(dtype, seq, top=False):
    key = ("split", dtype, _box(dtype, seq)[1], top)
    if key not in _TRACED:
        dims = _dims(dtype, seq, top)
        specs = [nki.spec((2, "H", "D", "B", "S"), dtype, dims=dims), nki.spec(("B", "S", "H", "D"), dtype, dims=dims)]
        shapes = nki.symbolic_shapes(*specs)
        args = [_Arg(s, shape, dtype) for s, shape in zip(specs, shapes)]
        launch, _, kwargs = plan_attention_split(*args, shapes[0][1], seq=shapes[0][4], batch=shapes[0][3])
        _TRACED[key] = nki.trace(launch, *specs, target="trn2", **kwargs)
    return _TRACED[key]


def _attention_family(dtype, seq, scale=None):
    """``attention``'s family holding ``seq`` (kernel.toml's ranges of it); with ``scale``, its runtime-scale twin
    (the scale a [1] float32 parameter after q, k and v: any value runs the same IR)."""
    s_range = _box(dtype, seq)[1]
    key = ("bhsd", dtype, s_range, scale is not None)
    if key not in _TRACED:
        spec = nki.spec(("B", "H", "S", "D"), dtype, dims={"B": (1, 3), "H": (1, 16), "S": s_range, "D": (1, 128)})
        launch, args, kwargs = plan_attention(*[_Arg(spec, nki.symbolic_shapes(spec)[0], dtype)] * 3, scale=scale)
        runtime = [nki.spec((1,), "float32")] if scale is not None else []
        assert len(args) == 3 + len(runtime)
        _TRACED[key] = nki.trace(launch, *[spec] * 3, *runtime, target="trn2", **kwargs)
    return _TRACED[key]


def _random(dtype, shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(CAST[dtype])


def _run_qkv(dtype, b, seq, h, d, backend, top=False):
    qkv = _random(dtype, (b, seq, 3 * h * d), seq * 131 + d * 7 + h)
    family = _qkv_family(dtype, seq, top)
    view = qkv.reshape(b, seq, 3, h, d)  # what the loader hands the family (hub_client/families.to_kernel)
    got = family.instantiate(view, target="trn2").compile(backend).run({family.param_names[0]: view})
    assert got.shape == (b, seq, h, d) and got.dtype == qkv.dtype
    got = np.asarray(got).reshape(b, seq, h * d)
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), reference.attention_qkv(qkv, h).astype(np.float64),
                               rtol=rtol, atol=atol)  # fmt: skip
    return qkv, got


def _bhsd(family, q, k, v, scale=None, backend="numpy"):
    arrays = (q, k, v) + (() if scale is None else (np.full((1,), scale, np.float32),))
    return np.asarray(family.instantiate(*arrays, target="trn2").compile(backend).run(
        dict(zip(family.param_names, arrays))))  # fmt: skip


CASES = [("float32", 1, s, 2, 64) for s in (1, 127, 128, 129, 197, 300, 513)]
CASES += [("float32", 2, 300, 3, d) for d in (1, 128)] + [("bfloat16", 2, 129, 3, 72), ("bfloat16", 1, 197, 12, 64)]
CASES += [("float32", 1, 40, 13, 8), ("bfloat16", 3, 20, 5, 100)]  # head counts and dims no family had
# (the last at the largest box's declared head top: 12 heads, above its H 1..10, would be refused as out of range)
SLOW = [("float32", 1, 2048, 16, 64), ("bfloat16", 1, 8192, 2, 128), ("float32", 1, 16384, 1, 1),
        ("bfloat16", 1, MAX_SEQ, _box("bfloat16", MAX_SEQ)[3], 128)]  # fmt: skip


@pytest.mark.parametrize("dtype, b, seq, h, d", CASES)
def test_qkv_instances_are_the_attention_familys_numbers_at_any_shape(dtype, b, seq, h, d):
    qkv, got = _run_qkv(dtype, b, seq, h, d, "numpy")
    parts = qkv.reshape(b, seq, 3, h, d).transpose(2, 0, 3, 1, 4)  # (3, b, h, s, d)
    want = _bhsd(_attention_family(dtype, seq), *(np.ascontiguousarray(p) for p in parts))
    np.testing.assert_array_equal(got, want.transpose(0, 2, 1, 3).reshape(got.shape))


@pytest.mark.slow
@pytest.mark.parametrize("dtype, b, seq, h, d", SLOW)
def test_qkv_instances_at_box_tops_and_the_launchers_limit(dtype, b, seq, h, d):
    _run_qkv(dtype, b, seq, h, d, "numpy", top=True)


@pytest.mark.parametrize("dtype, b, seq, h, d", [("float32", 1, 129, 2, 64), ("bfloat16", 1, 513, 2, 80)])
def test_on_the_simulator_the_instance_matches_the_concrete_trace(dtype, b, seq, h, d):
    qkv, got = _run_qkv(dtype, b, seq, h, d, "simulator")
    launch, args, kwargs = plan_attention_qkv(qkv, h)
    want = nki.trace(launch, *args, target="trn2", **kwargs).compile("numpy").run({"qkv": qkv})
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, b, seq, h, d", [("float32", 2, 129, 3, 64), ("bfloat16", 1, 300, 2, 80)])
def test_on_jax(dtype, b, seq, h, d):
    _run_qkv(dtype, b, seq, h, d, "jax")


def test_the_unrolled_head_schedule_gives_the_same_numbers():
    """``attention_qkv_any_seq`` (a trace over the width with the heads unrolled, what the launcher does for a 3-D
    symbolic qkv: flash, it has no strip) and the per-head view traced with ``strategy="flash"`` compute the same
    numbers bit for bit (and the published per-head family, the strip at S <= 512, close to them)."""
    from kernels.vit_attn.head_views import attention_qkv_heads_kernel

    spec = nki.spec(("B", "S", "W"), "float32", dims={"B": (1, 2), "S": (1, 512), "W": (9, 9 * 128, 9)})
    launch, _, kwargs = plan_attention_qkv(_Arg(spec, nki.symbolic_shapes(spec)[0], "float32"), 3)
    unrolled = nki.trace(launch, spec, target="trn2", **kwargs)
    qkv, got = _run_qkv("float32", 2, 130, 3, 24, "numpy")
    want = unrolled.instantiate(qkv, target="trn2").compile("numpy").run({unrolled.param_names[0]: qkv})
    view = qkv.reshape(2, 130, 3, 3, 24)
    flash = nki.trace(attention_qkv_heads_kernel, nki.spec(("B", "S", 3, "H", "D"), "float32",
                                                           dims=_dims("float32", 130)), target="trn2", strategy="flash")
    by_view = flash.instantiate(view, target="trn2").compile("numpy").run({flash.param_names[0]: view})
    np.testing.assert_array_equal(np.asarray(by_view).reshape(got.shape), np.asarray(want))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "simulator", "jax"])
@pytest.mark.parametrize("dtype, b, seq, h, d, scale", [("float32", 2, 130, 3, 40, 0.1),
                                                        ("bfloat16", 1, 257, 2, 72, 0.3),
                                                        ("float32", 1, 5, 2, 128, -0.02)])  # fmt: skip
def test_a_runtime_scale_gives_the_constant_scales_numbers(backend, dtype, b, seq, h, d, scale):
    """The runtime-scale twins (the scale a [1] float32 parameter: one IR for every scale) compute what the same
    schedule traced with the scale as a compile-time constant computes, bit for bit, on every backend; and close to
    float64 and to the concrete trace (strategy "flash": another schedule)."""
    from kernels.vit_attn.head_views import attention_qkv_heads_kernel
    from kernels.vit_attn.kernel import attention_kernel

    q, k, v = (_random(dtype, (b, h, seq, d), seq * 7 + i) for i in range(3))
    spec = nki.spec(("B", "H", "S", "D"), dtype, dims={"B": (1, 3), "H": (1, 16), "S": _box(dtype, seq)[1],
                                                       "D": (1, 128)})  # fmt: skip
    constant = nki.trace(attention_kernel, spec, spec, spec, target="trn2", scale=scale)
    got = _bhsd(_attention_family(dtype, seq, scale=scale), q, k, v, scale=scale, backend=backend)
    np.testing.assert_array_equal(got, _bhsd(constant, q, k, v, backend=backend))
    rtol, atol = TOLERANCE[dtype]
    want = reference.attention(q, k, v, scale)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    launch, args, kwargs = plan_attention(q, k, v, scale=scale, strategy="flash")
    concrete = nki.trace(launch, *args, target="trn2", **kwargs).compile("numpy").run(dict(zip("qkv", args)))
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(concrete, np.float64), rtol=rtol, atol=atol)
    # the per-head qkv twin: the same numbers from the fused projection's layout
    qkv = np.ascontiguousarray(np.stack([q, k, v]).transpose(1, 3, 0, 2, 4))  # (B, S, 3, H, D)
    qkv_spec = nki.spec(("B", "S", 3, "H", "D"), dtype, dims=_dims(dtype, seq))
    qkv_constant = nki.trace(attention_qkv_heads_kernel, qkv_spec, target="trn2", scale=scale)
    twin = _qkv_family(dtype, seq, scale=scale)
    arrays = (qkv, np.full((1,), scale, np.float32))
    out = twin.instantiate(*arrays, target="trn2").compile(backend).run(dict(zip(twin.param_names, arrays)))
    fixed = qkv_constant.instantiate(qkv, target="trn2").compile(backend).run({qkv_constant.param_names[0]: qkv})
    np.testing.assert_array_equal(np.asarray(out), np.asarray(fixed))
    np.testing.assert_array_equal(np.asarray(out), got.transpose(0, 2, 1, 3))


def test_the_plans_over_a_symbolic_s_make_one_call_for_each_schedules_strategies():
    """What lets the families publish ``strategy = ["auto", "resident"]`` (S <= 512: the strip, seq_strip.py) and
    ``["auto", "flash"]`` (longer: flash) honestly: the bundle builder checks the plan makes one kernel call for each
    listed value; "flash" over a short S makes the flash call (another IR, which the next box publishes), and
    "resident" where some S of the family passes 512 is refused, so a family listing it cannot be published."""
    qkv_spec = nki.spec(("B", "S", 3, "H", "D"), "float32", dims=_dims("float32", 1))
    qkv_shape = nki.symbolic_shapes(qkv_spec)[0]
    for top, same, other in ((512, "resident", "flash"), (2048, "flash", None)):
        spec = nki.spec(("B", "H", "S", "D"), "float32", dims={"B": (1, 2), "H": (1, 2), "S": (1, top), "D": (1, 128)})
        arg = _Arg(spec, nki.symbolic_shapes(spec)[0], "float32")
        calls = [plan_attention(arg, arg, arg, strategy=st) for st in ("auto", same)]
        assert calls[0][0] is calls[1][0] and calls[0][2] == calls[1][2] and calls[0][2]["strategy"] == same
        if other is not None:
            assert plan_attention(arg, arg, arg, strategy=other)[2]["strategy"] == other
        else:
            with pytest.raises(VitAttnShapeError, match="runs the flash schedule"):
                plan_attention(arg, arg, arg, strategy="resident")
    assert plan_attention_qkv(_Arg(qkv_spec, qkv_shape, "float32"), qkv_shape[3])[2] == {"strategy": "resident"}
    width = nki.spec(("B", "S", "W"), "float32", dims={"B": (1, 2), "S": (1, 512), "W": (9, 9 * 128, 9)})
    with pytest.raises(VitAttnShapeError, match="runs the flash schedule"):  # the unrolled heads: no strip
        plan_attention_qkv(_Arg(width, nki.symbolic_shapes(width)[0], "float32"), 3, strategy="resident")
    with pytest.raises(VitAttnShapeError, match="strategy must be one of"):
        plan_attention(arg, arg, arg, strategy="fast")


SPLIT_CASES = [("float32", 1, t, 6, 64) for t in (1, 127, 128, 129, 197, 300, 513)]
SPLIT_CASES += [("bfloat16", 1, 300, 16, 80), ("float32", 2, 129, 16, 72), ("bfloat16", 3, 70, 5, 24)]


def _run_split(dtype, b, seq, h, d, top=False):
    hd = h * d
    qkT, v = _random(dtype, (2 * hd, b * seq), seq * 17 + h), _random(dtype, (b * seq, hd), seq * 19 + h)
    family = _split_family(dtype, seq, top)
    views = (qkT.reshape(2, h, d, b, seq), v.reshape(b, seq, h, d))
    got = family.instantiate(*views, target="trn2").compile("numpy").run(dict(zip(family.param_names, views)))
    got = np.asarray(got).reshape(b * seq, hd)
    rtol, atol = TOLERANCE[dtype]
    want64 = reference.attention_split(qkT, v, h, seq=seq).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want64, rtol=rtol, atol=atol)
    return qkT, v, got


@pytest.mark.parametrize("dtype, b, seq, heads, d", SPLIT_CASES)
def test_split_instances_are_the_attention_familys_numbers_at_any_shape(dtype, b, seq, heads, d):
    """Batches of ``seq`` tokens from the split layout: close to float64, and bit for bit what ``attention``'s family
    computes from the same q, k (already scaled: scale 1) and v."""
    qkT, v, got = _run_split(dtype, b, seq, heads, d)
    hd = heads * d
    q, k = (np.ascontiguousarray(qkT[i * hd:(i + 1) * hd].T.reshape(b, seq, heads, d).transpose(0, 2, 1, 3))
            for i in (0, 1))  # fmt: skip
    vv = np.ascontiguousarray(v.reshape(b, seq, heads, d).transpose(0, 2, 1, 3))
    ref = _bhsd(_attention_family(dtype, seq, scale=1.0), q, k, vv, scale=1.0)
    np.testing.assert_array_equal(got, ref.transpose(0, 2, 1, 3).reshape(b * seq, hd))


@pytest.mark.slow
@pytest.mark.parametrize("dtype, seq, heads, d", [("float32", 8192, 16, 64), ("bfloat16", 16384, 6, 64)])
def test_split_instances_at_the_tops(dtype, seq, heads, d):
    _run_split(dtype, 1, seq, heads, d, top=True)


def _section(entry):
    text = re.search(rf"\[entry-points\.{entry}\]\n(.*?)\n\]\n", families.TOML.read_text(), re.S).group(1)
    return [ln for ln in text.split("\n") if ln.lstrip().startswith("{ args")]


def test_kernel_toml_lists_the_families():
    """kernel.toml's per-head view lines are ``families.families()``' (``python -m kernels.vit_attn.families``), after
    the models' fixed-shape families (a call matches the first family holding it)."""
    for entry, want in (("attention_qkv", families.qkv_lines()), ("attention_split", families.split_lines())):
        lines = _section(entry)
        listed = [ln for ln in lines if "head_views.py" in ln]
        assert listed == want and lines[-len(listed):] == listed


def test_each_family_over_s_has_a_runtime_scale_twin_after_the_families():
    """attention's and attention_qkv's families over S each have a twin taking ``scale=`` at run time (required: the
    plan's default None is 1 / sqrt(D), which the families without it compute on chip), listed after all of them,
    so a call without ``scale=`` never reaches a twin and one with it runs where one without does."""
    for entry in ("attention", "attention_qkv"):
        specs = [s for s in next(e for e in read_package(families.TOML.parent).entry_points
                                 if e.name == entry).specialisations
                 if any(dim[0] == "S" for dim in s.dims)]  # fmt: skip
        plain, twins = specs[:len(specs) // 2], specs[len(specs) // 2:]
        assert len(plain) == len(families.families()) and all(not s.scalars for s in plain)
        assert [(s.args, s.dims) for s in twins] == [(s.args, s.dims) for s in plain]
        assert all(s.scalars == (("scale", "float32"),) and s.samples == (("scale", 0.1),) for s in twins)


def test_the_families_cover_every_sequence_length_and_head_dim_the_launcher_takes():
    """Per dtype: S from 1 to the launcher's 16384 in nested boxes, D 1..128, and B and H from 1 (so any batch and
    head count runs, in parts above the box's tops)."""
    for dtype in ("float32", "bfloat16"):
        fams = [f for f in families.families() if f[0] == dtype]
        boxes = [f[1] for f in fams]
        assert all(b[0] == 1 for b in boxes) and all(p[1] < n[1] for p, n in zip(boxes, boxes[1:]))
        assert boxes[-1][1] == MAX_SEQ and all(b_top >= 1 and h_top >= 1 for _, _, b_top, h_top in fams)


# -- what the untrusted path runs: every launcher-accepted shape class, matched as a loader matches it -------------


def _entry(entry, family, tmp_path, scaled=None):
    """The entry point as a loader makes it (``hub_client.entry.EntryPoint``) over kernel.toml's per-head view
    families alone (the models' fixed shapes only add to what runs), each family's IR the one traced here (its ranges
    cut down: the same kernel, which is what ``ShapeFamily.independence`` reads); the runtime-scale twins' IR is
    ``scaled``'s, their scale required (the manifest's default null), as the builder records it."""
    from hub_client.entry import EntryPoint
    from hub_client.manifest import SpecRecord

    (tmp_path / "f.nkir").write_text(family.text)
    if scaled is not None:
        (tmp_path / "scaled.nkir").write_text(scaled.text)
    ep = next(e for e in read_package(families.TOML.parent).entry_points if e.name == entry)
    specs = tuple(SpecRecord(s.id, s.args, dict(s.constants), "scaled.nkir" if s.scalars else "f.nkir", None,
                             {n: (lo, hi, st) for n, lo, hi, st in s.dims},
                             {n: (t, None) for n, t in s.scalars}, dict(s.keywords))
                  for s in ep.specialisations if s.keywords and (scaled is not None or not s.scalars))  # fmt: skip
    return EntryPoint(entry, "acme/vit-attn", tmp_path, specs)


class _Shape:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


BATCHES, HEADS, DIMS = (1, 7, 257, 1000), (1, 17, 33, 64), (1, 72, 128)
SEQS = (1, 197, 513, 2049, 8193, MAX_SEQ)


# the keyword forms a call may add: the scale (a runtime-scale twin), a strategy (flash, which every box past 512
# tokens runs, and "auto"), and both; with the family each is routed to holding a runtime scale or not
KEYWORDS = [({}, False), ({"scale": 0.1}, True), ({"strategy": "flash"}, False), ({"strategy": "auto"}, False),
            ({"scale": 0.1, "strategy": "flash"}, True)]  # fmt: skip


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_shape_the_qkv_and_split_launchers_take_runs_without_trust(dtype, tmp_path):
    """For batch, heads, head_dim and sequence length over what the launchers take (and the calls' keyword forms:
    ``scale=`` and ``strategy="flash"``/``"auto"`` too), the loader routes the call to a family instance, or to
    instances over slices of B and H; a call with ``scale=`` to a runtime-scale twin and one without to a family
    computing 1 / sqrt(D) on chip. Past the launchers' limits the launcher itself refuses, and so does the loader,
    naming the dimension and the range; ``strategy="resident"`` matches the families up to 512 tokens (the strip)
    and no other, ``strategy="flash"`` at a short sequence the next box's (flash)."""
    (tmp_path / "q").mkdir(), (tmp_path / "s").mkdir()
    qkv_entry = _entry("attention_qkv", _qkv_family(dtype, 1), tmp_path / "q", _qkv_family(dtype, 1, scale=0.1))
    split_entry = _entry("attention_split", _split_family(dtype, 1), tmp_path / "s")
    routes = set()
    for b in BATCHES:
        for h in HEADS:
            for d in DIMS:
                for s in SEQS:
                    qkv = _Shape((b, s, 3 * h * d), dtype)
                    for kwargs, scaled in KEYWORDS:
                        plan_attention_qkv(qkv, h, **kwargs)  # the launcher takes it
                        how, spec, _ = qkv_entry.route(qkv, num_heads=h, **kwargs)
                        assert how in ("family", "parts") and bool(spec.scalars) == scaled, (b, s, h, d, kwargs)
                        routes.add(how)
                    split = (_Shape((2 * h * d, b * s), dtype), _Shape((b * s, h * d), dtype))
                    for call in ({"seq": s}, {"batch": b}, {"seq": s, "batch": b}, {"seq": s, "strategy": "flash"}):
                        plan_attention_split(*split, h, **call)
                        assert split_entry.route(*split, num_heads=h, **call)[0] in ("family", "parts"), (b, s, h)
    assert routes == {"family", "parts"}
    qkv = _Shape((2, 197, 3 * 12 * 64), dtype)
    plan_attention_qkv(qkv, 12, strategy="resident")  # the launcher runs it, by the concrete schedule, with trust
    for kwargs, schedule in (({}, "resident"), ({"strategy": "resident"}, "resident"),
                             ({"strategy": "flash"}, "flash")):  # fmt: skip
        _, spec, _ = qkv_entry.route(qkv, num_heads=12, **kwargs)  # S <= 512: the strip's family, or flash's asked
        assert schedule in dict(spec.constants)["strategy"]
    longer = _Shape((2, 600, 3 * 12 * 64), dtype)
    for where, kwargs in ((longer, {"strategy": "resident"}), (longer, {"strategy": "resident", "scale": 0.1}),
                          (qkv, {"strategy": "fast"})):  # fmt: skip
        with pytest.raises(kernels.NoSpecialisationError, match="strategy in \\['auto', '(flash|resident)'\\]"):
            qkv_entry.route(where, num_heads=12, **kwargs)
    for bad, why in [((1, MAX_SEQ + 1, 3 * 64), "dimension S = 16385 is outside the published range 1..16384"),
                     ((1, 8, 3 * 129), "dimension D = 129 is outside the published range 1..128")]:  # fmt: skip
        with pytest.raises(VitAttnShapeError, match="exceeds the limit"):
            plan_attention_qkv(_Shape(bad, dtype), 1)
        with pytest.raises(kernels.NoSpecialisationError, match=why):
            qkv_entry.route(_Shape(bad, dtype), num_heads=1)


@pytest.mark.slow
def test_every_family_is_proved_at_its_declared_top():
    """Each family traces and proves over its declared ranges: the budget holds at the top (the caps are derived
    from attention's B x H at the box's top), and the loader may run it in parts along B and H."""
    for dtype, s_range, _, _ in families.families():
        for family in (_qkv_family(dtype, s_range[1], top=True), _split_family(dtype, s_range[1], top=True)):
            assert set(family.independence[0]) == {"B", "H"}


def test_the_largest_box_runs_any_batch_in_parts_from_its_declared_ranges():
    """The box up to the launcher's 16384 tokens, traced at its declared ranges (not cut down, as the coverage test's
    IR is): its B and H loops stay loops (ranges from 1 to at least 2: a range of one value makes the trace index
    batch 0, and no proof along B could hold), so a call with more batch elements or heads runs in parts. (B 1..1
    and H 1..21 published before left every batch above 1 past 8192 tokens refused without trust.)"""
    assert all(b_top >= 2 and h_top >= 2 for _, _, b_top, h_top in families.families())
    for dtype in ("float32", "bfloat16"):
        assert set(_qkv_family(dtype, MAX_SEQ, top=True).independence[0]) == {"B", "H"}


def test_the_launchers_take_the_per_head_views():
    qkv = np.zeros((2, 5, 3, 4, 8), np.float32)
    assert plan_attention_qkv(qkv, 4)[0].__name__ == "attention_qkv_heads_kernel"
    with pytest.raises(VitAttnShapeError, match="viewed per head"):
        plan_attention_qkv(qkv, 3)
    qkT, v = np.zeros((2, 4, 8, 2, 5), np.float32), np.zeros((2, 5, 4, 8), np.float32)
    assert plan_attention_split(qkT, v, 4, seq=5)[1] == (qkT, v)
    with pytest.raises(VitAttnShapeError, match="seq = 6, but the arrays hold 5"):
        plan_attention_split(qkT, v, 4, seq=6)
    with pytest.raises(VitAttnShapeError, match="viewed per head"):
        plan_attention_split(qkT, np.zeros((2, 5, 4, 7), np.float32), 4, seq=5)


def test_the_split_launcher_takes_batch_or_seq():
    qkT, v = np.zeros((256, 300), np.float32), np.zeros((300, 128), np.float32)
    assert plan_attention_split(qkT, v, 2, batch=1)[2]["seq"] == 300
    assert plan_attention_split(qkT, v, 2, batch=2)[2]["seq"] == 150 == plan_attention_split(qkT, v, 2, 150)[2]["seq"]
    for kwargs, why in [({}, "needs seq"), ({"batch": 7}, "not batch"), ({"seq": 100, "batch": 2}, "not batch"),
                        ({"batch": 0}, "batch must be")]:  # fmt: skip
        with pytest.raises(VitAttnShapeError, match=why):
            plan_attention_split(qkT, v, 2, **kwargs)


def test_the_family_plans_take_the_evict_engines_their_schedule_copies_by():
    """Over a symbolic S the one schedule copies P^T by the Scalar engine (seq_family.COPY_ENGINES): ``evict`` naming
    it (in any round robin of it) makes the kernel call "auto" makes; other engines, or a bad value, are refused (the
    bundle builder then refuses a family listing them). A concrete shape takes any engines, as before."""
    from kernels.vit_attn.seq_family import COPY_ENGINES

    spec = nki.spec(("B", "H", "S", "D"), "float32", dims={"B": (1, 2), "H": (1, 2), "S": (1, 512), "D": (1, 128)})
    qkv = [_Arg(spec, nki.symbolic_shapes(spec)[0], "float32")] * 3
    auto = plan_attention(*qkv)
    assert COPY_ENGINES == ("scalar",)
    for evict in (("scalar",), ["scalar", "scalar"]):
        launch, args, kwargs = plan_attention(*qkv, evict=evict)
        assert launch is auto[0] and args == auto[1] and kwargs == auto[2]
    for evict, why in [(("scalar", "vector"), "not round robin over"), (("vector",), "not round robin over"),
                       ("scalar", "evict must be 'auto' or a non-empty sequence"),
                       ((), "evict must be"), (("gpsimd",), "evict must be")]:  # fmt: skip
        with pytest.raises(VitAttnShapeError, match=why):
            plan_attention(*qkv, evict=evict)
    q = np.zeros((1, 2, 100, 16), np.float32)
    assert plan_attention(q, q, q, evict=("vector",))[2]["evict"] == ("vector",)
