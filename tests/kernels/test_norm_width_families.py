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
from kernels.softmax import launcher as softmax_launcher
from kernels.softmax import reference as softmax_reference
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import get_target

BF16 = nl.bfloat16
DTYPES = {"float32": np.float32, "bfloat16": BF16, "float16": np.float16}
KERNELS = Path(softmax_launcher.__file__).parents[1]


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the instance tests name their backends themselves.)"""
    return None


class _Arg:
    """What a launcher sees of a family's argument at publish time (hub_client/bundle.py does the same)."""

    def __init__(self, spec, shape, dtype):
        self.spec, self.shape, self.ndim, self.dtype = spec, shape, len(shape), dtype


# entry: (plan, the arguments' shapes over N and W, reference, {dtype: (rtol, atol)})
ENTRIES = {
    "softmax": (softmax_launcher.plan_softmax, [("N", "W")], softmax_reference.softmax,
                {"float32": (1e-5, 1e-7), "bfloat16": (2e-2, 2e-3), "float16": (1e-2, 5e-4)}),
}  # fmt: skip
RANGES = {"N": (1, 65536), "W": (1, 8192)}


def _family(entry, dtype, **constants):
    plan, shapes, *_ = ENTRIES[entry]
    specs = [nki.spec(s, dtype, dims={d: RANGES[d] for d in s}) for s in shapes]
    stand_ins = [_Arg(s, shape, DTYPES[dtype]) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = plan(*stand_ins, **constants)
    return nki.trace(launch, *[a.spec if isinstance(a, _Arg) else a for a in args], target="trn2", **kwargs)


def _inputs(entry, dtype, n, w, rng):
    cast = DTYPES[dtype]
    shapes = [tuple({"N": n, "W": w}[d] for d in s) for s in ENTRIES[entry][1]]
    scale = [3.0] + [0.5] * (len(shapes) - 1)
    shift = [0.5] + [1.0] * (len(shapes) - 1)  # a mean off zero; gamma / g near 1
    return [(k * rng.standard_normal(s) + c).astype(np.float32).astype(cast) for s, k, c in zip(shapes, scale, shift)]


# (entry, dtype, (N, W), constants): the range's ends, ragged N and W (not multiples of 128 / 512), ViT widths
CASES = [
    ("softmax", "float32", (1, 1), {}),
    ("softmax", "float32", (300, 700), {}),
    ("softmax", "float32", (129, 8192), {}),  # W at the top
    ("softmax", "bfloat16", (197, 1000), {}),
    ("softmax", "float16", (5, 513), {}),
]
SLOW_CASES = [("softmax", "bfloat16", (1000, 8191), {})]
RUNS = [(*case, "numpy") for case in CASES] + [(*CASES[i], "simulator") for i in (1,)]
RUNS += [pytest.param(*case, "numpy", marks=pytest.mark.slow) for case in SLOW_CASES]
RUNS += [pytest.param(*case, "jax", marks=pytest.mark.slow) for case in CASES]


def _id(case):
    entry, dtype, (n, w), constants, backend = case.values if hasattr(case, "values") else case
    return f"{backend}-{entry}-{dtype}-{n}x{w}" + "".join(f"-{k}{v}" for k, v in constants.items())


@pytest.mark.parametrize("entry, dtype, nw, constants, backend", RUNS, ids=[_id(c) for c in RUNS])
def test_width_instances_compute_what_the_concrete_trace_computes(entry, dtype, nw, constants, backend):
    plan, _, reference, tolerances = ENTRIES[entry]
    family = _family(entry, dtype, **constants)
    arrays = _inputs(entry, dtype, *nw, np.random.default_rng(3))
    launch, args, kwargs = plan(*arrays, **constants)  # the concrete trace: the launcher's kernel for this shape
    concrete = nki.trace(launch, *args, target="trn2", **kwargs)
    assert concrete.ir.name != family.ir.name or entry == "rmsnorm"  # a different kernel from the family's
    names = family.param_names
    got = family.instantiate(*args, target="trn2").compile(backend).run(dict(zip(names, args)))
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
    launcher = {"softmax": softmax_launcher}[entry]
    for dtype in launcher.DTYPES:
        assert re.search(rf'"N x W:{dtype}".*W = "1\.\.{launcher.MAX_COLUMNS}"', text), dtype


@pytest.mark.parametrize("entry, dtype", [("softmax", "float32")])
def test_the_widest_instance_allocates(entry, dtype):
    """Proved at publish (the verifier's SBUF rule), and placed by the allocator at the top of the range."""
    family = _family(entry, dtype)
    shapes = [tuple({"N": 300, "W": RANGES["W"][1]}[d] for d in s) for s in ENTRIES[entry][1]]
    compile_for_target(family.instantiate(*shapes, target="trn2").ir, get_target("trn2"))


def test_the_launcher_refuses_integer_softmax():
    with pytest.raises(ValueError, match="dtype int32 is not supported"):
        softmax_launcher.softmax(np.ones((4, 8), np.int32))
