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
