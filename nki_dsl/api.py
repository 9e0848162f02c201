"""The user-facing entry points beyond ``@nki.jit``: ``trace``, ``emit``, ``simulate_kernel``, ``parse_ir`` and the
NKI decorators ``benchmark`` / ``profile`` / ``baremetal``, which run the kernel on the NumPy reference.

``nki.benchmark`` is two things, told apart by how it is called: with a kernel and its arguments
(``nki.benchmark(kernel, nki.spec(...), ..., target="trn1")``) it returns the kernel's modelled Profile
(timing only, ``profiling.benchmark_profile``); bare or with options only (``@nki.benchmark``,
``@nki.benchmark(warmup=10, iters=100)``) it is NKI's decorator. ``nki.profile`` stays the NKI decorator only:
NKI's ``profile`` writes a device profile as a side effect of a run, which ``nki.simulate`` already returns."""

from __future__ import annotations

import functools

from nki_dsl import backends
from nki_dsl.ir.budget import IRBudget
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.jit import JitKernel, as_launch


class TracedKernel:
    """A traced, verified kernel: ``str()`` is its IR text, ``.ir`` the IR itself."""

    def __init__(self, ir: Kernel):
        self.ir = ir

    @property
    def text(self) -> str:
        from nki_dsl.ir.printer import print_kernel

        return print_kernel(self.ir)

    @property
    def param_names(self) -> list[str]:
        """The kernel's tensor parameters, in order: the names ``compile(...).run`` takes its arrays by."""
        return [p.name for p in self.ir.params]

    def compile(self, backend: str = "numpy", target: str | Target = DEFAULT_TARGET):
        """An executable of this (verified) kernel on ``backend``: ``.run({param name: array})`` returns the
        outputs; the simulator's also keeps the run's ``.profile``. For IR that has no Python behind it (e.g.
        parsed from a Hub bundle)."""
        return backends.load(backend).compile_kernel(self.ir, get_target(target))

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<TracedKernel {self.ir.name}>"


def backend_names() -> list[str]:
    """The backends kernels can run on (``kernel(..., backend=name)``, ``TracedKernel.compile(backend=name)``)."""
    return backends.names()


def trace(kernel, *args, target: str | Target = DEFAULT_TARGET, **kwargs) -> TracedKernel:
    """Trace and verify ``kernel`` (optionally ``kernel[grid]``) for these arguments, without running it."""
    launch = as_launch(kernel)
    ir, _, _ = launch.jit.specialize(launch.grid, args, kwargs, get_target(target))
    return TracedKernel(ir)


def emit(kernel, *args, target: str = "numpy", **kwargs) -> str:
    """The source a backend generates for ``kernel`` (``target="numpy"``: Python calling NumPy)."""
    launch = as_launch(kernel)
    device = get_target(DEFAULT_TARGET)  # ``target`` names the backend here; the simulator models the default
    ir, _, _ = launch.jit.specialize(launch.grid, args, kwargs, device)
    return backends.load(target).emit_source(ir, device)


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


_benchmark_decorator = _running_decorator("benchmark")


def benchmark(kernel=None, *args, target: str | None = None, **kwargs):
    """``nki.benchmark(kernel, *specs_or_arrays, target="trn2", **kwargs) -> Profile``: modelled timing from
    shapes and dtypes alone. Used as ``@nki.benchmark`` or ``@nki.benchmark(warmup=..., iters=...)``: NKI's
    decorator (the kernel runs on the NumPy reference)."""
    if kernel is not None and (args or target is not None or _names_kernel_arguments(kernel, kwargs)):
        from nki_dsl.profiling import benchmark_profile

        return benchmark_profile(kernel, *args, target=target or DEFAULT_TARGET, **kwargs)
    return _benchmark_decorator(kernel, **kwargs)


def _names_kernel_arguments(kernel, kwargs) -> bool:
    """Do ``kwargs`` name parameters of the kernel (a call to profile) rather than decorator options?"""
    import inspect

    fn = getattr(getattr(kernel, "jit", kernel), "fn", kernel)
    try:
        return bool(set(kwargs) & set(inspect.signature(fn).parameters))
    except (TypeError, ValueError):
        return False


profile = _running_decorator("profile")
baremetal = _running_decorator("baremetal")


def parse_ir(text: str, target: str | Target = DEFAULT_TARGET, *, budget: IRBudget | None = None,
             path: str = "<nkir>") -> TracedKernel:  # fmt: skip
    """Parse IR text and verify it (parsed IR is untrusted input); raises an ``NkiError`` on any problem.

    ``budget`` bounds what the text may ask for (size, ops, loop nesting, iteration space, memory; default
    ``IRBudget()``, which fits every real kernel); over budget is an ``NkiVerificationError`` naming the budget.
    ``path`` names the text in error messages (e.g. the bundle file it came from)."""
    from nki_dsl.errors import NkiError
    from nki_dsl.ir.parser import parse_kernel
    from nki_dsl.verify import check

    target = get_target(target)
    budget = IRBudget() if budget is None else budget
    kernel = parse_kernel(text, path, budget)
    try:
        return TracedKernel(check(kernel, target, budget=budget))
    except (RecursionError, MemoryError) as e:  # only under budgets far looser than the defaults
        raise NkiError(f"verifying {path} exhausts the verifier ({type(e).__name__}); tighten the IRBudget") from None
