"""The verifier's integer-point search (``verify/integer_sets.py``) at the edge of its node budget: running out
of nodes answers "may have a point", the conservative answer for every rule that asks."""

from nki_dsl.verify.integer_sets import has_point

# x + y == 1 and x == y over x, y in [0, 1]: no integer point (x = y = 1/2), and bound propagation narrows neither
# range, so proving it takes one split of one variable: one node of the budget.
NO_POINT = [({"x": 1, "y": 1}, -1, True), ({"x": 1, "y": -1}, 0, True)]
BOX = {"x": (0, 1), "y": (0, 1)}


def test_a_search_with_the_nodes_it_needs_proves_there_is_no_point():
    assert not has_point(NO_POINT, BOX)
    assert not has_point(NO_POINT, BOX, max_nodes=2)


def test_a_search_out_of_nodes_before_its_first_split_answers_that_a_point_may_exist():
    assert has_point(NO_POINT, BOX, max_nodes=1)


def test_a_single_point_box_needs_no_node_at_all():
    assert not has_point(NO_POINT, {"x": (0, 0), "y": (1, 1)}, max_nodes=0)
    assert has_point([({"x": 1, "y": 1}, -1, True)], {"x": (0, 0), "y": (1, 1)}, max_nodes=0)


def test_an_equality_is_solved_exactly_past_the_integers_a_float_holds():
    # 3x == 3 * 2**55 + 3 holds at x = 2**55 + 1 only, which no float holds (2**55 + 1 rounds to 2**55): bounds
    # narrowed through float division would leave x no value and answer "no point" for a point that exists.
    x = 2**55 + 1
    assert has_point([({"x": 3}, -3 * x, True)], {"x": (0, 2**60)})
    assert not has_point([({"x": 3}, -3 * x, True)], {"x": (0, x - 1)})
