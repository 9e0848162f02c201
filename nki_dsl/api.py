"""The user-facing entry points beyond ``@nki.jit``: ``trace``, ``emit``, ``simulate_kernel`` and the NKI
decorators ``benchmark`` / ``profile`` / ``baremetal`` (which run the kernel on the NumPy reference; modelled
timings arrive with the engine simulator)."""

from __future__ import annotations

import functools

from nki_dsl import backends
from nki_dsl.ir.nodes import Kernel
from nki_dsl.trace.jit import JitKernel, as_launch


class TracedKernel:
    """A traced, verified kernel: ``str()`` is its IR text, ``.ir`` the IR itself."""

    def __init__(self, ir: Kernel):
        self.ir = ir

    @property
    def text(self) -> str:
        from nki_dsl.ir.printer import print_kernel

        return print_kernel(self.ir)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<TracedKernel {self.ir.name}>"


def trace(kernel, *args, target: str = "trn2", **kwargs) -> TracedKernel:
    """Trace and verify ``kernel`` (optionally ``kernel[grid]``) for these arguments, without running it."""
    launch = as_launch(kernel)
    ir, _, _ = launch.jit.specialize(launch.grid, args, kwargs, target=target)
    return TracedKernel(ir)


def emit(kernel, *args, target: str = "numpy", **kwargs) -> str:
    """The source a backend generates for ``kernel`` (``target="numpy"``: Python calling NumPy)."""
    launch = as_launch(kernel)
    ir, _, _ = launch.jit.specialize(launch.grid, args, kwargs)
    return backends.load(target).emit_source(ir)


def simulate_kernel(kernel, *args, **kwargs):
    """Run ``kernel`` on the NumPy reference with NumPy arrays and return its outputs (as NKI's CPU simulator)."""
    return as_launch(kernel)(*args, **kwargs)


def _running_decorator(name: str):
    def decorator(kernel=None, **options):
        if kernel is None:
            return lambda k: decorator(k, **options)
        return kernel if isinstance(kernel, JitKernel) else JitKernel(kernel, mode=name, **options)

    decorator.__name__ = name
    decorator.__doc__ = (
        f"``@nki.{name}``: accepted for NKI compatibility; the kernel runs on the NumPy reference "
        f"(options such as save_neff_name are recorded and ignored)."
    )
    return functools.wraps(decorator)(decorator)


benchmark = _running_decorator("benchmark")
profile = _running_decorator("profile")
baremetal = _running_decorator("baremetal")


def parse_ir(text: str, target: str = "trn2") -> TracedKernel:
    """Parse IR text and verify it (parsed IR is untrusted input); raises on any error."""
    from nki_dsl.ir.parser import parse_kernel
    from nki_dsl.verify import check

    return TracedKernel(check(parse_kernel(text), target=target))
