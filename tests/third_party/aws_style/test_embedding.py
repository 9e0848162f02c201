import nki
import numpy as np
import pytest
from conftest import DTYPES, TOLERANCE, as64
from embedding import embed, embed_legacy
from neuronxcc import nki as legacy_nki


def reference(ids, table, pos, scale):
    return as64(table)[ids[:, 0]] * scale + as64(pos)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("T,V,H", [(128, 1000, 64), (300, 50, 32)])
def test_embed(rng, dtype, T, V, H):
    dt = DTYPES[dtype]
    ids = rng.integers(0, V, (T, 1)).astype(np.int32)
    table = rng.standard_normal((V, H)).astype(dt)
    pos = rng.standard_normal((T, H)).astype(dt)
    out = nki.simulate(embed)(ids, table, pos, scale=2.0)
    np.testing.assert_allclose(as64(out), reference(ids, table, pos, 2.0), **TOLERANCE[dtype])


@pytest.mark.parametrize("T,V,H", [(128, 1000, 64), (300, 50, 32)])
def test_embed_legacy_twin_gives_the_same_numbers(rng, T, V, H):
    ids = rng.integers(0, V, (T, 1)).astype(np.int32)
    table = rng.standard_normal((V, H)).astype(np.float32)
    pos = rng.standard_normal((T, H)).astype(np.float32)
    new = nki.simulate(embed)(ids, table, pos, scale=0.5)
    old = legacy_nki.simulate_kernel(embed_legacy, ids, table, pos, scale=0.5)
    np.testing.assert_allclose(old, reference(ids, table, pos, 0.5), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(new, old)


def test_embed_out_of_range_id_is_an_error(rng):
    ids = np.zeros((128, 1), np.int32)
    ids[77] = 1000  # one past the table
    table = rng.standard_normal((1000, 16)).astype(np.float32)
    pos = np.zeros((128, 16), np.float32)
    with pytest.raises(Exception, match="1000"):
        nki.simulate(embed)(ids, table, pos)
