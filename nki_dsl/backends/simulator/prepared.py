"""A traced kernel made ready to simulate on one target, once: lowered by the pass pipeline (verified), placed by
the allocator, unrolled into a ``Stream``, and (for numbers mode) the NumPy reference of the LOWERED IR compiled,
so the outputs come from the very instructions the simulator times.

Kernels are immutable once traced, so the result is cached per (kernel object, target, grid instance); the cache
holds kernels weakly and forgets them with the kernel.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

# The one import between backends (tests/architecture/test_core_layers.py allows exactly this edge): the NumPy
# reference is the executable spec, and numbers mode computes the outputs with it, from the lowered IR the
# simulator times.
from nki_dsl.backends.numpy_ref import compile_kernel as compile_reference
from nki_dsl.backends.simulator.stream import Stream
from nki_dsl.ir.nodes import Kernel
from nki_dsl.passes.allocate import Allocation
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import Target

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class Prepared:
    lowered: Kernel
    allocation: Allocation
    target: Target
    streams: dict = field(default_factory=dict)  # grid instance (or None: all) -> Stream
    numpy: object = None  # the NumPy reference executable of ``lowered``, compiled on first use

    def stream(self, grid=None) -> Stream:
        key = None if grid is None else tuple(grid)
        s = self.streams.get(key)
        if s is None:
            s = self.streams[key] = Stream(self.lowered, self.allocation, self.target, grid=key)
        return s

    def run_numbers(self, arrays: dict):
        if self.numpy is None:
            self.numpy = compile_reference(self.lowered, self.target)
        return self.numpy.run(arrays)


def prepare(kernel: Kernel, target: Target) -> Prepared:
    """``kernel`` (traced or already lowered: the pipeline leaves lowered IR as it is) ready for ``target``."""
    per_kernel = _CACHE.setdefault(kernel, {})
    got = per_kernel.get(target)
    if got is None:
        # the same program `nki asm` lists: every pass, then SBUF/PSUM placement
        lowered, allocation = compile_for_target(kernel, target)
        got = per_kernel[target] = Prepared(lowered, allocation, target)
    return got
