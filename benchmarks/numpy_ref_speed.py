"""How fast the NumPy reference backend runs kernels, against the same math in plain NumPy, in one run.

    python benchmarks/numpy_ref_speed.py [--repeat 20]

Prints, per kernel: steady-state time of the kernel and of plain NumPy (median of --repeat calls), their
ratio, and the first-call time (trace + verify + emit + compile + run); then the time of `import nki_dsl`
in a fresh interpreter. Targets (issue 2): ratio <= 2, first call < 0.2 s, import < 0.5 s.
Kernel and baseline calls are interleaved so both see the same machine state.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from functools import partial

# Both sides call the same BLAS. OpenBLAS's thread pool on a small shared machine makes a 512^3 GEMM vary
# five-fold from run to run, which drowns the ratio being measured; one thread each keeps it stable and fair.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
from benchmarks.reference_cases import cases  # noqa: E402


def median_times(fns, repeat: int) -> list[float]:
    """Median wall time of each function, calling them in turn ``repeat`` times after one warm-up call."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(b) for b in times]


def first_call_time(kernel, args) -> float:
    fresh = nki.jit(kernel.fn)  # a new kernel object: empty trace and compile caches
    start = time.perf_counter()
    fresh(*args)
    return time.perf_counter() - start


def import_time() -> float:
    code = "import time; s = time.perf_counter(); import nki_dsl; print(time.perf_counter() - s)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'kernel':26} {'nki (ms)':>10} {'numpy (ms)':>11} {'ratio':>7} {'first call (ms)':>16}")
    worst = 0.0
    for name, kernel, np_fn, kargs in cases(rng):
        got, want = kernel(*kargs), np_fn(*kargs)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            print(f"{name}: WRONG RESULT (max |err| {np.max(np.abs(got - want)):.3g})")
            return 1
        first = first_call_time(kernel, kargs)
        t_nki, t_np = median_times([partial(kernel, *kargs), partial(np_fn, *kargs)], args.repeat)
        worst = max(worst, t_nki / t_np)
        print(f"{name:26} {t_nki * 1e3:10.2f} {t_np * 1e3:11.2f} {t_nki / t_np:7.2f} {first * 1e3:16.1f}")
    print(f"worst steady-state ratio: {worst:.2f}x plain NumPy")
    print(f"import nki_dsl: {import_time() * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
