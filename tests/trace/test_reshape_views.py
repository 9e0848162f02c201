"""``trace/reshape.py`` against NumPy: over random tensors, slices (with steps), permutations and target shapes,
a reshaped view addresses exactly the elements, in the order, NumPy's ``view.reshape(shape)`` holds, and it is
refused exactly when NumPy cannot reshape the view without a copy (with every view axis on one storage axis: a
flat storage, as the current API's on-chip ``[P, free]`` tensors and an HBM view's flat fallback have)."""

import numpy as np
import pytest

from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Tensor
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.trace.reshape import NotContiguous, reshaped

CASES = 300


def _factorisations(n: int, rank: int) -> list[tuple[int, ...]]:
    """Shapes of ``rank`` axes whose sizes multiply to ``n``."""
    if rank == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in _factorisations(n // d, rank - 1)]


def _case(k: int):
    """Case ``k``: (storage size, a NumPy view of the storage's element numbers, a shape of its size)."""
    RNG = np.random.default_rng(k)  # noqa: N806 - one generator per case, so each case is reproducible alone
    rank = int(RNG.integers(2, 5))
    dims = tuple(int(s) for s in RNG.integers(2, 6, size=rank))
    storage = int(np.prod(dims)) + int(RNG.integers(0, 3))  # a flat storage, maybe with elements after
    start = int(RNG.integers(0, storage - int(np.prod(dims)) + 1))
    base = np.arange(storage)[start:start + int(np.prod(dims))].reshape(dims)
    key = []
    for s in dims:  # a slice of each axis, sometimes with a step
        lo = 0 if RNG.random() < 0.6 else int(RNG.integers(0, s))  # mostly whole axes: merges stay possible
        step = 2 if RNG.random() < 0.2 else 1
        key.append(slice(lo, s, step))
    view = base[tuple(key)]
    if k % 3 == 0 and view.ndim > 1:
        view = view.transpose(RNG.permutation(view.ndim))
    total = view.size
    shapes = _factorisations(total, int(RNG.integers(1, view.ndim + 1)))  # mostly fewer axes: merges
    return storage, view, shapes[int(RNG.integers(0, len(shapes)))]


def _access(storage: int, view: np.ndarray) -> Access:
    """The IR access of NumPy ``view`` into a flat ``[storage]`` HBM tensor of its element numbers."""
    flat = Affine((), int(view.flat[0]) if view.size else 0)
    for k, stride in enumerate(view.strides):
        flat = flat + Affine.var(f"d{k}", stride // view.itemsize)
    tensor = Tensor("t", TensorType((storage,), "int64", Buffer.HBM), "param")
    return Access(tensor, (flat,), tuple(view.shape))


def _elements(a: Access) -> np.ndarray:
    grids = np.indices(a.shape).reshape(len(a.shape), -1)
    (e,) = a.index
    return np.array([e.evaluate({f"d{k}": int(g[k]) for k in range(len(a.shape))}) for g in grids.T])


def _numpy_no_copy(view: np.ndarray, shape) -> bool:
    v = view.view()
    try:
        v.shape = shape  # NumPy raises when the reshape would need a copy
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize("k", range(0, CASES, 30))
def test_reshaped_views_are_numpys_no_copy_reshapes(k):
    for j in range(k, k + 30):
        storage, view, shape = _case(j)
        if view.size == 0:
            continue
        access = _access(storage, view)
        try:
            got = reshaped(access, shape, keep_partition=False)
        except NotContiguous:
            assert not _numpy_no_copy(view, shape), (view.shape, view.strides, shape)
            continue
        assert _numpy_no_copy(view, shape), (view.shape, view.strides, shape)
        np.testing.assert_array_equal(_elements(got), view.reshape(shape).ravel())


def test_the_cases_cover_merges_and_refusals():
    outcomes = {"merge": 0, "refused": 0}
    for j in range(CASES):
        storage, view, shape = _case(j)
        try:
            reshaped(_access(storage, view), shape, keep_partition=False)
        except NotContiguous:
            outcomes["refused"] += 1
            continue
        outcomes["merge"] += len(shape) < sum(s != 1 for s in view.shape)
    assert outcomes["merge"] >= 30 and outcomes["refused"] >= 30, outcomes
