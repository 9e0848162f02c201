"""Runtime loops (``ir/runtime_loops.py``) in the NumPy reference: a dynamic loop's stop and a while loop's
condition are read from the register's array when the generated code reaches them, checked against the declared
bound, and each loop's trip count is written down per entry (``TripLog``): the simulator prices the same run with
those counts (``backends/simulator/stream.py``), as it takes its outputs from this run."""

from __future__ import annotations

from nki_dsl.ir.nodes import Loop
from nki_dsl.ir.runtime_loops import bound_error


def _scalar(array) -> int:
    return int(array.reshape(-1)[0])


class TripLog:
    """Checks and records the runtime loops ``loops`` (numbered in program order) of one executable's runs.
    ``counts[(k, program ids)]``: the trip count of loop ``k`` at each of its entries in that program, in order
    (of a scalar_offset loop: the index it ran at)."""

    def __init__(self, loops: list[Loop]):
        self.loops = loops
        self.counts: dict[tuple[int, tuple[int, ...]], list[int]] = {}

    def reset(self) -> None:
        self.counts = {}

    def _record(self, k: int, pids: tuple[int, ...], trips: int) -> None:
        self.counts.setdefault((k, pids), []).append(trips)

    def stop(self, k: int, register, pids: tuple[int, ...]) -> int:
        """A dynamic loop's stop: the register's value, refused past the declared bound."""
        lp, value = self.loops[k], _scalar(register)
        if value > lp.stop:
            raise bound_error(lp.kind, lp.var, value, lp.start, lp.stop, lp.loc)
        self._record(k, pids, len(range(lp.start, value, lp.step)))
        return value

    def offset(self, k: int, register, pids: tuple[int, ...]) -> int:
        """A scalar_offset loop's one index: the register's value, refused outside the declared range."""
        lp, value = self.loops[k], _scalar(register)
        if value not in range(lp.start, lp.stop, lp.step):
            raise bound_error(lp.kind, lp.var, value, lp.start, lp.stop, lp.loc)
        self._record(k, pids, value)
        return value

    def running(self, k: int, register, iteration: int, pids: tuple[int, ...]) -> bool:
        """A while loop's condition before iteration ``iteration`` (the trip count is recorded when it ends)."""
        if _scalar(register) != 0:
            return True
        self._record(k, pids, iteration)
        return False

    def exhausted(self, k: int, register, pids: tuple[int, ...]) -> None:
        """A while loop ran its declared number of iterations: its condition must now be zero."""
        lp, value = self.loops[k], _scalar(register)
        if value != 0:
            raise bound_error(lp.kind, lp.var, value, lp.start, lp.stop, lp.loc)
        self._record(k, pids, lp.stop)
