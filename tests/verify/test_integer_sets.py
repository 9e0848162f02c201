"""The verifier's integer-point search (``verify/integer_sets.py``) at the edge of its node budget: running out
of nodes answers "may have a point", the conservative answer for every rule that asks."""

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from nki_dsl.verify.integer_sets import Work, has_point

# 3x - 3y - 2z + 1 == 0 over x, y, z in [0, 1]: no integer point (3x - 3y + 1 is -2, 1 or 4, 2z is 0 or 2; a
# rational one is x = y = 0, z = 1/2), no coefficient is a unit (nothing to substitute) and bound propagation
# narrows no range, so proving it takes one split of one variable: one node of the budget.
NO_POINT = [({"x": 3, "y": -3, "z": -2}, 1, True)]
BOX = {"x": (0, 1), "y": (0, 1), "z": (0, 1)}


def test_a_search_with_the_nodes_it_needs_proves_there_is_no_point():
    assert not has_point(NO_POINT, BOX)
    assert not has_point(NO_POINT, BOX, max_nodes=2)


def test_a_search_out_of_nodes_before_its_first_split_answers_that_a_point_may_exist():
    assert has_point(NO_POINT, BOX, max_nodes=1)


def test_a_single_point_box_needs_no_node_at_all():
    assert not has_point(NO_POINT, {"x": (1, 1), "y": (0, 0), "z": (1, 1)}, max_nodes=0)
    assert has_point([({"x": 3, "y": -3, "z": -2}, 1, False)], {"x": (1, 1), "y": (0, 0), "z": (1, 1)}, max_nodes=0)


def test_equalities_with_a_unit_coefficient_are_substituted_before_any_node():
    # x + y == 1 and x == y over x, y in [0, 1] narrow no range, but x = 1 - y leaves 1 - 2y == 0: no integer y
    assert not has_point([({"x": 1, "y": 1}, -1, True), ({"x": 1, "y": -1}, 0, True)], {"x": (0, 1), "y": (0, 1)},
                         max_nodes=0)  # fmt: skip


def test_an_equality_is_solved_exactly_past_the_integers_a_float_holds():
    # 3x == 3 * 2**55 + 3 holds at x = 2**55 + 1 only, which no float holds (2**55 + 1 rounds to 2**55): bounds
    # narrowed through float division would leave x no value and answer "no point" for a point that exists.
    x = 2**55 + 1
    assert has_point([({"x": 3}, -3 * x, True)], {"x": (0, 2**60)})
    assert not has_point([({"x": 3}, -3 * x, True)], {"x": (0, x - 1)})


def test_an_equality_whose_open_terms_share_a_factor_the_rest_lacks_has_no_point():
    # 2x - 2y + 3z == 0 with z in [1, 1]: the coefficients' gcd is 1 (nothing to divide out beforehand), but once z is
    # fixed the open terms 2x - 2y are even and -3 is not. Propagation narrows neither x nor y over [0, 10**6], so
    # only the divisibility test of the open terms answers "no" before any node (with z in [0, 2], z = 0 or 2 hold).
    eq = [({"x": 2, "y": -2, "z": 3}, 0, True)]
    assert not has_point(eq, {"x": (0, 10**6), "y": (0, 10**6), "z": (1, 1)}, max_nodes=0)
    assert has_point(eq, {"x": (0, 10**6), "y": (0, 10**6), "z": (0, 2)})


def test_a_system_bound_propagation_refutes_costs_only_its_propagation_steps():
    # x + y >= 250 over x, y in [0, 100] cannot hold: one propagation pass over the four constraints says so. The
    # elimination that asks for a rational point (many times the steps) is only for systems propagation crawls on;
    # asking it first would spend a shared proof budget (a family's) on what the cheap pass answers.
    cons = [({"x": 1, "y": 1}, -250, False), ({"x": 1, "y": -1}, 0, False), ({"x": -1, "y": 1}, 3, False),
            ({"x": 2, "y": 3}, -7, False)]  # fmt: skip
    work = Work(len(cons) * 2)
    assert not has_point(cons, {"x": (0, 100), "y": (0, 100)}, work=work)
    assert work.left >= 0


def _points(constraints, box):
    names = sorted(box)
    for p in product(*(range(box[v][0], box[v][1] + 1) for v in names)):
        at = dict(zip(names, p))
        values = [(sum(c * at[v] for v, c in coefs.items()) + const, eq) for coefs, const, eq in constraints]
        if all(x == 0 if eq else x >= 0 for x, eq in values):
            yield at


_row = st.tuples(st.dictionaries(st.sampled_from("xyz"), st.integers(-3, 3), min_size=1), st.integers(-6, 6),
                 st.booleans())  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.lists(_row, max_size=4), st.dictionaries(st.sampled_from("xyz"), st.tuples(st.integers(-2, 2),
                                                                                    st.integers(0, 3))),
       st.integers(0, 2))  # fmt: skip
def test_the_answer_is_the_brute_force_one(constraints, spans, mirrored):
    # Substitution, folding and elimination rewrite the system: each must keep its integer points. With the nodes
    # to settle a box this small, the answer is exact both ways (a wrong "no" would prove a false family). The
    # first rows also come with their opposites (e >= 0 and -e - slack >= 0: an equality at slack 0, as a derived
    # symbol's definition is), which random rows seldom are.
    box = {v: (spans.get(v, (0, 1))[0], spans.get(v, (0, 1))[0] + spans.get(v, (0, 1))[1]) for v in "xyz"}
    for k, (coefs, const, _) in enumerate(constraints[:mirrored]):
        constraints.append(({v: -c for v, c in coefs.items()}, -const - k, False))
    assert has_point(constraints, box) == any(True for _ in _points(constraints, box))
