"""What numbers-and-timing mode costs over the plain NumPy backend, on the five benchmark kernels, in one run.

    python benchmarks/simulator_overhead.py [--repeat 10]

Per kernel: the steady-state time of the simulator backend running the traced kernel (``run(arrays)``: the NumPy
run of the lowered IR plus the timing simulation; lowering, allocation and stream generation are cached per kernel
and target, so they are in the first call only) and of the NumPy backend running the traced IR, as medians of
interleaved calls so both see the same machine state; their ratio; the instruction count; and the simulator's
first call.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402
from benchmarks.numpy_ref_speed import median_times  # noqa: E402  (also pins BLAS to one thread)
from benchmarks.reference_cases import cases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(f"{'kernel':26} {'simulate (ms)':>14} {'numpy (ms)':>11} {'ratio':>7} {'instructions':>13} "
          f"{'first simulate (ms)':>20}")  # fmt: skip
    ratios = []
    for name, kernel, _, kargs in cases(np.random.default_rng(0)):
        traced = nki.trace(kernel, *kargs)
        arrays = dict(zip(traced.param_names, (a for a in kargs if isinstance(a, np.ndarray)), strict=True))
        simulator = traced.compile(backend="simulator")  # run() simulates every call: numbers and timing
        start = time.perf_counter()
        outputs = simulator.run(arrays)
        first = time.perf_counter() - start
        prof = simulator.profile
        numpy = traced.compile(backend="numpy")
        want = numpy.run(arrays)
        for w, g in zip(*((x if isinstance(x, tuple) else (x,)) for x in (want, outputs)), strict=True):
            if not np.array_equal(w, g):
                print(f"{name}: simulator outputs differ from the NumPy reference")
                return 1
        t_sim, t_np = median_times([partial(simulator.run, arrays), partial(numpy.run, arrays)], args.repeat)
        ratios.append(t_sim / t_np)
        print(f"{name:26} {t_sim * 1e3:14.2f} {t_np * 1e3:11.2f} {t_sim / t_np:7.2f} {prof.instructions:13,} "
              f"{first * 1e3:20.1f}")  # fmt: skip
    print(f"numbers-and-timing mode: {min(ratios):.2f}x - {max(ratios):.2f}x the plain NumPy backend")
    return 0


if __name__ == "__main__":
    sys.exit(main())
