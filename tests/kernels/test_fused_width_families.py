"""The fused kernels' shape families over the widths (``kernels/linear/fused_widths.py``): ``mlp``,
``layernorm_mlp`` and ``layernorm_qkv`` with M, K, H (the hidden width) and N symbolic, traced through the
launchers, proved for the declared ranges and instantiated at widths nobody declared (ViT-B/L/H's, ragged ones,
box tops, the smallest). An instance is not the concrete trace's IR (one schedule per 128 tokens, the on-chip
tensors sized for the box's top, the last tiles masked), so each runs against the concrete trace of its shape: the
same numbers, bit for bit, and close to float64."""

import re
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.linear import fused_widths, reference
from kernels.linear.launcher import plan_layernorm_mlp, plan_layernorm_qkv, plan_mlp
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import get_target
from tests.kernels.family_args import FamilyArg as _Arg

DTYPES = {"float32": np.float32, "bfloat16": nl.bfloat16, "float16": np.float16}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
TOLERANCE = {"float32": (1e-5, 2e-4), "bfloat16": (2e-2, 8e-2), "float16": (2e-3, 2e-2)}
PLANS = {"mlp": plan_mlp, "layernorm_mlp": plan_layernorm_mlp, "layernorm_qkv": plan_layernorm_qkv}
QKV = {"scale": 0.125, "epsilon": 1e-6}
CONSTANTS = {"mlp": {}, "layernorm_mlp": {"epsilon": 1e-6}, "layernorm_qkv": QKV}
TOML = Path(fused_widths.__file__).with_name("kernel.toml")


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the instance test names its backends itself.)"""
    return None



_shapes = fused_widths.arg_shapes


def _box(entry, dtype, k, h, n):
    box = fused_widths.box_of(entry, ITEMSIZE[dtype], k, n, h)
    assert box is not None, (entry, dtype, k, h, n)
    return box


def _ranges(entry, box):
    if entry == "mlp":
        return {"M": (1, 65536), "K": box[0], "H": box[1], "N": box[2]}
    if entry == "layernorm_mlp":
        return {"M": (1, 65536), "K": box[0], "H": box[1]}
    return {"M": (1, 65536), "K": box[0], "N": (*box[1], fused_widths.QKV_STEP)}


def _family(entry, dtype, box, constants):
    ranges = _ranges(entry, box)
    specs = [nki.spec(s, dtype, dims={d: ranges[d] for d in s if isinstance(d, str)})
             for s in _shapes(entry, "M", "K", "H", "N")]  # fmt: skip
    stand_ins = [_Arg(s, shape, DTYPES[dtype]) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = PLANS[entry](*stand_ins, **constants)
    # (the runtime scalars, epsilon and layernorm_qkv's scale, as one-element specs after the arrays)
    specs = [a.spec if isinstance(a, _Arg) else nki.spec(a.shape, str(a.dtype)) for a in args]
    return nki.trace(launch, *specs, target="trn2", **kwargs)


def scalars(entry, constants):
    """The family's runtime scalars (``fused_widths.SCALARS``) as its IR takes them, after the arrays."""
    return [np.full((1,), constants[name], np.float32) for name in fused_widths.SCALARS[entry]]


def _inputs(entry, m, k, h, n, dtype, rng):
    """Weights scaled by 1 / sqrt(fan-in), so that the outputs stay O(1) as in a trained model."""
    out = []
    for shape in _shapes(entry, m, k, h, n):
        scale = 1 / np.sqrt(shape[0]) if len(shape) == 2 and shape[0] != m else 1.0
        out.append((scale * rng.standard_normal(shape)).astype(np.float32).astype(DTYPES[dtype]))
    if entry != "mlp":  # gamma near 1
        out[1] = (1 + 0.1 * out[1].astype(np.float32)).astype(DTYPES[dtype])
    return out


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


