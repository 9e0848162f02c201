"""Runtime loops (nki_dsl/ir/runtime_loops.py): what a register trip count costs in the tools, against the same
loop with its trip count known at trace time.

    python benchmarks/runtime_loops.py

For N 128-column tiles (load, scale, store per iteration), the kernel with ``nl.sequential_range(N)`` and the one
with ``nl.dynamic_range(register)`` holding N are traced, run on the NumPy reference and simulated with data. It
prints the trace time (the dynamic loop's body is traced once, whatever N holds), the modelled latencies (the
dynamic loop is priced iteration by iteration at the trip count the run read: equal to the static loop's but for
the wait for its register) and the wall time of ``nki.simulate`` from scratch (trace, lowering, NumPy run and
schedule; the static loop is advanced by arithmetic once its schedule repeats, the dynamic one is scheduled
instruction by instruction). Best of 3, each on a fresh ``nki.jit`` (no cache); the ratios matter.
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

TILES = (4, 64, 512, 2048)


def _body(x, out, i):
    t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)


@nki.jit
def scale_static(x, n):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.sequential_range(x.shape[1] // 128):
        _body(x, out, i)
    return out


@nki.jit
def scale_dynamic(x, n):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.dynamic_range(count):
        _body(x, out, i)
    return out


def _best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main():
    print(f"{'tiles':>6} {'trace static':>13} {'trace dyn':>10} {'latency static':>15} {'latency dyn':>12} "
          f"{'sim static':>11} {'sim dyn':>9} {'sim ratio':>9}")
    for n in TILES:
        x = np.ones((128, 128 * n), np.float32)
        reg = np.array([[n]], np.int32)
        traces, sims = [], []
        for kernel in (scale_static, scale_dynamic):
            t, _ = _best(lambda fn=kernel.fn, x=x, reg=reg: nki_dsl.trace(nki.jit(fn), x, reg))
            traces.append(t)
            t, (_, profile) = _best(lambda fn=kernel.fn, x=x, reg=reg: nki.simulate(nki.jit(fn), x, reg))
            sims.append((t, profile.latency_ns))
        print(f"{n:>6} {traces[0] * 1e3:>11.1f}ms {traces[1] * 1e3:>8.1f}ms {sims[0][1]:>13.0f}ns "
              f"{sims[1][1]:>10.0f}ns {sims[0][0]:>10.3f}s {sims[1][0]:>8.3f}s {sims[1][0] / sims[0][0]:>8.1f}x")


if __name__ == "__main__":
    main()
