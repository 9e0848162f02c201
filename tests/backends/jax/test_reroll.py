"""Loop re-rolling (``nki_dsl/backends/jax/reroll.py``): runs of isomorphic op chains that a kernel unrolls in
Python become one ``lax.fori_loop`` whose body is traced once, with per-iteration offsets from a table. Each
kernel here is checked bit for bit against the unrolled lowering (re-rolling switched off) and against the NumPy
reference; the jaxpr says what was re-rolled (a loop body holds each op once: one ``exp`` per re-rolled run)."""

import jax
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.jax import batching, reroll
from tests.backends.jax.ring_kernels import grad_of_weighted_sum, on_and_off, under_vmap
from tests.backends.jax.ring_kernels import ring_tiles as _ring_tiles
from tests.backends.jax.ring_kernels import running_sum as _running_sum

P = 128


@pytest.fixture(autouse=True)
def _no_batching(monkeypatch):
    monkeypatch.setattr(batching, "ENABLED", False)  # (batching would take these runs first: see test_batching)


@pytest.fixture
def short_runs(monkeypatch):
    """Re-roll runs from 2 units on (the default threshold, MIN_TRIPS, keeps short runs unrolled), so that
    small kernels exercise the mechanism."""
    monkeypatch.setattr(reroll, "MIN_TRIPS", 2)


def _fresh(kernel):
    return nki.jit(kernel.fn)  # new trace and executable caches


def _run(kernel, *args, enabled=True, monkeypatch=None):
    monkeypatch.setattr(reroll, "ENABLED", enabled)
    k = _fresh(kernel)
    return np.asarray(k(*args, backend="jax")), nki.emit(k, *args, backend="jax")


def _exps(jaxpr_text: str) -> int:
    return jaxpr_text.count(" exp ")


def _loops(jaxpr_text: str) -> bool:
    return "scan" in jaxpr_text or "while" in jaxpr_text  # (a fori_loop of static trip count is a scan)


def _check(kernel, args, monkeypatch, exps_rolled, exps_unrolled):
    rolled, text = _run(kernel, *args, monkeypatch=monkeypatch)
    unrolled, plain = _run(kernel, *args, enabled=False, monkeypatch=monkeypatch)
    np.testing.assert_array_equal(rolled, unrolled)  # the same ops in the same order: the same bits
    ref = np.asarray(_fresh(kernel)(*args))
    np.testing.assert_allclose(rolled, ref, rtol=2e-6, atol=1e-6)  # XLA's exp: ulps from NumPy's
    assert (_exps(text), _exps(plain)) == (exps_rolled, exps_unrolled)
    assert _loops(text) and not _loops(plain)
    return rolled



def test_unrolled_tiles_with_ring_slots_run_as_one_loop(short_runs, monkeypatch):
    x = np.random.default_rng(0).standard_normal((4 * P, 8)).astype(np.float32)
    _check(_ring_tiles, (x,), monkeypatch, exps_rolled=1, exps_unrolled=4)


def test_runs_shorter_than_the_threshold_stay_unrolled(monkeypatch):
    x = np.random.default_rng(1).standard_normal((4 * P, 8)).astype(np.float32)
    assert reroll.MIN_TRIPS > 4
    _, text = _run(_ring_tiles, x, monkeypatch=monkeypatch)
    assert _exps(text) == 4 and not _loops(text)