# (entry, dtype, (M, K, H, N), constants): ViT-B's widths, ragged M, K, H and N, the smallest widths
VIT_B_QKV = (70, 768, 0, 2304)
CASES = [
    ("mlp", "bfloat16", (70, 768, 3072, 768), {}),  # ViT-B/16
    ("mlp", "float16", (129, 200, 700, 300), {}),  # ragged everything
    ("mlp", "bfloat16", (3, 1, 1, 1), {}),  # the smallest widths
    ("layernorm_mlp", "bfloat16", (70, 768, 3072, 0), CONSTANTS["layernorm_mlp"]),
    ("layernorm_mlp", "float32", (130, 700, 600, 0), {"epsilon": 1e-5}),  # a ragged last bn_stats chunk; HF's eps
    ("layernorm_qkv", "bfloat16", VIT_B_QKV, QKV),
    ("layernorm_qkv", "float32", (5, 1, 0, 384), {"scale": 0.3, "epsilon": 1e-5}),  # the smallest: K 1, one head
    # of 128 (the runtime scalars at values no specialisation fixes)
]
SLOW_CASES = [
    ("mlp", "bfloat16", (197, 1024, 4096, 1024), {}),  # ViT-L/16
    ("layernorm_mlp", "bfloat16", (197, 1024, 4096, 0), CONSTANTS["layernorm_mlp"]),
    ("layernorm_qkv", "bfloat16", (197, 1024, 0, 3072), QKV),
    ("layernorm_qkv", "bfloat16", (197, 1280, 0, 3840), {"scale": 80**-0.5, "epsilon": 1e-6}),  # ViT-H/14
    ("mlp", "bfloat16", (131, 2048, 1024, 1024), {}),  # K at the top of its box
]
# box tops where the concrete kernel (its token blocks of 512, h^T or q^T [features, 512] in SBUF) runs out of SBUF:
# the launcher then runs the family's schedule ("tiled"), as an untrusted call does
BEYOND_CONCRETE = [
    ("layernorm_mlp", "float32", (129, 3328, 512, 0), CONSTANTS["layernorm_mlp"]),  # K and H at their box's top
    ("layernorm_qkv", "float16", (300, 1152, 0, 8064), QKV),  # N and K at the top of the widest box
]
RUNS = [(*case, "numpy") for case in CASES] + [(*CASES[i], "simulator") for i in (1, 6)]
RUNS += [pytest.param(*case, "numpy", marks=pytest.mark.slow) for case in SLOW_CASES]
RUNS += [pytest.param(*case, "jax", marks=pytest.mark.slow) for case in CASES]


def _id(case):
    entry, dtype, (m, k, h, n), _, backend = case.values if hasattr(case, "values") else case
    return f"{backend}-{entry}-{dtype}-{m}x{k}x{h}x{n}"


@pytest.mark.parametrize("entry, dtype, mkhn, constants, backend", RUNS, ids=[_id(c) for c in RUNS])
def test_fused_width_instances_compute_what_the_concrete_trace_computes(entry, dtype, mkhn, constants, backend):
    m, k, h, n = mkhn
    family = _family(entry, dtype, _box(entry, dtype, k, h, n), constants)
    arrays = _inputs(entry, m, k, h, n, dtype, np.random.default_rng(5))
    names = family.param_names
    given = arrays + scalars(entry, constants)
    got = _tuple(family.instantiate(*given, target="trn2").compile(backend).run(dict(zip(names, given))))
    launch, args, kwargs = PLANS[entry](*arrays, **constants)
    concrete = nki.trace(launch, *args, target="trn2", **kwargs)
    want = _tuple(concrete.compile(backend).run(dict(zip(names, args))))
    ref = _tuple(getattr(reference, entry)(*[np.asarray(a, np.float64) for a in arrays], **constants))
    rtol, atol = TOLERANCE[dtype]
    for g, w, r in zip(got, want, ref, strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if backend == "jax":  # XLA rounds a masked tile's matmul or reduction unlike the concrete trace's narrower
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)


@pytest.mark.slow  # 5-10 s each
@pytest.mark.parametrize("entry, dtype, mkhn, constants", BEYOND_CONCRETE,
                         ids=[_id((*c, "numpy")) for c in BEYOND_CONCRETE])
