"""Shape families traced through the current-API front end (``nki_dsl.current``): its loops stay symbolic where
the body allows (``nl.affine_range(M // 128)`` with ``M`` a dimension keeps a symbolic trip count), a loop the body
forces to unroll (``tiles[k]``, a Python list indexed by the loop) raises the dimension error naming the line, and
the affine-dependence decision (which loops become sequential) is taken on the family's upper kernel."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.current as cnki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as cnl
from kernels.matmul import current_api
from kernels.matmul.reference import matmul

K = {"K": (128, 4096, 128)}
LHS = nki.spec(("K", "M"), "float32", dims=K | {"M": (128, 4096, 128)})
RHS = nki.spec(("K", "N"), "float32", dims=K | {"N": (512, 8192, 512)})


def test_the_guides_tiled_matmul_is_a_family_with_symbolic_loops():
    family = nki.trace(current_api.matmul_tiled, LHS, RHS, target="trn2")  # traced and proved
    assert family.text.count("= range(0, $_") == 3  # the three tile loops, none unrolled
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((384, 256)).astype(np.float32), rng.standard_normal((384, 1536)).astype(np.float32)
    instance = family.instantiate(x, y, target="trn2")
    np.testing.assert_allclose(instance.compile("numpy").run({"lhsT": x, "rhs": y}), matmul(x, y), rtol=1e-4,
                               atol=1e-3)  # fmt: skip
    concrete = nki.trace(current_api.matmul_tiled, nki.spec(x.shape, "float32"), nki.spec(y.shape, "float32"),
                         target="trn2")  # fmt: skip
    assert instance.text == concrete.text  # the instance is the concrete trace of that shape


def test_a_loop_the_body_unrolls_needs_its_trip_count():
    """matmul_hoisted indexes Python lists of tiles by its K loop, so that loop unrolls: with K symbolic the
    error names K and the loop's line; with K concrete the family traces (M and N stay symbolic)."""
    with pytest.raises(nki.InconclusiveDimensionError) as e:
        nki.trace(current_api.matmul_hoisted, LHS, RHS, target="trn2")
    assert "dimension K is symbolic (K in 128..4096 step 128)" in str(e.value) and "current_api.py:" in str(e.value)
    lhs = nki.spec((512, "M"), "float32", dims={"M": (128, 4096, 128)})
    rhs = nki.spec((512, "N"), "float32", dims={"N": (512, 8192, 512)})
    family = nki.trace(current_api.matmul_hoisted, lhs, rhs, target="trn2")
    x, y = np.ones((512, 256), np.float32), np.ones((512, 1024), np.float32)
    np.testing.assert_array_equal(family.instantiate(x, y).compile("numpy").run({"lhsT": x, "rhs": y}), x.T @ y)


@cnki.jit
def _running_sum(x):
    """Row tiles added into one accumulator tile declared outside the loop, then stored: a loop-carried value
    through a tensor, which the specialiser marks sequential (affine-dependence objects to it as affine)."""
    n, m = x.shape
    out = cnl.ndarray((128, m), dtype=x.dtype, buffer=cnl.shared_hbm)
    acc = cnl.ndarray((128, m), dtype=cnl.float32, buffer=cnl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for t in cnl.affine_range(n // 128):
        tile = cnl.ndarray((128, m), dtype=x.dtype, buffer=cnl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128:(t + 1) * 128, :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=tile, op=cnl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_the_sequential_decision_is_taken_over_the_whole_family():
    family = nki.trace(_running_sum, nki.spec(("N", 64), "float32", dims={"N": (128, 8192, 128)}), target="trn2")
    assert "sequential i0 = range(0, $_0, 1)" in family.text
    x = np.random.default_rng(5).standard_normal((640, 64)).astype(np.float32)
    out = family.instantiate(x).compile("numpy").run({"x": x})
    np.testing.assert_allclose(out, x.reshape(5, 128, 64).sum(axis=0), rtol=1e-5, atol=1e-5)
