"""How fast the JAX backend runs the five benchmark kernels, against the same math in plain ``jax.jit``-ed
``jax.numpy`` and against the NumPy reference backend, in one run.

    python benchmarks/jax_speed.py [--repeat 20] [--cpu]

Prints, per kernel: steady-state time (median of --repeat calls, outputs ready) of the kernel on the JAX backend,
of plain jax.jit, and of the kernel on the NumPy reference; the ratios kernel/plain-jit and kernel/NumPy-reference;
and the first call on the JAX backend (trace + verify + lower + XLA compile + run, on a fresh kernel object, JAX
itself already imported). Targets (issue 13): ratio to plain jit <= 1.5, first call < 0.5 s.
Calls are interleaved so every contender sees the same machine state.

``--memory N`` instead compiles N specialisations of the softmax kernel (N row counts) and prints how much the
process's resident memory grew (after garbage collection and ``malloc_trim``): what a long session keeps.

``--cpu`` measures this process's CPU time instead of wall-clock time (the fastest of --repeat rounds of 10 calls,
and the first call's CPU time): on a machine shared with other work, wall-clock medians mostly measure the other
work, CPU time what the calls cost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as numpy_ref_speed.py: stable BLAS
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
from benchmarks.reference_cases import cases  # noqa: E402


# Plain jax.numpy, the same math as the kernels (and as reference_cases' NumPy baselines).
def jnp_matmul(lhsT, rhs):
    return jnp.matmul(lhsT.T, rhs, precision=jax.lax.Precision.HIGHEST)


def jnp_softmax(x):
    e = jnp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def jnp_rmsnorm(x, weight, eps=1e-6):
    return x / jnp.sqrt(jnp.mean(x * x, axis=1, keepdims=True) + eps) * weight


def jnp_layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    centered = x - mean
    return centered / jnp.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps) * gamma + beta


def jnp_attention(q, k, v, scale):
    hi = jax.lax.Precision.HIGHEST
    s = jnp.matmul(q, jnp.swapaxes(k, -1, -2), precision=hi) * scale
    p = jnp.exp(s - s.max(axis=-1, keepdims=True))
    return jnp.matmul(p, v, precision=hi) / p.sum(axis=-1, keepdims=True)


PLAIN = [jnp_matmul, jnp_softmax, jnp_rmsnorm, jnp_layernorm, jnp_attention]


def median_times(fns, repeat: int, cpu: bool = False) -> list[float]:
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    calls = 10 if cpu else 1
    clock = time.process_time if cpu else time.perf_counter
    for _ in range(repeat):
        for fn, bucket in zip(fns, times):
            start = clock()
            for _ in range(calls):
                fn()
            bucket.append((clock() - start) / calls)
    return [min(b) if cpu else statistics.median(b) for b in times]


def ready(fn):
    """``fn`` that waits for its JAX outputs (JAX dispatches asynchronously)."""
    return lambda: jax.block_until_ready(fn())


def first_call_time(kernel, args, cpu: bool = False) -> float:
    fresh = nki.jit(kernel.fn)  # a new kernel object: empty trace and compile caches
    clock = time.process_time if cpu else time.perf_counter
    start = clock()
    jax.block_until_ready(fresh(*args, backend="jax"))
    return clock() - start


def memory_growth(n: int) -> float:
    """MB of resident memory kept after ``n`` specialisations of ``softmax_rows`` ran on the JAX backend."""
    import ctypes
    import gc

    from benchmarks.reference_kernels import softmax_rows

    def rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    kernel = nki.jit(softmax_rows.fn)
    jax.block_until_ready(kernel(np.ones((128, 64), np.float32), backend="jax"))
    start = rss()
    for i in range(n):
        jax.block_until_ready(kernel(np.ones((128 * (i % 40 + 1), 64 + 8 * (i // 40)), np.float32), backend="jax"))
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap back to the system: only what is still held counts
    return rss() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cpu", action="store_true", help="CPU time of this process instead of wall-clock time")
    parser.add_argument("--memory", type=int, metavar="N", help="memory kept by N compiled specialisations")
    args = parser.parse_args()
    if args.memory:
        print(f"{args.memory} specialisations of softmax_rows: resident memory +{memory_growth(args.memory):.0f} MB")
        return 0
    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; {'CPU' if args.cpu else 'wall-clock'} time")
    print(f"{'kernel':26} {'jax bk (ms)':>11} {'jax.jit (ms)':>12} {'numpy bk (ms)':>13} {'vs jit':>7} "
          f"{'vs numpy':>8} {'first call (ms)':>16}")  # fmt: skip
    worst, slowest_first = 0.0, 0.0
    jax.block_until_ready(jnp.ones(1) + 1)  # JAX's own start-up is not the kernel's first call
    for (name, kernel, _np_fn, kargs), plain in zip(cases(rng), PLAIN):
        dev_args = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in kargs)
        arrays = tuple(a for a in dev_args if isinstance(a, jax.Array))
        consts = tuple(a for a in dev_args if not isinstance(a, jax.Array))
        plain_jit = jax.jit(lambda *arr, _f=plain, _c=consts: _f(*arr, *_c))
        first = first_call_time(kernel, dev_args, args.cpu)
        got, want, ref = kernel(*dev_args, backend="jax"), plain_jit(*arrays), kernel(*kargs)
        if not (np.allclose(got, want, rtol=1e-4, atol=1e-4) and np.allclose(got, ref, rtol=1e-5, atol=1e-5)):
            print(f"{name}: WRONG RESULT (max |err| {np.max(np.abs(np.asarray(got) - np.asarray(want))):.3g})")
            return 1
        t_jax, t_jit, t_np = median_times([ready(partial(kernel, *dev_args, backend="jax")),
                                           ready(partial(plain_jit, *arrays)), partial(kernel, *kargs)],
                                          args.repeat, args.cpu)  # fmt: skip
        worst, slowest_first = max(worst, t_jax / t_jit), max(slowest_first, first)
        print(f"{name:26} {t_jax * 1e3:11.2f} {t_jit * 1e3:12.2f} {t_np * 1e3:13.2f} {t_jax / t_jit:7.2f} "
              f"{t_jax / t_np:8.2f} {first * 1e3:16.1f}")  # fmt: skip
    print(f"worst steady-state ratio: {worst:.2f}x plain jax.jit; slowest first call: {slowest_first * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
