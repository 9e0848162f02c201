"""``@nki.benchmark(warmup=, iters=)``: the decorated kernel runs as usual, and after each call carries NKI's
``benchmark_result.nc_latency.get_latency_percentile(p)`` (reference/nki.md §2.1: microseconds, p in {0, 1, 10, 25,
50, 90, 99, 100}).

NKI measures ``iters`` device runs after ``warmup`` and reports their percentiles. Here the latency is the
simulator's modelled latency of the call's specialisation on the call's target (``target=``, default
``DEFAULT_TARGET``): deterministic, so every percentile is that one number, and ``warmup`` / ``iters`` are
recorded but change nothing. A launch with a grid (``kernel[2, 2](...)``) sets it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.errors import NkiApiError
from nki_dsl.profiling import benchmark_profile
from nki_dsl.targets import DEFAULT_TARGET
from nki_dsl.trace.jit import JitKernel, Launch

PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)  # the ones NKI's latency object answers (§2.1)


@dataclass(frozen=True)
class NcLatency:
    """The modelled latency of one launch, in microseconds."""

    latency_us: float

    def get_latency_percentile(self, p: int) -> float:
        if p not in PERCENTILES:
            raise NkiApiError(f"get_latency_percentile({p!r}): p is one of {list(PERCENTILES)}")
        return self.latency_us


@dataclass(frozen=True)
class BenchmarkResult:
    nc_latency: NcLatency


def benchmarked(kernel: JitKernel) -> JitKernel:
    """``kernel``, timing each of its launches into ``kernel.benchmark_result`` (the same object: its trace cache
    is kept)."""
    if _record not in kernel.launch_hooks:
        kernel.launch_hooks.append(_record)
        kernel.benchmark_result = None
    return kernel


def _record(launch: Launch, args, kwargs) -> None:
    kwargs = dict(kwargs)
    kwargs.pop("backend", None)
    target = kwargs.pop("target", DEFAULT_TARGET)
    profile = benchmark_profile(launch, *args, target=target, **kwargs)
    launch.jit.benchmark_result = BenchmarkResult(NcLatency(profile.latency_ns / 1000.0))
