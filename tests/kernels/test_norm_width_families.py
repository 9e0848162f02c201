"""The row kernels' shape families over the row length (softmax, rmsnorm, layernorm: ``widths.py`` in each
package): the rows N and the row length W symbolic, traced through the launchers as the bundle builder traces them,
proved for the declared ranges, and instantiated at lengths nobody declared (1, ragged ones, ViT widths, the top
of the range). An instance is not the concrete trace's IR (its tiles are sized for the top of the range and masked
to W), so each is run against the concrete trace of the same shape, the same numbers bit for bit, and against
float64."""

import re
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.layernorm import launcher as layernorm_launcher
from kernels.layernorm import reference as layernorm_reference
from kernels.layernorm import widths as layernorm_widths
from kernels.rmsnorm import launcher as rmsnorm_launcher
from kernels.rmsnorm import reference as rmsnorm_reference
from kernels.rmsnorm import widths as rmsnorm_widths
from kernels.softmax import launcher as softmax_launcher
from kernels.softmax import reference as softmax_reference
from kernels.softmax import widths as softmax_widths
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import get_target
from tests.kernels.family_args import FamilyArg as _Arg

BF16 = nl.bfloat16
DTYPES = {"float32": np.float32, "bfloat16": BF16, "float16": np.float16}
KERNELS = Path(softmax_launcher.__file__).parents[1]


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the instance tests name their backends themselves.)"""
    return None



# entry: (launcher module, widths module, the arguments' shapes over N and W, reference, {dtype: (rtol, atol)})
ENTRIES = {
    "softmax": (softmax_launcher, softmax_widths, [("N", "W")], softmax_reference.softmax,
                {"float32": (1e-5, 1e-7), "bfloat16": (2e-2, 2e-3), "float16": (1e-2, 5e-4)}),
    "rmsnorm": (rmsnorm_launcher, rmsnorm_widths, [("N", "W"), ("W",)], rmsnorm_reference.rmsnorm,
                {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 2e-2), "float16": (1e-2, 2e-3)}),
    "layernorm": (layernorm_launcher, layernorm_widths, [("N", "W"), ("W",), ("W",)], layernorm_reference.layernorm,
                  {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 6e-2), "float16": (5e-3, 1e-2)}),
}  # fmt: skip
RUNTIME_EPSILON = {"rmsnorm", "layernorm"}  # their width families take epsilon as a [1] float32 array, last


def _plan(entry):
    launcher = ENTRIES[entry][0]
    return getattr(launcher, f"plan_{entry}")


def _max_columns(entry, dtype):
    launcher = ENTRIES[entry][0]
    return launcher.max_columns(dtype) if hasattr(launcher, "max_columns") else launcher.MAX_COLUMNS


def _box(entry, dtype, w):
    """The declared W range holding ``w``."""
    return next(b for b in ENTRIES[entry][1].width_boxes(dtype, _max_columns(entry, dtype)) if b[0] <= w <= b[1])


def _family(entry, dtype, w, **constants):
    """The family holding row length ``w``, traced through the launcher as the bundle builder traces it."""
    ranges = {"N": (1, 65536), "W": _box(entry, dtype, w)}
    specs = [nki.spec(s, dtype, dims={d: ranges[d] for d in s}) for s in ENTRIES[entry][2]]
    stand_ins = [_Arg(s, shape, DTYPES[dtype]) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = _plan(entry)(*stand_ins, **constants)
    # a runtime scalar (rmsnorm's epsilon) comes back as a one-element array: traced as its spec, values unseen
    args = [a.spec if isinstance(a, _Arg) else nki.spec(a.shape, str(a.dtype)) for a in args]
    return nki.trace(launch, *args, target="trn2", **kwargs)


def _inputs(entry, dtype, n, w, rng):
    cast = DTYPES[dtype]
    shapes = [tuple({"N": n, "W": w}[d] for d in s) for s in ENTRIES[entry][2]]
    scale = [3.0] + [0.5] * (len(shapes) - 1)
    shift = [0.5] + [1.0] * (len(shapes) - 1)  # a mean off zero; gamma / g near 1
    return [(k * rng.standard_normal(s) + c).astype(np.float32).astype(cast) for s, k, c in zip(shapes, scale, shift)]


# (entry, dtype, (N, W), constants): the range's ends, ragged N and W (not multiples of 128 / 512), ViT widths
CASES = [
    ("softmax", "float32", (1, 1), {}),
    ("softmax", "float32", (300, 700), {}),
    ("softmax", "float32", (129, 4096), {}),  # the top of the first box
    ("softmax", "float32", (129, 8192), {}),  # W at the top
    ("softmax", "bfloat16", (197, 1000), {}),
    ("softmax", "float16", (5, 513), {}),
    ("rmsnorm", "float32", (1, 1), {"epsilon": 1e-6}),
    ("rmsnorm", "float32", (300, 700), {"epsilon": 1e-5}),  # an epsilon no specialisation fixes
    ("rmsnorm", "float32", (129, 4097), {"epsilon": 0.25}),  # the bottom of the second box
    ("rmsnorm", "bfloat16", (197, 768), {"epsilon": 1e-6}),
    ("rmsnorm", "float16", (70, 8192), {"epsilon": 1e-3}),
    ("layernorm", "float32", (1, 1), {"epsilon": 1e-6}),
    ("layernorm", "float32", (300, 700), {"epsilon": 1e-5}),  # a ragged last bn_stats chunk (700 = 512 + 188)
    ("layernorm", "bfloat16", (197, 768), {"epsilon": 1e-6}),  # ViT-B
    ("layernorm", "bfloat16", (130, 2048), {"epsilon": 0.5}),  # the top of the first box
    ("layernorm", "float16", (5, 2049), {"epsilon": 1e-3}),  # the bottom of the second: one column in chunk 4
    ("layernorm", "float32", (129, 8192), {"epsilon": 1e-5}),  # float32's top
]
SLOW_CASES = [("softmax", "bfloat16", (1000, 8191), {}), ("rmsnorm", "float32", (300, 16384), {"epsilon": 1e-5}),
              ("rmsnorm", "bfloat16", (129, 12345), {"epsilon": 1e-6}),
              ("layernorm", "bfloat16", (300, 16384), {"epsilon": 1e-6}), ("layernorm", "float16", (1000, 1280), {})]
RUNS = [(*case, "numpy") for case in CASES] + [(*CASES[i], "simulator") for i in (1, 7, 13)]
RUNS += [pytest.param(*case, "numpy", marks=pytest.mark.slow) for case in SLOW_CASES]
# (JAX: not LayerNorm at one column, whose variance is 0: its output is beta plus the cancellation of x * rstd and
# mean * rstd with rstd = 1 / sqrt(epsilon) = 1000, which XLA's fused multiply-adds round otherwise, ~3e-5)
RUNS += [pytest.param(*case, "jax", marks=pytest.mark.slow) for case in CASES if case[:3] != ("layernorm", "float32",
                                                                                             (1, 1))]  # fmt: skip


def _id(case):
    entry, dtype, (n, w), constants, backend = case.values if hasattr(case, "values") else case
    return f"{backend}-{entry}-{dtype}-{n}x{w}" + "".join(f"-{k}{v}" for k, v in constants.items())


@pytest.mark.parametrize("entry, dtype, nw, constants, backend", RUNS, ids=[_id(c) for c in RUNS])
def test_width_instances_compute_what_the_concrete_trace_computes(entry, dtype, nw, constants, backend):
    _, _, _, reference, tolerances = ENTRIES[entry]
    family = _family(entry, dtype, nw[1], **constants)
    arrays = _inputs(entry, dtype, *nw, np.random.default_rng(3))
    launch, args, kwargs = _plan(entry)(*arrays, **constants)  # the concrete trace: the launcher's kernel here
    concrete = nki.trace(launch, *args, target="trn2", **kwargs)
    assert concrete.ir.name != family.ir.name  # a different kernel from the family's
    # the family's arguments: the arrays, then its runtime scalars (rmsnorm's epsilon as a [1] float32 array)
    eps = constants.get("epsilon", 1e-6)
    runtime = arrays + [np.full((1,), eps, np.float32)] * (entry in RUNTIME_EPSILON)
    assert family.param_names[len(arrays):] == ["epsilon"] * (entry in RUNTIME_EPSILON)
    names = family.param_names
    got = family.instantiate(*runtime, target="trn2").compile(backend).run(dict(zip(names, runtime)))
    want = concrete.compile(backend).run(dict(zip(concrete.param_names, args)))
    rtol, atol = tolerances[dtype]
    if backend == "jax":  # XLA's reductions may round a masked 8192-column row differently from a narrower one
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    ref = reference(*[np.asarray(a, np.float64) for a in arrays], **constants)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_kernel_toml_declares_a_width_family_per_dtype_over_the_launchers_range(entry):
    """Every dtype the launcher takes has a family over every row length it takes (after the fixed-width ones)."""
    text = (KERNELS / entry / "kernel.toml").read_text()
    launcher, widths = ENTRIES[entry][:2]
    listed = re.findall(r'\{ args = \["N x W:(\w+)".*W = "(\d+)\.\.(\d+)" }(.*)', text)
    scalars = ', scalars = { epsilon = "float32" } },' if entry in RUNTIME_EPSILON else " },"
    want = [(d, str(lo), str(hi), scalars) for d in launcher.DTYPES
            for lo, hi in widths.width_boxes(d, _max_columns(entry, d))]  # fmt: skip
    assert listed == want


TOPS = [("softmax", "float32", 4096), ("softmax", "float32", 8192), ("rmsnorm", "float32", 4096),
        ("rmsnorm", "float32", 16384), ("rmsnorm", "bfloat16", 8192), ("layernorm", "float32", 8192),
        ("layernorm", "bfloat16", 16384), ("layernorm", "float16", 2048)]


@pytest.mark.parametrize("entry, dtype, w", TOPS)
def test_each_box_allocates_at_its_top(entry, dtype, w):
    """Proved at publish (the verifier's SBUF rule), and placed by the allocator at the top of its range."""
    family = _family(entry, dtype, w)
    shapes = [tuple({"N": 300, "W": w}[d] for d in s) for s in ENTRIES[entry][2]] + [(1,)] * (entry in RUNTIME_EPSILON)
    compile_for_target(family.instantiate(*shapes, target="trn2").ir, get_target("trn2"))


def test_the_launchers_refuse_what_no_family_covers():
    with pytest.raises(ValueError, match="dtype int32 is not supported"):
        softmax_launcher.softmax(np.ones((4, 8), np.int32))
    with pytest.raises(ValueError, match="at most 16384 columns"):
        rmsnorm_launcher.rmsnorm(np.ones((4, 16385), np.float32), np.ones(16385, np.float32))
    with pytest.raises(ValueError, match="x and g must share a dtype"):
        rmsnorm_launcher.rmsnorm(np.ones((4, 8), np.float32), np.ones(8, np.float16))
    with pytest.raises(ValueError, match="at most 8192 columns per row in float32"):
        layernorm_launcher.layernorm(*[np.ones(s, np.float32) for s in ((4, 8193), (8193,), (8193,))])
    with pytest.raises(ValueError, match="must share a dtype"):
        layernorm_launcher.layernorm(*[np.ones(s, np.int32) for s in ((4, 8), (8,), (8,))])
