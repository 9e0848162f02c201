"""Trace time against trip count for both API generations (issue 12: the current API's loops have Python's
semantics; nki_dsl keeps them symbolic unless the body needs the index as a Python int, nki_dsl/current/
specialize.py).

    python benchmarks/current_api_trace.py

For K = 128 x trip count, the tiled matmul (every loop independent of Python state) and the hoisted-loads matmul
(the current version keeps Python lists of tiles, so its K loops unroll; the legacy version holds the tiles in a
block tensor and stays symbolic) are traced from shapes alone (nki.spec, bf16), fresh each time, and the best of 3
wall-clock traces, the rounds of specialisation and the IR statement count are printed. Timing is on this
machine; the ratios and the growth with trip count are the point.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nki_dsl  # noqa: E402
from tests.current_api.matmul_guide import CURRENT, LEGACY  # noqa: E402

TRIPS = (2, 8, 32, 64)  # 64 x 128 x 512 bf16 rhs tiles per partition still fit trn2 SBUF
M, N = 256, 1024


def _fresh(kernel):
    kernel._traced.clear()  # trace again: the cache would answer from the first trace
    kernel.__dict__.pop("_decisions", None)  # and from scratch: no loop known to need unrolling yet
    return kernel


def trace_time(kernel, K: int) -> tuple[float, int, int]:
    args = (nki_dsl.spec((K, M), "bfloat16"), nki_dsl.spec((K, N), "bfloat16"))
    best = float("inf")
    for _ in range(3):
        _fresh(kernel)
        start = time.perf_counter()
        ir = nki_dsl.trace(kernel, *args).ir
        best = min(best, time.perf_counter() - start)
    return best, getattr(ir, "specialization_rounds", 1), sum(1 for _ in ir.walk())


def main() -> int:
    print(f"{'kernel':<10} {'gen':<8} " + " ".join(f"{'K/128=' + str(t):>22}" for t in TRIPS))
    print(f"{'':<10} {'':<8} " + " ".join(f"{'ms  rounds  stmts':>22}" for _ in TRIPS))
    for name in ("tiled", "hoisted"):
        for gen, table in (("legacy", LEGACY), ("current", CURRENT)):
            cells = []
            for trips in TRIPS:
                t, rounds, stmts = trace_time(table[name], 128 * trips)
                cells.append(f"{t * 1e3:8.2f} {rounds:6d} {stmts:6d}")
            print(f"{name:<10} {gen:<8} " + " ".join(f"{c:>22}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
