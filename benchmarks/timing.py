"""The median time of a call over repeated runs, on a chosen clock: what the benchmarks print (never assert)."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat: int, clock=time.perf_counter, warm: bool = False) -> float:
    """The median seconds of ``repeat`` calls of ``fn`` on ``clock`` (``time.process_time``: CPU time, steadier than
    wall time on a shared machine); ``warm``: one call first, untimed (instantiation, verification, code
    generation)."""
    if warm:
        fn()
    times = []
    for _ in range(repeat):
        t = clock()
        fn()
        times.append(clock() - t)
    return statistics.median(times)
