"""The ``core-race`` rule on LNC=2 kernels without sync ops (nki_dsl/verify/rules/core_race.py): what checking the
two cores of a ``kernel[2]`` against each other costs the verifier, against the same IR checked as a legacy SPMD
grid (``lnc`` 1, which the rule skips).

    python benchmarks/core_race_speed.py

The kernel splits its rows by ``nl.program_id(0)`` and copies them in N 128-row tiles per core, unrolled
(``nl.static_range``): 2N shared-HBM accesses per core, all disjoint between the cores. Only pairs whose ranges of
flat elements overlap reach the exact integer question, so the check grows with the accesses, not with their
pairs. Best of 3 of ``nki.parse_ir`` (parse and verify) on the IR text, with its ``lnc 2`` line and without it;
the ratio matters.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl  # noqa: E402
import nki_dsl.current as nki  # noqa: E402
import nki_dsl.current.isa as nisa  # noqa: E402
import nki_dsl.current.language as nl  # noqa: E402

TILES = (16, 64, 256)


@nki.jit
def split_rows(x):
    rows = x.shape[0] // 2
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    c = nl.program_id(0)
    for i in nl.static_range(rows // 128):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(c * rows + i * 128, 128), :])
        nisa.dma_copy(dst=out[nl.ds(c * rows + i * 128, 128), :], src=t)
    return out


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    print(f"{'tiles/core':>10} {'lnc 2 (s)':>10} {'SPMD (s)':>10} {'ratio':>6}")
    for n in TILES:
        text = nki_dsl.trace(split_rows[2], np.zeros((n * 256, 64), np.float32)).text
        assert "\n  lnc 2\n" in text
        grid = text.replace("\n  lnc 2\n", "\n")
        lnc2 = best(lambda t=text: nki_dsl.parse_ir(t))
        spmd = best(lambda t=grid: nki_dsl.parse_ir(t))
        print(f"{n:>10} {lnc2:>10.3f} {spmd:>10.3f} {lnc2 / spmd:>6.2f}")


if __name__ == "__main__":
    main()
