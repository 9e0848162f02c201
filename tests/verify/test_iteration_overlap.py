"""The affine-dependence rule's integer-set question, against brute-force enumeration on small boxes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nki_dsl.errors import SourceLoc
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Loop, Tensor
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.verify.iteration_overlap import Side, meet_in_different_iterations
from tests.examples import examples

LOC = SourceLoc("k.py", 1)
TENSOR = Tensor("t", TensorType((128, 4096), "float32", Buffer.SBUF), "alloc")


def _loop(var: str, start: int, stop: int, step: int = 1) -> Loop:
    return Loop("affine", var, start, stop, step, [], LOC)


def _access(*index: Affine, shape: tuple[int, ...]) -> Access:
    return Access(TENSOR, tuple(index), shape)


def test_even_and_odd_columns_never_meet():
    g = _loop("i0", 0, 64)
    w = Side(_access(Affine.of(0, i0=2), shape=(1,)), (g,))
    r = Side(_access(Affine.of(1, i0=2), shape=(1,)), (g,))
    assert not meet_in_different_iterations(g, w, r, ())


def test_a_shared_leading_index_keeps_blocks_apart_whatever_the_tiling():
    g, j, m = _loop("i0", 0, 8), _loop("i1", 0, 2), _loop("i2", 0, 4)
    w = Side(_access(Affine.var("i0"), Affine.of(i1=256) + Affine.var("d0"), shape=(256,)), (g, j))
    r = Side(_access(Affine.var("i0"), Affine.of(i2=128) + Affine.var("d0"), shape=(128,)), (g, m))
    assert not meet_in_different_iterations(g, w, r, ())
    # A loop outside g, which the index does not use, sees the same blocks in each of its iterations:
    outer = _loop("i3", 0, 2)
    w2 = Side(w.access, (outer, g, j))
    r2 = Side(r.access, (outer, g, m))
    assert meet_in_different_iterations(outer, w2, r2, ())


def test_windows_that_overlap_their_neighbours_meet():
    i = _loop("i0", 0, 4)
    window = Side(_access(Affine.of(i0=128) + Affine.var("d0"), shape=(256,)), (i,))
    assert meet_in_different_iterations(i, window, window, ())


def test_start_and_step_are_the_loops_values_not_its_iteration_numbers():
    i = _loop("i0", 3, 40, 4)  # 3, 7, 11, ...: write i, read i + 2 never hits another iteration's i
    w = Side(_access(Affine.var("i0"), shape=()), (i,))
    r = Side(_access(Affine.of(2, i0=1), shape=()), (i,))
    assert not meet_in_different_iterations(i, w, r, ())
    r4 = Side(_access(Affine.of(4, i0=1), shape=()), (i,))
    assert meet_in_different_iterations(i, w, r4, ())


def test_program_ids_are_shared_by_both_sides():
    i = _loop("i0", 0, 4)
    w = Side(_access(Affine.of(i0=1, pid0=4), shape=()), (i,))
    r = Side(_access(Affine.of(i0=1, pid0=4), shape=()), (i,))
    assert not meet_in_different_iterations(i, w, r, (8,))



@pytest.mark.parametrize(("grid", "meet"), [((), False), ((1,), False), ((2,), True), ((3, 2), True)])
def test_a_program_id_spans_its_grid_axis_and_is_0_past_the_grids_rank(grid, meet):
    # Writes at i + 4*pid and reads at i + 8*pid (i in [0, 8)) meet across iterations only in a program with
    # pid0 >= 1 (iteration i + 4 reads what iteration i wrote): one program (or no grid axis 0) has pid0 = 0 alone.
    i = _loop("i0", 0, 8)
    w = Side(_access(Affine.of(i0=1, pid0=4), shape=()), (i,))
    r = Side(_access(Affine.of(i0=1, pid0=8), shape=()), (i,))
    assert meet_in_different_iterations(i, w, r, grid) is meet

def test_an_exhausted_budget_answers_may_meet():
    i = _loop("i0", 0, 1 << 20)
    w = Side(_access(Affine.of(i0=6) + Affine.of(d0=10), shape=(1 << 12,)), (i,))
    r = Side(_access(Affine.of(1, i0=6) + Affine.of(d0=15), shape=(1 << 12,)), (i,))
    assert meet_in_different_iterations(i, w, r, (), max_nodes=1)


coef = st.integers(-3, 3)


@st.composite
def problems(draw):
    trips = [draw(st.integers(1, 3)) for _ in range(3)]
    starts = [draw(st.integers(0, 2)) for _ in range(3)]
    steps = [draw(st.integers(1, 2)) for _ in range(3)]
    loops = [_loop(f"i{k}", starts[k], starts[k] + trips[k] * steps[k], steps[k]) for k in range(3)]
    at = draw(st.integers(0, 2))  # the loop asked about; loops before it are shared, after it private

    def access():
        shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
        index = []
        for _ in range(2):
            terms = {f"i{k}": draw(coef) for k in range(3)}
            terms.update({f"d{k}": draw(coef) for k in range(len(shape))})
            index.append(Affine.of(draw(st.integers(-3, 3)), **terms))
        return _access(*index, shape=shape)

    return loops, at, access(), access()


def _points(access: Access, loops: list[Loop], env: dict[str, int]):
    axes = [range(n) for n in access.shape]
    for ds in itertools.product(*axes):
        full = dict(env, **{f"d{k}": v for k, v in enumerate(ds)})
        yield tuple(e.evaluate(full) for e in access.index)


def _brute_force(loops: list[Loop], at: int, a: Access, b: Access) -> bool:
    values = [list(range(lp.start, lp.stop, lp.step)) for lp in loops]
    for shared in itertools.product(*values[:at]):
        base = {f"i{k}": v for k, v in enumerate(shared)}
        for own_a in itertools.product(*values[at:]):
            env_a = dict(base, **{f"i{at + k}": v for k, v in enumerate(own_a)})
            pa = set(_points(a, loops, env_a))
            for own_b in itertools.product(*values[at:]):
                if own_b[0] == own_a[0]:
                    continue
                env_b = dict(base, **{f"i{at + k}": v for k, v in enumerate(own_b)})
                if pa & set(_points(b, loops, env_b)):
                    return True
    return False


@settings(max_examples=examples(300), deadline=None)
@given(problems())
def test_the_answer_is_brute_forces(problem):
    loops, at, a, b = problem
    want = _brute_force(loops, at, a, b)
    got = meet_in_different_iterations(loops[at], Side(a, tuple(loops)), Side(b, tuple(loops)), ())
    assert got == want