def test_where_the_concrete_kernel_cannot_place_the_launcher_runs_the_familys_schedule(entry, dtype, mkhn, constants):
    """The resident concrete kernel does not fit SBUF at these box tops; the launcher sees it and runs "tiled", whose
    numbers are the family instance's bit for bit and close to float64."""
    m, k, h, n = mkhn
    family = _family(entry, dtype, _box(entry, dtype, k, h, n), constants)
    arrays = _inputs(entry, m, k, h, n, dtype, np.random.default_rng(5))
    launch, args, kwargs = PLANS[entry](*arrays, **constants, schedule="resident")
    with pytest.raises(nki.NkiVerificationError, match="SBUF use reaches"):
        nki.trace(launch, *args, target="trn2", **kwargs)
    launch, args, kwargs = PLANS[entry](*arrays, **constants)
    assert kwargs["schedule"] == "tiled"
    trusted = _tuple(nki.trace(launch, *args, target="trn2", **kwargs).compile("numpy").run(
        dict(zip(family.param_names, args))))  # fmt: skip
    given = arrays + scalars(entry, constants)
    got = _tuple(family.instantiate(*given, target="trn2").compile("numpy").run(dict(zip(family.param_names,
                                                                                          given))))  # fmt: skip
    ref = _tuple(getattr(reference, entry)(*[np.asarray(a, np.float64) for a in arrays], **constants))
    for g, t, r in zip(got, trusted, ref, strict=True):
        np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(t, np.float64))
        np.testing.assert_allclose(np.asarray(g, np.float64), r, rtol=TOLERANCE[dtype][0], atol=TOLERANCE[dtype][1])


def _trusted_runs_at(entry, dtype, box, m):
    """The launcher's kernel (what trust_remote_code runs) at the top of ``box`` with ``m`` rows traces and is verified
    (SBUF included): ``(schedule it picked, its IR)``."""
    top = {name: hi for name, (lo, hi, *_) in _ranges(entry, box).items()}
    shapes = _shapes(entry, m, top["K"], top.get("H", 0), top.get("N", 0))
    launch, args, kwargs = PLANS[entry](*[np.zeros(s, DTYPES[dtype]) for s in shapes], **CONSTANTS[entry])
    traced = nki.trace(launch, *[nki.spec(a.shape, dtype) for a in args], target="trn2", **kwargs)
    return kwargs.get("schedule", "auto"), traced


@pytest.mark.slow  # ~3 min
def test_every_box_top_runs_trusted_and_untrusted():
    """At every box's top (M 600: two token blocks of the resident kernels; the LayerNorm kernels' pipeline of
    blocks), the launcher's kernel traces and fits SBUF (the schedule it picks: its own, or the family's where its
    own does not fit), and the family instance allocates: every accepted shape runs both ways. (float16's tensors
    are bfloat16's sizes.)"""
    picked = {}
    for entry, dtypes in fused_widths.DTYPES.items():
        for dtype in (d for d in dtypes if d != "float16"):
            resident = fused_widths.boxes(entry, ITEMSIZE[dtype])
            for box in resident + fused_widths.streamed_boxes(entry, ITEMSIZE[dtype]):
                schedule, _ = _trusted_runs_at(entry, dtype, box, 600)
                picked[schedule] = picked.get(schedule, 0) + 1
                if box in resident:  # (the streamed boxes' tops: tests/kernels/test_fused_streamed.py)
                    _allocates_at_the_top(entry, dtype, box, m=600)
    assert picked.get("tiled", 0) > 0 and picked.get("auto", 0) > 0  # both: the fallback is exercised


def test_kernel_toml_lists_the_fused_width_families():
    """kernel.toml's fused width families are ``fused_widths.families``' (``python -m kernels.linear.fused_widths``)."""
    from kernels.linear.widths import toml_line

    text = TOML.read_text()
    for entry in ("mlp", "layernorm_mlp", "layernorm_qkv"):
        section = re.search(rf"\[entry-points\.{entry}\]\n(.*?)\n\]\n", text, re.S).group(1)
        listed = [ln for ln in section.split("\n") if 'K = "' in ln]
        assert listed == [toml_line(*f) for f in fused_widths.families(entry)]


