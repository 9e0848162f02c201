"""The trip counts the simulator prices a runtime loop with (``stream.runtime_trips``): those the NumPy run
recorded, entry by entry, and a clear error, naming the loop, for an entry that run never reached."""

import pytest

from nki_dsl.backends.simulator.stream import runtime_trips
from nki_dsl.errors import NkiError
from tests.current_api.test_runtime_loops import X, reg, runtime_loops, scale_prefix


def _loops():
    return runtime_loops(scale_prefix, X, reg(3))


def test_each_entry_takes_the_next_recorded_count():
    trips = runtime_trips(_loops(), {(0, ()): [3, 1]})
    assert [trips(0, ()), trips(0, ())] == [3, 1]


@pytest.mark.parametrize("recorded", [{}, {(0, ()): [2]}, {(0, (1,)): [2]}])
def test_an_entry_the_numpy_run_did_not_reach_is_an_nki_error_naming_the_loop(recorded):
    (loop,) = _loops()
    trips = runtime_trips([loop], recorded)
    if recorded.get((0, ())):
        trips(0, ())  # the one recorded entry
    with pytest.raises(NkiError, match=f"no recorded trip count for this entry of loop {loop.var} "):
        trips(0, ())


def test_a_timing_only_run_takes_the_declared_bound():
    (loop,) = _loops()
    assert runtime_trips([loop], None)(0, ()) == loop.trip_count
