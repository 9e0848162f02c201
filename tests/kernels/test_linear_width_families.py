"""linear's and layernorm_linear's shape families over the widths (``kernels/linear/widths.py``): M, K and N
symbolic, traced through the launchers, proved for the declared ranges, and instantiated at widths nobody
declared (ViT-L's 1024 / 4096, 384 / 1152, 8192, ragged ones, each range's ends). An instance is not the concrete
trace's IR (one plain schedule for every width, the on-chip tensors sized for the top of the ranges, the last row
tile, K tile and column block masked), so each is run against the concrete trace of the same shape: the same
numbers, bit for bit, and against float64."""

import re
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.linear import reference, widths
from kernels.linear.kernel import choose_x_source, fits_resident
from kernels.linear.launcher import plan_layernorm_linear, plan_linear
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import get_target
from tests.kernels.family_args import FamilyArg as _Arg

BF16 = nl.bfloat16
DTYPES = {"float32": np.float32, "bfloat16": BF16, "float16": np.float16}
TOLERANCE = {"float32": (1e-5, 2e-4), "bfloat16": (2e-2, 8e-2), "float16": (2e-3, 2e-2)}  # kernel.toml's (fp16: ~)
TOML = Path(widths.__file__).with_name("kernel.toml")


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the instance test below names its backends itself, the
    others use none.)"""
    return None



def _box(entry, dtype, epilogue, k, n):
    """The declared (K range, N range) holding K = k, N = n."""
    boxes = widths.width_boxes(np.dtype(DTYPES[dtype]).itemsize, entry == "layernorm_linear", epilogue)
    return next((kr, nr) for kr, nr in boxes if kr[0] <= k <= kr[1] and nr[0] <= n <= nr[1])


def _shapes(entry, epilogue, m, k, n):
    if entry == "linear":
        return [(m, k), (k, n)] + [(n,)] * (epilogue != "none") + [(m, n)] * (epilogue == "residual")
    return [(m, k), (k,), (k,), (k, n)] + [(n,)] * (epilogue != "none")


def _family(entry, dtype, epilogue, box):
    (k0, k1), (n0, n1) = box
    ranges = {"M": (1, 65536), "K": (k0, k1), "N": (n0, n1)}
    names = _shapes(entry, epilogue, "M", "K", "N")
    specs = [nki.spec(s, dtype, dims={d: ranges[d] for d in s}) for s in names]
    stand_ins = [_Arg(s, shape, DTYPES[dtype]) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    plan, constants = _plan(entry, epilogue)
    launch, args, kwargs = plan(*stand_ins, **constants)
    # (layernorm_linear's epsilon as a one-element spec after the arrays: a runtime scalar; b None for no bias)
    specs = [a.spec if isinstance(a, _Arg) else nki.spec(a.shape, str(a.dtype)) if a is not None else a for a in args]
    return nki.trace(launch, *specs, target="trn2", **kwargs)


def _plan(entry, epilogue):
    if entry == "linear":
        return plan_linear, {"epilogue": epilogue}
    return plan_layernorm_linear, {"epilogue": epilogue, "epsilon": 1e-6}


def _scalars(entry, constants):
    """The family's runtime scalars as its IR takes them (layernorm_linear's epsilon, after the arrays)."""
    return [np.full((1,), constants["epsilon"], np.float32)] if entry == "layernorm_linear" else []


def _inputs(entry, epilogue, m, k, n, dtype, rng):
    cast = DTYPES[dtype]

    def arr(shape, scale=1.0, shift=0.0):
        return (scale * rng.standard_normal(shape) + shift).astype(np.float32).astype(cast)

    out = [arr((m, k), 2.0, 0.5) if entry == "layernorm_linear" else arr((m, k))]
    if entry == "layernorm_linear":
        out += [(1 + arr((k,), 0.1).astype(np.float32)).astype(cast), arr((k,))]
    out.append(arr((k, n), 1 / np.sqrt(k)))  # outputs O(1), as a trained model's
    out += [arr((n,))] * (epilogue != "none") + [arr((m, n))] * (epilogue == "residual")
    return out


# (entry, dtype, epilogue, (M, K, N) to run): every box kind (the widest K, the widest N, the middle), the ends of
# ranges, ragged M, K and N (N % 16 in 1..8: a narrow last column block), ViT-L's widths
CASES = [
    ("linear", "bfloat16", "bias", (70, 1024, 4096)),  # ViT-L's fc1 widths: K 1024, N 4096
    ("linear", "float32", "residual", (130, 384, 1152)),
    ("linear", "float16", "none", (5, 1, 513)),  # K at its range's bottom, N one past a block
    ("linear", "float32", "gelu", (129, 1000, 1100)),  # ragged everything
    ("layernorm_linear", "bfloat16", "bias", (70, 1024, 4096)),
    ("layernorm_linear", "float32", "gelu", (70, 1700, 513)),  # a ragged last bn_stats chunk, a 1-column block
]
SLOW_CASES = [  # 2-10 s each on NumPy
    ("linear", "bfloat16", "bias", (197, 1024, 4096)),
    ("layernorm_linear", "bfloat16", "bias", (197, 1024, 4096)),
    ("linear", "bfloat16", "gelu", (3, 8192, 300)),  # K at the top of the widest box
    ("linear", "float32", "none", (129, 100, 8192)),  # N at the top
    ("linear", "bfloat16", "bias", (197, 2944, 4096)),  # both at the top of their box
    ("layernorm_linear", "float32", "bias", (3, 7808, 512)),
    ("layernorm_linear", "bfloat16", "none", (300, 768, 2304)),
    ("layernorm_linear", "float16", "gelu", (131, 384, 1152)),
]
# NumPy for every case; the simulator (its NumPy values and timing) for two; JAX (a fresh XLA program per instance
# and per concrete trace) with the slow tests
RUNS = [(*case, "numpy") for case in CASES] + [(*CASES[i], "simulator") for i in (1, 5)]
RUNS += [pytest.param(*case, "numpy", marks=pytest.mark.slow) for case in SLOW_CASES]
RUNS += [pytest.param(*case, "jax", marks=pytest.mark.slow) for case in CASES]


def _id(case):
    entry, dtype, epilogue, (m, k, n), backend = case.values if hasattr(case, "values") else case
    return f"{backend}-{entry}-{dtype}-{epilogue}-{m}x{k}x{n}"


@pytest.mark.parametrize("entry, dtype, epilogue, mkn, backend", RUNS, ids=[_id(c) for c in RUNS])
def test_width_instances_compute_what_the_concrete_trace_computes(entry, dtype, epilogue, mkn, backend):
    m, k, n = mkn
    family = _family(entry, dtype, epilogue, _box(entry, dtype, epilogue, k, n))
    arrays = _inputs(entry, epilogue, m, k, n, dtype, np.random.default_rng(5))
    names = family.param_names
    plan, constants = _plan(entry, epilogue)
    given = arrays + _scalars(entry, constants)
    got = family.instantiate(*given, target="trn2").compile(backend).run(dict(zip(names, given)))
    launch, args, kwargs = plan(*arrays, **constants)
    concrete = nki.trace(launch, *args, target="trn2", **kwargs)
    want = concrete.compile(backend).run(dict(zip(names, args)))
    rtol, atol = TOLERANCE[dtype]
    if backend == "jax":  # XLA's matmuls and reductions round a masked 512-column block or K tile, or a padded
        # bn_aggr, differently from the concrete trace's narrower ones (NumPy's do not: backends/numpy_ref)
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    ref = getattr(reference, entry)(*[np.asarray(a, np.float64) for a in arrays], **constants)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol, atol=atol)


def test_kernel_toml_lists_the_width_families():
    """kernel.toml's width families are ``widths.families``' (generated by ``python -m kernels.linear.widths``), so
    the boxes cannot drift from the SBUF model the kernel is sized by."""
    text = TOML.read_text()
    for entry in ("linear", "layernorm_linear"):
        section = re.search(rf"\[entry-points\.{entry}\]\n(.*?)\n\]\n", text, re.S).group(1)
        listed = [ln for ln in section.split("\n") if 'K = "' in ln]
        assert listed == [widths.toml_line(*f) for f in widths.families(entry)]


@pytest.mark.parametrize("epilogue", ["none", "bias", "gelu", "residual"])
@pytest.mark.parametrize("layernorm", [False, True])
@pytest.mark.parametrize("itemsize", [4, 2])
def test_the_boxes_tile_every_width_up_to_the_launchers_limit(itemsize, layernorm, epilogue):
    """N from 1 to 8192 in consecutive boxes, each from K = 1 to the most 128-row tiles whose tensors fit SBUF."""
    boxes = widths.width_boxes(itemsize, layernorm, epilogue)
    assert boxes[0][1][0] == 1 and boxes[-1][1][1] == widths.MAX_N
    assert all(kr[0] == 1 for kr, _ in boxes)
    assert all(nr_next[0] == nr[1] + 1 for (_, nr), (_, nr_next) in zip(boxes, boxes[1:]))
    for (_, k1), (_, n1) in boxes:
        assert widths.sbuf_bytes(k1, n1, itemsize, layernorm, epilogue) <= widths.SBUF_PARTITION_BYTES
        over = widths.sbuf_bytes(k1 + 128, n1, itemsize, layernorm, epilogue) > widths.SBUF_PARTITION_BYTES
        assert k1 == widths.MAX_K or over


def _allocates_at_the_top(entry, dtype, epilogue, box):
    """The family proved, and its instance at the top of the box (M = 300) placed in SBUF by the allocator the
    simulator and the compiler use (which needs holes large enough, not only the bytes the proof counts)."""
    family = _family(entry, dtype, epilogue, box)
    (_, k1), (_, n1) = box
    shapes = _shapes(entry, epilogue, 300, k1, n1) + [(1,)] * (entry == "layernorm_linear")  # (+ epsilon)
    instance = family.instantiate(*shapes, target="trn2")
    compile_for_target(instance.ir, get_target("trn2"))


def test_the_widest_boxes_allocate_at_their_top():
    for entry, dtype, epilogue in (("linear", "float32", "gelu"), ("layernorm_linear", "bfloat16", "bias")):
        boxes = widths.width_boxes(np.dtype(DTYPES[dtype]).itemsize, entry == "layernorm_linear", epilogue)
        _allocates_at_the_top(entry, dtype, epilogue, boxes[-1])


@pytest.mark.slow  # ~30 s
def test_every_box_is_proved_and_allocates():
    """Every family of kernel.toml (but float16's, whose tensors are bf16's sizes) traces and is proved for its
    whole range, and allocates at its top: what the bundle builder does for each at publish, and more."""
    for entry in ("linear", "layernorm_linear"):
        for dtype in ("float32", "bfloat16"):
            for epilogue in ("none", "bias", "gelu", "residual")[: 4 if entry == "linear" else 3]:
                for box in widths.width_boxes(np.dtype(DTYPES[dtype]).itemsize, entry == "layernorm_linear", epilogue):
                    _allocates_at_the_top(entry, dtype, epilogue, box)


@pytest.mark.parametrize("dtype, epilogue, m, k, n", [("bfloat16", "bias", 197, 6144, 2048),
                                                      ("float32", "residual", 197, 3840, 1536)])  # fmt: skip
def test_just_past_the_boxes_the_launcher_refuses_and_the_kernel_takes_the_family_schedule(dtype, epilogue, m, k, n):
    """Where no width family reaches, the launcher refuses up front: it takes what the published families cover. The
    kernel's own schedule does not fit SBUF there (``kernel.fits_resident``), so the kernel itself, past the launcher,
    runs the family's schedule sized for the exact shape (``widths.sbuf_bytes`` is a bound with no tensor's bytes
    reused, so just past a box that can still allocate)."""
    boxes = widths.width_boxes(np.dtype(DTYPES[dtype]).itemsize, False, epilogue)
    assert not any(kr[0] <= k <= kr[1] and nr[0] <= n <= nr[1] for kr, nr in boxes)
    shapes = [nki.spec(s, dtype) for s in _shapes("linear", epilogue, m, k, n)]
    with pytest.raises(ValueError, match=rf"linear: K {k} and N {n} in {dtype} with epilogue '{epilogue}' do not fit "
                                         r"SBUF"):
        plan_linear(*shapes, epilogue=epilogue)
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    assert not fits_resident(m, k, n, itemsize, epilogue, choose_x_source(m, k, n, itemsize, epilogue))