@nki.jit
def _pipelined(x):
    """Unit t writes slot t % 2 and stores what unit t - 1 wrote into slot (t - 1) % 2: every unit reads the
    previous one's write (the first unit has no store: it is not part of the run)."""
    rows, cols = x.shape
    n = rows // P
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ring = nl.ndarray((2, nl.par_dim(P), cols), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    for t in range(n + 1):
        if t < n:
            ring[t % 2, i_p, i_f] = nl.exp(nl.load(x[t * P + i_p, i_f]))
        if t > 0:
            nl.store(out[(t - 1) * P + i_p, i_f], value=nl.multiply(ring[(t - 1) % 2, i_p, i_f], 2.0))
    return out


def test_chains_that_read_the_previous_chains_writes_keep_their_order(short_runs, monkeypatch):
    x = np.random.default_rng(2).standard_normal((5 * P, 8)).astype(np.float32)
    got = _check(_pipelined, (x,), monkeypatch, exps_rolled=2, exps_unrolled=5)
    np.testing.assert_allclose(got, 2 * np.exp(x), rtol=2e-6)



@pytest.mark.slow  # (the default run has one kernel of each kind above)
def test_a_tile_every_unit_updates_is_carried_from_unit_to_unit(short_runs, monkeypatch):
    x = np.random.default_rng(3).standard_normal((5 * P, 8)).astype(np.float32)
    got = _check(_running_sum, (x,), monkeypatch, exps_rolled=2, exps_unrolled=5)
    np.testing.assert_allclose(got, np.cumsum(np.exp(x).reshape(5, P, 8), axis=0).reshape(5 * P, 8), rtol=1e-5)


@nki.jit
def _odd_one_out(x, which: int = 3, ragged: bool = False):
    """Like ``_ring_tiles`` but tile ``which`` rounds its exp to bfloat16 (or, ``ragged``, the last tile is
    64 rows): that unit looks like the others except for one dtype (one shape) and must not join their loop."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ring = nl.ndarray((3, nl.par_dim(P), cols), dtype=nl.float32, buffer=nl.sbuf)
    i_f = nl.arange(cols)[None, :]
    for t in range((rows + P - 1) // P):
        size = min(P, rows - t * P) if ragged else P
        i_p = nl.arange(size)[:, None]
        dtype = nl.bfloat16 if t == which and not ragged else nl.float32
        ring[t % 3, i_p, i_f] = nl.exp(nl.load(x[t * P + i_p, i_f]), dtype=dtype)
        nl.store(out[t * P + i_p, i_f], value=nl.multiply(ring[t % 3, i_p, i_f], 0.5))
    return out


def test_a_unit_with_another_dtype_is_not_merged(short_runs, monkeypatch):
    x = np.random.default_rng(4).standard_normal((7 * P, 8)).astype(np.float32)
    # units 0-2 and 4-6 are two loops, unit 3 (bfloat16) stays unrolled between them
    got = _check(_odd_one_out, (x,), monkeypatch, exps_rolled=3, exps_unrolled=7)
    np.testing.assert_array_equal(got[3 * P:4 * P], (np.asarray(jax.numpy.asarray(np.exp(x[3 * P:4 * P]),
                                                     jax.numpy.bfloat16), np.float32) * 0.5))  # fmt: skip


@pytest.mark.slow  # (the default run has one kernel of each kind above)
def test_a_unit_with_another_shape_is_not_merged(short_runs, monkeypatch):
    x = np.random.default_rng(5).standard_normal((5 * P + 64, 8)).astype(np.float32)
    _check(_odd_one_out, (x, 99, True), monkeypatch, exps_rolled=2, exps_unrolled=6)


@nki.jit
def _shared_tile(x):
    """Every unit reads a tile the first unit made: a tile defined in one unit and used in another, so the run
    may not start at unit 0 (its tile would be local to the loop body)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    first = None
    for t in range(rows // P):
        e = nl.exp(nl.load(x[t * P + i_p, i_f]))
        first = e if first is None else first
        nl.store(out[t * P + i_p, i_f], value=nl.add(e, first))
    return out


@pytest.mark.slow  # (the default run has one kernel of each kind above)
def test_a_tile_used_by_later_units_stays_outside_the_loop(short_runs, monkeypatch):
    x = np.random.default_rng(6).standard_normal((5 * P, 8)).astype(np.float32)
    got = _check(_shared_tile, (x,), monkeypatch, exps_rolled=2, exps_unrolled=5)
    np.testing.assert_allclose(got, np.exp(x) + np.tile(np.exp(x[:P]), (5, 1)), rtol=2e-6)


@pytest.mark.slow
def test_gradients_through_a_rerolled_kernel_are_the_unrolled_ones(short_runs, monkeypatch):
    x = np.random.default_rng(7).standard_normal((4 * P, 8)).astype(np.float32)
    grads = on_and_off(reroll, monkeypatch, _ring_tiles, lambda k: grad_of_weighted_sum(k, x))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_a_rerolled_kernel_under_the_users_vmap(short_runs, monkeypatch):
    xs = np.random.default_rng(8).standard_normal((2, 4 * P, 8)).astype(np.float32)
    outs = on_and_off(reroll, monkeypatch, _ring_tiles, lambda k: under_vmap(k, xs))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_windows_at_traced_starts_are_related_by_their_index_expressions():
    from nki_dsl.backends.jax.forward import _relation
    from nki_dsl.ir.affine import Affine

    r, s, z = Affine.var("i7"), Affine.var("i8"), Affine()
    bounds = lambda e: [e.bounds({"i7": (0, 2), "i8": (0, 2)})]  # noqa: E731
    assert _relation((r, z), (1, 8), (r, z), (1, 8), bounds) == (0, 0)  # the same window
    assert _relation((r, z), (1, 8), (r, z + 2), (1, 4), bounds) == (0, 2)  # inside it, at a constant distance
    assert _relation((r, z), (1, 8), (r, z + 6), (1, 4), bounds) == "overlap"  # partly inside
    assert _relation((r, z), (1, 8), (r + 1, z), (1, 8), bounds) == "disjoint"  # the next slot
    assert _relation((r, z), (1, 8), (s, z), (1, 8), bounds) == "overlap"  # two slots that may meet
    assert _relation((r, z), (1, 8), (s, z), (1, 8), None) == "overlap"  # no ranges: nothing is proven


def test_ring_slots_of_one_rerolled_run_are_compared_iteration_by_iteration():
    from nki_dsl.backends.jax.analysis import KernelInfo
    from nki_dsl.backends.jax.context import State
    from nki_dsl.backends.jax.forward import _relation
    from nki_dsl.ir.affine import Affine
    from nki_dsl.ir.nodes import Kernel

    st = State(KernelInfo(Kernel("k", [], [], [])), {}, {}, {}, {})
    st.tables = {"i7": (0, 1, 2, 0), "i8": (1, 2, 0, 1), "i9": (1, 2, 0, 0)}  # n % 3, (n + 1) % 3, and a slot
    st.info.ranges.update({v: (0, 2) for v in st.tables})
    r, s, t, z = Affine.var("i7"), Affine.var("i8"), Affine.var("i9"), Affine()
    assert st.bounds(s - r) == [(1, 1), (1, 1), (-2, -2), (1, 1)]  # never 0, though between -2 and 1
    assert _relation((r, z), (1, 8), (s, z), (1, 8), st.bounds) == "disjoint"
    assert _relation((r, z), (1, 8), (t, z), (1, 8), st.bounds) == "overlap"  # they meet in the last iteration
    st.info.ranges["i0"] = (0, 3)  # a loop index with a table variable: only their ranges bound the sum
    assert st.bounds(r + Affine.var("i0")) == [(0, 5)]
