"""Shape families over multiples (``nki.spec(..., dims={"M": (128, 65536, 128)})``, ``M = "128..65536 step 128"`` in
a manifest): a launcher's divisibility check is decided for the whole family, ``M // 128`` is exact, and a
dimension the ranges fix to one value is that value (a family split at a kernel's decision points traces the
decisions as a concrete trace would)."""

import math

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl


def _dims(**dims):
    return nki.symbolic_shapes(*(nki.spec((n, 512), "float32", dims={n: r}) for n, r in dims.items()))


def test_divisibility_by_the_step_and_its_factors_is_decided():
    ((m, _),) = _dims(M=(128, 65536, 128))
    assert not m % 128 and not m % 64 and (m // 128) * 128 == m  # decided: every M is a multiple
    with pytest.raises(nki.InconclusiveDimensionError, match=r"M in 128\.\.65536 step 128"):
        bool(m % 256)  # 256 divides some multiples of 128 and not others
    ((n, _),) = _dims(N=(1, 65536))
    with pytest.raises(nki.InconclusiveDimensionError):
        bool(n % 128)


def test_a_dimension_the_ranges_fix_is_concrete():
    ((m, _),) = _dims(M=(1, 128))
    tiles = math.ceil(m / 128)
    assert int(tiles) == 1 and list(range(tiles)) == [0] and min(3, tiles) == 1
    with pytest.raises(nki.InconclusiveDimensionError, match="needs a concrete value"):
        int(m)


@nki.jit
def _per_tile(x):
    """A launcher-style check, then one tile per iteration, unmasked: fine only for whole tiles."""
    rows, cols = x.shape
    if rows % 128:
        raise ValueError("whole tiles only")
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(cols)[None, :]
    for t in nl.affine_range(rows // 128):
        nl.store(out[t * 128 + i_p, i_f], value=nl.exp(nl.load(x[t * 128 + i_p, i_f])))
    return out


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_a_stepped_family_runs_an_instance(backend):
    family = nki.trace(_per_tile, nki.spec(("M", 256), "float32", dims={"M": (128, 8192, 128)}))
    assert "range(0, $_0, 1)" in family.text  # the loop stays symbolic
    x = np.random.default_rng(0).standard_normal((640, 256)).astype(np.float32)
    out = family.instantiate(x).compile(backend).run({"x": x})
    np.testing.assert_allclose(np.asarray(out), np.exp(x), rtol=1e-6)
    with pytest.raises(nki.NkiShapeFamilyError, match="not a multiple of 128"):
        family.instantiate((600, 256))


@pytest.mark.parametrize("bounds, message", [
    ((128, 4096, 0), "the step 0 must be positive"), ((100, 4096, 128), "divide lo = 100"),
    ((128, 4000, 128), "hi = 4000"), ((1, 2, 3, 4), "must be (lo, hi) or (lo, hi, step)"),
])  # fmt: skip
def test_a_bad_step_is_refused_by_spec(bounds, message):
    with pytest.raises(nki.NkiApiError) as e:
        nki.spec(("M", 512), "float32", dims={"M": bounds})
    assert message in str(e.value)


@nki.jit
def _flatten(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    flat = x.reshape((x.shape[0] * 2, 128))  # 2N rows: the count holds, but N is no longer a dimension of its own
    nl.store(out[nl.arange(128)[:, None], nl.arange(256)[None, :]], value=nl.load(flat[nl.arange(128)[:, None],
                                                                                       nl.arange(128)[None, :]]))
    return out


def test_a_reshape_must_keep_each_symbolic_dimension():
    with pytest.raises(nki.InconclusiveDimensionError) as e:
        nki.trace(_flatten, nki.spec(("N", 256), "float32", dims={"N": (128, 4096)}))
    assert "keeps every symbolic dimension as a dimension of its own" in str(e.value)
