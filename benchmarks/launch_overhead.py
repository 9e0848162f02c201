"""What a launch of an already-compiled specialisation costs in Python before (and after) its compiled program
runs: ``kernel(*arrays)`` against the same program run alone, on the NumPy and JAX backends.

    python benchmarks/launch_overhead.py [--rounds 15] [--sample-ms 30] [--backends numpy jax] [--wall]

Kernels: the tutorial's tensor add (one 128x512 fp32 tile, a one-line helper graph) and the library's ViT attention
(``kernels/vit_attn``, ~80 values reached from its body: helpers, module constants, the kernel's defaults) at a
small shape (1x1x16x64 bf16), so that its program is short and the launch's own cost is visible.

Per kernel and backend, three contenders, each timed as samples of back-to-back calls lasting ``--sample-ms``, one
sample of each per round, the order rotating from round to round:

* ``launch``: ``kernel(*args, backend=...)``, an already traced, verified and compiled specialisation;
* ``run``: the same kernel's compiled program alone (``nki.trace(...).compile(backend).run(arrays)``);
* ``plain``: a plain Python function taking the same arguments and returning them: the interpreter's speed in this
  run, so that figures from different runs (or before and after a change, on a loaded machine) compare as ratios.

Prints medians over rounds of microseconds per call, the overhead (``launch - run``, within each round) and the
overhead in plain calls (``overhead / plain``). JAX results are waited for (``block_until_ready``) on both sides.
Times are this process's CPU time (all its threads): on the shared machine wall-clock time also counts the time the
process waited for a core, which moved single figures by 2x between runs; ``--wall`` measures wall-clock time.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402


def _cases():
    rng = np.random.default_rng(0)
    add = importlib.import_module("tutorials.01_tensor_add").add_kernel[1, 1]
    a = rng.standard_normal((128, 512)).astype(np.float32)
    from kernels.vit_attn.kernel import attention_kernel

    q = rng.standard_normal((1, 1, 16, 64)).astype(ml_dtypes.bfloat16)
    return {"tensor_add 128x512": (add, (a, a)), "vit_attn 1x1x16x64": (attention_kernel, (q, q, q, 0.125))}


def _plain(*args, backend=None):
    return args


def _contenders(launch, args, backend: str):
    traced = nki.trace(launch, *args)
    exe = traced.compile(backend=backend)
    arrays = dict(zip(traced.param_names, (a for a in args if isinstance(a, np.ndarray)), strict=True))
    wait = _waiter(backend)
    return {"launch": lambda: wait(launch(*args, backend=backend)), "run": lambda: wait(exe.run(arrays)),
            "plain": lambda: _plain(*args, backend=backend)}  # fmt: skip


def _waiter(backend: str):
    if backend != "jax":
        return lambda out: out
    import jax

    return jax.block_until_ready


def _calls_per_sample(fn, sample_s: float, clock) -> int:
    n = 1
    while True:
        start = clock()
        for _ in range(n):
            fn()
        if clock() - start >= sample_s:
            return n
        n *= 2


def measure(fns: dict, rounds: int, sample_s: float, clock=time.process_time) -> dict[str, list[float]]:
    """Seconds per call of each contender, one sample per round each, the order rotating."""
    for fn in fns.values():  # warm: compiled programs, caches
        fn()
    counts = {name: _calls_per_sample(fn, sample_s, clock) for name, fn in fns.items()}
    names = list(fns)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, n = fns[name], counts[name]
            start = clock()
            for _ in range(n):
                fn()
            out[name].append((clock() - start) / n)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--sample-ms", type=float, default=30.0)
    ap.add_argument("--backends", nargs="+", default=["numpy", "jax"])
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of this process's CPU time")
    opts = ap.parse_args()
    clock = time.perf_counter if opts.wall else time.process_time
    print(f"{'kernel':22} {'backend':8} {'launch us':>10} {'run us':>9} {'overhead us':>12} {'plain us':>9} "
          f"{'overhead/plain':>15}")  # fmt: skip
    for name, (launch, args) in _cases().items():
        for backend in opts.backends:
            t = measure(_contenders(launch, args, backend), opts.rounds, opts.sample_ms / 1e3, clock)
            overhead = [(a - b) * 1e6 for a, b in zip(t["launch"], t["run"])]
            ratio = [o / (p * 1e6) for o, p in zip(overhead, t["plain"])]
            med = {k: statistics.median(v) * 1e6 for k, v in t.items()}
            print(f"{name:22} {backend:8} {med['launch']:10.1f} {med['run']:9.1f} {statistics.median(overhead):12.1f} "
                  f"{med['plain']:9.3f} {statistics.median(ratio):15.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
