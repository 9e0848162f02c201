import nki
import numpy as np
import pytest
from conftest import DTYPES, as64
from cross_entropy import cross_entropy_loss


def reference(logits, labels):
    x = as64(logits)
    m = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(axis=1, keepdims=True)) + m
    return lse - np.take_along_axis(x, labels.astype(np.int64), axis=1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("T,V,chunk", [(128, 1000, 512), (256, 512, 512), (128, 700, 256)])
def test_cross_entropy_written_in_place(rng, dtype, T, V, chunk):
    logits = (rng.standard_normal((T, V)) * 3).astype(DTYPES[dtype])
    labels = rng.integers(0, V, (T, 1)).astype(np.int32)
    labels[0, 0], labels[1, 0] = 0, V - 1  # first and last column
    loss = np.zeros((T, 1), np.float32)
    result = nki.simulate(cross_entropy_loss)(logits, labels, loss, chunk=chunk)
    assert result is None
    np.testing.assert_allclose(loss, reference(logits, labels), rtol=1e-5, atol=1e-5)