@pytest.mark.parametrize("entry", ["mlp", "layernorm_mlp", "layernorm_qkv"])
@pytest.mark.parametrize("itemsize", [4, 2])
def test_the_boxes_are_the_widest_that_fit(entry, itemsize):
    """Each box from K = 1 to the most 128-row tiles whose tensors (sized for the top) fit SBUF; the H (and N)
    ranges consecutive."""
    for box in fused_widths.boxes(entry, itemsize):
        (k0, k1), rest = box[0], box[1:]
        assert k0 == 1
        n1 = k1 if entry == "layernorm_mlp" else box[-1][1]
        h1 = box[1][1] if entry != "layernorm_qkv" else 0
        assert fused_widths.sbuf_bytes(entry, k1, n1, itemsize, h1) <= fused_widths.SBUF_PARTITION_BYTES
        n_over = k1 + 128 if entry == "layernorm_mlp" else n1
        over = fused_widths.sbuf_bytes(entry, k1 + 128, n_over, itemsize, h1) > fused_widths.SBUF_PARTITION_BYTES
        assert k1 == fused_widths.MAX_K or over
        assert all(lo <= hi for lo, hi in rest)


@pytest.mark.parametrize("entry, shape, why", [
    ("mlp", (8192, 8192, 4096), "K 8192, H 8192 and N 4096 do not fit SBUF in bfloat16: .* nor streamed"),
    ("mlp", (7168, 8192, 1536), "K 7168, H 8192 and N 1536 do not fit SBUF in bfloat16"),  # past the streamed K
    ("layernorm_mlp", (4096, 8192, 4096), "K 4096, H 8192 and N 4096 do not fit SBUF in bfloat16"),
    ("layernorm_qkv", (8192, 0, 8064), "K 8192 and N 8064 do not fit SBUF in bfloat16"),
])  # fmt: skip
def test_the_launchers_refuse_the_widths_no_family_serves(entry, shape, why):
    """Past the boxes (resident, then for the MLPs streamed: tests/kernels/test_fused_streamed.py) the launcher
    refuses, naming the widths (so a launcher and its families agree)."""
    k, h, n = shape
    arrays = [nki.spec(s, "bfloat16") for s in _shapes(entry, 197, k, h, n)]
    assert fused_widths.box_of(entry, 2, k, n, h) is None
    with pytest.raises(ValueError, match=why):
        PLANS[entry](*[_Arg(a, a.shape, nl.bfloat16) for a in arrays], **CONSTANTS[entry])


def _allocates_at_the_top(entry, dtype, box, m=300):
    """The family proved, and its instance at the top of the box placed in SBUF by the allocator the simulator and
    the compiler use."""
    family = _family(entry, dtype, box, CONSTANTS[entry])
    top = {name: hi for name, (lo, hi, *_) in _ranges(entry, box).items()}
    shape = _shapes(entry, m, top["K"], top.get("H", 0), top.get("N", 0))
    shape += [(1,)] * len(fused_widths.SCALARS[entry])
    compile_for_target(family.instantiate(*shape, target="trn2").ir, get_target("trn2"))


def test_the_widest_boxes_allocate_at_their_top():
    for entry, dtype in (("mlp", "bfloat16"), ("layernorm_mlp", "float32"), ("layernorm_qkv", "bfloat16")):
        boxes = fused_widths.boxes(entry, ITEMSIZE[dtype])
        _allocates_at_the_top(entry, dtype, boxes[0])
        _allocates_at_the_top(entry, dtype, boxes[-1])


@pytest.mark.slow  # ~30 s
def test_every_fused_box_is_proved_and_allocates():
    """Every family of kernel.toml (but float16's, whose tensors are bf16's sizes) traces, is proved for its whole
    range and allocates at its top."""
    for entry, dtypes in fused_widths.DTYPES.items():
        for dtype in dtypes:
            if dtype != "float16":
                for box in fused_widths.boxes(entry, ITEMSIZE[dtype]):
                    _allocates_at_the_top(entry, dtype, box)
