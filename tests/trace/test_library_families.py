"""The kernel library's shape families: traced through each package's own launcher with symbolic dimensions,
proved, and instantiated at sizes nobody declared, each instance exactly the IR a concrete trace of the same
launcher gives (so everything tested for concrete kernels holds for the instances)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.layernorm.launcher import plan_layernorm
from kernels.rmsnorm.launcher import plan_rmsnorm
from kernels.softmax.launcher import plan_softmax
from kernels.vit_attn.launcher import plan_attention_qkv


class _Arg:
    """What a launcher sees of a family's argument at publish time (hub_client/bundle.py does the same)."""

    def __init__(self, spec, shape):
        self.spec, self.shape, self.ndim = spec, shape, len(shape)
        self.dtype = nl.bfloat16 if spec.dtype == "bfloat16" else np.dtype(spec.dtype)


def _family(plan, specs, **constants):
    stand_ins = [_Arg(s, shape) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = plan(*stand_ins, **constants)
    return nki.trace(launch, *[a.spec if isinstance(a, _Arg) else a for a in args], target="trn2", **kwargs)


def _concrete(plan, shapes, dtype, **constants):
    arrays = [np.zeros(s, nl.bfloat16 if dtype == "bfloat16" else dtype) for s in shapes]
    launch, args, kwargs = plan(*arrays, **constants)
    specs = [nki.spec(a.shape, dtype) if hasattr(a, "shape") else a for a in args]
    return nki.trace(launch, *specs, target="trn2", **kwargs)


N = {"N": (1, 65536)}
CASES = {
    "softmax": (plan_softmax, [(("N", 512), N)], "float32", {}, [(1,), (129,), (4000,)]),
    "rmsnorm": (plan_rmsnorm, [(("N", 1024), N), ((1024,), None)], "float32", {"epsilon": 1e-6}, [(7,), (300,)]),
    "layernorm": (plan_layernorm, [(("N", 768), N), ((768,), None), ((768,), None)], "bfloat16", {"epsilon": 1e-6},
                  [(1,), (197,), (1576,)]),
    "vit-attn qkv": (plan_attention_qkv, [(("B", 197, 1152), {"B": (1, 256)})], "bfloat16", {"num_heads": 6},
                     [(3,)]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_instances_equal_concrete_traces(name):
    plan, args, dtype, constants, samples = CASES[name]
    family = _family(plan, [nki.spec(shape, dtype, dims=dims) for shape, dims in args], **constants)
    symbol = next(s for shape, _ in args for s in shape if isinstance(s, str))
    for (value,) in samples:
        shapes = [tuple(value if s == symbol else s for s in shape) for shape, _ in args]
        assert family.instantiate(*shapes, target="trn2").text == _concrete(plan, shapes, dtype, **constants).text


@nki.jit
def _add_rows(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range((n + 127) // 128):
        rows = t * 128 + i_p
        s = nl.add(nl.load(x[rows, i_f], mask=rows < n), nl.load(y[rows, i_f], mask=rows < n), mask=rows < n)
        nl.store(out[rows, i_f], value=s, mask=rows < n)
    return out


def test_a_dimension_shared_by_two_arguments_binds_once():
    spec = nki.spec(("N", 256), "float32", dims={"N": (1, 4096)})
    family = nki.trace(_add_rows, spec, spec)
    assert "symbol $_0 = ($N + 127) // 128" in family.text
    x, y = np.ones((300, 256), np.float32), np.full((300, 256), 2, np.float32)
    np.testing.assert_array_equal(family.instantiate(x, y).compile().run({"x": x, "y": y}), x + y)
    with pytest.raises(nki.NkiShapeFamilyError, match="dimension N is 300 in one array and 200 in another"):
        family.instantiate((300, 256), (200, 256))


# -- the families added with stepped symbols and symbolic offsets (kernels/*/kernel.toml) ----------------------------
from kernels.linear.launcher import plan_layernorm_linear, plan_linear  # noqa: E402
from kernels.matmul.launcher import plan_matmul  # noqa: E402
from kernels.vit_attn.launcher import plan_attention_split  # noqa: E402

STEPPED = {
    # (plan, argument shapes, dims, dtype, constants, instances {symbol: value})
    "matmul tiled": (plan_matmul, [("K", "M"), ("K", "N")],
                     {"K": (128, 8192, 128), "M": (128, 8192, 128), "N": (512, 8192, 512)}, "float32", {},
                     [{"K": 384, "M": 256, "N": 1536}, {"K": 128, "M": 128, "N": 512}]),
    "matmul blocked": (plan_matmul, [(1024, "M"), (1024, "N")], {"M": (512, 8192, 512), "N": (1024, 8192, 1024)},
                       "bfloat16", {}, [{"M": 512, "N": 2048}, {"M": 1536, "N": 1024}]),
    "attention_split": (plan_attention_split, [(1536, "T"), ("T", 768)], {"T": (197, 50432, 197)}, "bfloat16",
                        {"num_heads": 12, "seq": 197}, [{"T": 591}]),
    "linear 2 tiles": (plan_linear, [("M", 768), (768, 2304), (2304,)], {"M": (129, 256)}, "bfloat16",
                       {"epilogue": "bias"}, [{"M": 197}, {"M": 256}]),
    "linear 3 tiles by dma": (plan_linear, [("M", 768), (768, 2304), (2304,)], {"M": (257, 365)}, "bfloat16",
                              {"epilogue": "bias"}, [{"M": 300}]),  # x^T by 3-D DMA transposes of x reshaped
    "linear residual 1 tile": (plan_linear, [("M", 768), (768, 768), (768,), ("M", 768)], {"M": (1, 128)},
                               "bfloat16", {"epilogue": "residual"}, [{"M": 50}]),
    "layernorm_linear 3 tiles": (plan_layernorm_linear, [("M", 256), (256,), (256,), (256, 192), (192,)],
                                 {"M": (257, 384)}, "float32", {"epilogue": "bias", "epsilon": 1e-6}, [{"M": 330}]),
}  # fmt: skip
# (the fused MLPs' families mask their last token block where a concrete trace cuts it to its size: other IR, the
# same numbers, tested in tests/kernels/test_linear_families.py)


def _stepped_family(plan, shapes, dims, dtype, constants):
    specs = [nki.spec(s, dtype, dims={n: dims[n] for n in s if isinstance(n, str)}) for s in shapes]
    return _family(plan, specs, **constants)


@pytest.mark.parametrize("name", list(STEPPED))
def test_stepped_and_split_families_equal_concrete_traces(name):
    """Families whose dimensions are multiples (matmul, attention_split) or whose ranges are split where the
    kernel's Python decides on the tile count (linear): each instance is exactly the concrete trace's IR."""
    plan, shapes, dims, dtype, constants, instances = STEPPED[name]
    family = _stepped_family(plan, shapes, dims, dtype, constants)
    for values in instances:
        concrete = [tuple(values.get(s, s) for s in shape) for shape in shapes]
        assert family.instantiate(*concrete, target="trn2").text == _concrete(plan, concrete, dtype, **constants).text


@pytest.mark.parametrize("shapes, dtype, epilogue, rows", [
    ([("M", 256), (256, 192), (192,)], "float32", "bias", (385, 700, 2433)),
    ([("M", 768), (768, 2304), (2304,)], "bfloat16", "bias", (1576,)),
    # whole result rows, two tiles per residual load and store: pairs in the family's tail too
    ([("M", 768), (768, 768), (768,), ("M", 768)], "bfloat16", "residual", (1000,)),  # 5 tail tiles: 2 pairs, the last
    pytest.param([("M", 768), (768, 768), (768,), ("M", 768)], "bfloat16", "residual", (1600, 2432, 2560),
                 marks=pytest.mark.slow),  # ragged; a whole tile left over; a full group of 16 and a 1-tile tail
])  # fmt: skip
def test_linear_families_past_the_prologue_compute_the_concrete_result(shapes, dtype, epilogue, rows):
    """Where a concrete trace pipelines a static group of tail tiles (after the last full group of 16), linear's
    family runs loops (their count is symbolic): pairs of whole tiles, a whole tile left over, the last tile masked.
    Other IR, the same numbers."""
    family = _stepped_family(plan_linear, shapes, {"M": (385, 65536)}, dtype, {"epilogue": epilogue})
    rng = np.random.default_rng(2)
    np_dtype = nl.bfloat16 if dtype == "bfloat16" else np.float32
    for m in rows:
        concrete_shapes = [tuple(m if s == "M" else s for s in shape) for shape in shapes]
        args = [rng.standard_normal(s).astype(np.float32).astype(np_dtype) for s in concrete_shapes]
        arrays = dict(zip(["x", "w", "b", "residual"], args))
        out = family.instantiate(*args, target="trn2").compile("numpy").run(arrays)
        concrete = _concrete(plan_linear, concrete_shapes, dtype, epilogue=epilogue)
        np.testing.assert_array_equal(out, concrete.compile("numpy").run(arrays))
