"""Which dimensions a family's kernel is independent along (``verify/independent.py``): the proof a loader needs
to run a call above a family's range as instances over slices. Each condition of the module's docstring is broken
once by a kernel that really mixes batch elements (so running it in parts would give other numbers), and the
independent kernel's instances over slices give the whole call's numbers."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl


def batch(hi=8):
    return nki.spec(("B", 128, 64), "float32", dims={"B": (1, hi)})


I_P, I_F = nl.arange(128)[:, None], nl.arange(64)[None, :]


@nki.jit
def _per_element(x, w):
    """out[b] = x[b] * w (+ 1 from a tile made before the loop): every batch element on its own."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    one = nl.full((128, 64), 1.0, dtype=nl.float32)
    for b in nl.affine_range(x.shape[0]):
        tile = nl.multiply(nl.load(x[b, I_P, I_F]), nl.load(w[I_P, I_F]))
        nl.store(out[b, I_P, I_F], value=nl.add(tile, one))
    return out


def test_a_kernel_over_its_batch_is_independent_along_it_and_runs_in_parts():
    family = nki.trace(_per_element, batch(), nki.spec((128, 64), "float32"))
    proved, refused = family.independence
    assert proved["B"].params == (0, None) and proved["B"].outputs == (0,) and refused == {}
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 128, 64)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32)

    def run(part):
        return family.instantiate(part, w).compile("numpy").run({"x": part, "w": w})

    whole = run(x)
    np.testing.assert_array_equal(np.concatenate([run(x[0:2]), run(x[2:4]), run(x[4:5])]), whole)
    np.testing.assert_allclose(whole, x * w + 1, rtol=1e-6)


@nki.jit
def _running_sum(x):
    """out[b] = x[0] + ... + x[b]: state carried from one element to the next in a sequential loop."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32)
    acc[I_P, I_F] = nl.zeros((128, 64), dtype=nl.float32)
    for b in nl.sequential_range(x.shape[0]):
        acc[I_P, I_F] = nl.add(acc[I_P, I_F], nl.load(x[b, I_P, I_F]))
        nl.store(out[b, I_P, I_F], value=acc[I_P, I_F])
    return out


@nki.jit
def _plus_first(x):
    """out[b] = x[b] + x[0]: every element reads the first."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b, I_P, I_F], value=nl.add(nl.load(x[b, I_P, I_F]), nl.load(x[0, I_P, I_F])))
    return out


@nki.jit
def _reversed(x):
    """out[b] = x[B - 1 - b]: the index uses the dimension itself."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for b in nl.affine_range(n):
        nl.store(out[b, I_P, I_F], value=nl.load(x[n - 1 - b, I_P, I_F]))
    return out


@nki.jit
def _total(x):
    """One output, the sum over the batch: accumulated into a tile made outside the loop."""
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32)
    acc[I_P, I_F] = nl.zeros((128, 64), dtype=nl.float32)
    for b in nl.affine_range(x.shape[0]):
        acc[I_P, I_F] += nl.load(x[b, I_P, I_F])
    nl.store(out[I_P, I_F], value=acc[I_P, I_F])
    return out


@nki.jit
def _copy_and_total(x):
    """Each element copied, and the sum over the batch accumulated beside it into a tile made outside the loop (and
    stored into a batch-wide output element by element: what an instance over a slice gets is its slice's sum)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    total = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32)
    acc[I_P, I_F] = nl.zeros((128, 64), dtype=nl.float32)
    for b in nl.affine_range(x.shape[0]):
        tile = nl.load(x[b, I_P, I_F])
        acc[I_P, I_F] += tile
        nl.store(out[b, I_P, I_F], value=tile)
    for b in nl.affine_range(x.shape[0]):
        nl.store(total[b, I_P, I_F], value=acc[I_P, I_F])
    return out, total


@nki.jit
def _first_elements_only(x):
    """Only the first three elements are copied: a mask on the batch loop's index."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b, I_P, I_F], value=nl.load(x[b, I_P, I_F]), mask=(b + 0 * I_P < 3))
    return out


@nki.jit
def _pairs(x):
    """Elements in pairs (a loop over ceil(B / 2)), the first of each copied: independent in blocks of 2
    (``test_independent_blocks.py`` has the kernels that mix blocks)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for p in nl.affine_range((n + 1) // 2):
        nl.store(out[2 * p, I_P, I_F], value=nl.load(x[2 * p, I_P, I_F]), mask=(2 * p + 0 * I_P < n))
    return out


@pytest.mark.parametrize("kernel, why", [
    (_running_sum, "is not an affine_range(0, B, 1)"),
    (_plus_first, "along B at 0, not at the index of the loop over B"),
    (_reversed, "uses B"),
    (_total, "output %0 has no dimension B"),
    (_copy_and_total, "defined outside the loop"),
    (_first_elements_only, "depends on B"),
])  # fmt: skip
def test_a_kernel_that_mixes_batch_elements_is_not_independent_along_them(kernel, why):
    family = nki.trace(kernel, batch())
    proved, refused = family.independence
    assert "B" not in proved
    assert why in refused["B"]


def test_a_kernel_over_pairs_of_elements_is_independent_in_blocks_of_two():
    proved, refused = nki.trace(_pairs, batch()).independence
    assert proved["B"].block == 2 and refused == {}
