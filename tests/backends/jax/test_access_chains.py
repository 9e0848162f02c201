"""``backends/jax/access.py`` against NumPy fancy indexing, on random accesses: each tensor dimension indexed by a
random chain of access axes (random extents, order and stride, extent-1 axes among them) at a constant plus a loop
index's multiple, sometimes with one coefficient put off the chain (then the access is not a box and goes through
a gather / scatter, which must be just as right). Reads and writes, masked and unmasked, with the loop index a
Python int (static starts) or traced under ``jax.jit`` (dynamic starts), bit for bit."""

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nki_dsl.backends.jax import access as acc
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Tensor
from nki_dsl.ir.types import Buffer, TensorType

LOOP_MAX = 2  # the loop index ranges over 0 .. LOOP_MAX


@st.composite
def accesses(draw):
    """(access, its index as (per dimension: const, loop coefficient, {axis: coefficient}))."""
    extents = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    n_dims = draw(st.integers(1, 3))
    owner = [draw(st.integers(0, n_dims - 1)) for _ in extents]
    order = draw(st.permutations(range(len(extents))))  # outer to inner within each dimension
    index, parts, tshape = [], [], []
    for k in range(n_dims):
        chain = [a for a in order if owner[a] == k]
        coefs, c = {}, draw(st.integers(1, 3))
        for a in reversed(chain):
            coefs[a] = c
            c *= extents[a]
        if chain and draw(st.integers(0, 3)) == 0:  # off the chain: overlapping, gapped or reversed
            a = chain[0]
            coefs[a] = draw(st.sampled_from([coefs[a] - 1, coefs[a] + 1, -coefs[a]]))
        loop = draw(st.integers(0, 2))
        low = sum(min(c, 0) * (extents[a] - 1) for a, c in coefs.items())
        const = draw(st.integers(0, 3)) - low
        high = const + loop * LOOP_MAX + sum(max(c, 0) * (extents[a] - 1) for a, c in coefs.items())
        tshape.append(high + 1 + draw(st.integers(0, 2)))
        e = Affine((), const) + Affine.var("i0", loop) if loop else Affine((), const)
        for a, c in coefs.items():
            e = e + Affine.var(f"d{a}", c)
        index.append(e)
        parts.append((const, loop, coefs))
    tensor = Tensor("t", TensorType(tuple(tshape), "float32", Buffer.SBUF), "alloc")
    return Access(tensor, tuple(index), tuple(extents)), parts


def is_window(parts, shape) -> bool:
    """Does every dimension's axis part take each of the values 0, s, 2 s, ... s (n - 1) exactly once (n the
    product of its axes' extents, s > 0)? Then the access is a strided window of its tensor, reshaped (and a
    slice is exact). Decided by enumeration, independently of how ``access`` decides it."""
    for _, _, coefs in parts:
        used = [(a, c) for a, c in coefs.items() if c]
        values = sorted(sum(c * x for (_, c), x in zip(used, xs))
                        for xs in itertools.product(*(range(shape[a]) for a, _ in used)))  # fmt: skip
        n = len(values)
        s = values[1] - values[0] if n > 1 else 1
        if s <= 0 or values != [s * j for j in range(n)]:
            return False
    return True


def numpy_index(parts, shape, i0):
    grids = np.indices(shape)
    return tuple(const + loop * i0 + sum(c * grids[a] for a, c in coefs.items()) + 0 * grids[0]
                 for const, loop, coefs in parts)  # fmt: skip


CASE = dict(case=accesses(), i0=st.integers(0, LOOP_MAX), traced=st.booleans(), masked=st.booleans(),
            seed=st.integers(0, 9))


@settings(max_examples=6, deadline=None, derandomize=True)
@given(**CASE)
def test_reads_and_writes_of_random_chains_match_numpy_indexing(case, i0, traced, masked, seed):
    check(case, i0, traced, masked, seed)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(**CASE)
def test_many_random_chains(case, i0, traced, masked, seed):
    check(case, i0, traced, masked, seed)


def check(case, i0, traced, masked, seed):
    access, parts = case
    p = acc.plan(access, {"i0": (0, LOOP_MAX)})
    assert p.box == is_window(parts, access.shape)  # every chain (and only a chain) is a window, not a gather
    rng = np.random.default_rng(seed)
    tshape, shape = access.tensor.type.shape, access.shape
    array = rng.standard_normal(tshape).astype(np.float32)
    idx = numpy_index(parts, shape, i0)

    def run(fn, *args):  # under jit either way (one XLA compilation, not one per eager op)
        if traced:
            return np.asarray(jax.jit(lambda i, *a: fn({"i0": i}, *a))(np.int32(i0), *args))
        return np.asarray(jax.jit(lambda *a: fn({"i0": i0}, *a))(*args))

    got = run(lambda iv, a: acc.read(a, p, iv), array)
    np.testing.assert_array_equal(got, array[idx])

    linear = np.ravel_multi_index(idx, tshape).ravel()
    if len(np.unique(linear)) != linear.size:
        return  # a write of one element twice: the verifier's rule, not this module's
    value = rng.standard_normal(shape).astype(np.float32)
    mask = rng.random(shape) < 0.6 if masked else np.ones(shape, bool)
    want = array.copy()
    want[tuple(i[mask] for i in idx)] = value[mask]
    got = run(lambda iv, a, v, m: acc.write(a, p, v, iv, mask=m if masked else None), array, value, mask)
    np.testing.assert_array_equal(got, want)
