"""The user-facing entry points beyond ``@nki.jit``: ``trace``, ``emit``, ``simulate_kernel``, ``parse_ir`` and the
NKI decorators ``benchmark`` / ``profile`` / ``baremetal``, which run the kernel on the NumPy reference.

``nki.benchmark`` keeps both of its meanings under one rule that looks only at the call, never at the kernel's
signature (see its docstring): NKI's decorator, or the kernel's modelled Profile. ``nki.profile`` stays the NKI
decorator only: NKI's ``profile`` writes a device profile as a side effect of a run, which ``nki.simulate``
already returns."""

from __future__ import annotations

import functools
import warnings

from nki_dsl import backends
from nki_dsl.benchmarking import benchmarked
from nki_dsl.errors import NkiError, NkiVerificationError
from nki_dsl.family import ShapeFamily
from nki_dsl.ir.budget import IRBudget
from nki_dsl.ir.nodes import Kernel
from nki_dsl.profiling import benchmark_profile
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.jit import JitKernel, as_launch, concrete_only
from nki_dsl.traced import TracedKernel  # re-exported: nki.TracedKernel


def backend_names() -> list[str]:
    """The backends kernels can run on (``kernel(..., backend=name)``, ``TracedKernel.compile(backend=name)``)."""
    return backends.names()


def default_backend(*arrays) -> str:
    """The backend a call on ``arrays`` runs on when it names none: the ``nki.use_backend(...)`` block around it,
    else ``NKI_BACKEND``, else ``jax`` for JAX arrays in, else ``numpy`` (``nki_dsl/backends/__init__.py``)."""
    return backends.resolve(None, arrays)


use_backend = backends.use_backend  # ``with nki.use_backend("jax"):`` the calls inside that name no backend run there


def trace(kernel, *args, target: str | Target = DEFAULT_TARGET, **kwargs):
    """Trace and verify ``kernel`` (optionally ``kernel[grid]``) for these arguments, without running it. With
    symbolic specs (``nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})``) the result is a ``ShapeFamily``,
    proved for the whole declared range."""
    launch = as_launch(kernel)
    ir, _, _ = launch.jit.specialize(launch.grid, args, kwargs, get_target(target))
    return ShapeFamily(ir) if ir.symbols else TracedKernel(ir)


def emit(kernel, *args, backend: str = "numpy", **kwargs) -> str:
    """The source ``backend`` generates for ``kernel`` (``backend="numpy"``: Python calling NumPy).

    ``target=`` is the old spelling of ``backend=`` (a backend is not a hardware target): it still works and
    warns with a DeprecationWarning."""
    if "target" in kwargs:
        warnings.warn("nki.emit(target=...) names a backend: write nki.emit(..., backend=...)", DeprecationWarning,
                      stacklevel=2)  # fmt: skip
        backend = kwargs.pop("target")
    launch = as_launch(kernel)
    device = get_target(DEFAULT_TARGET)  # emitted source is the same for every target; lower for the default
    ir, _, _ = launch.jit.specialize(launch.grid, args, kwargs, device)
    concrete_only(ir, "be emitted")
    return backends.load(backend).emit_source(ir, device)


def simulate_kernel(kernel, *args, **kwargs):
    """Run ``kernel`` and return its outputs (as NKI's CPU simulator), on the NumPy reference unless ``backend=``
    or the default backend (``nki.default_backend``) says otherwise."""
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


# The keywords of NKI's own decorator, ``nki.benchmark(kernel=None, warmup=10, iters=100, save_neff_name,
# save_trace_name, additional_compile_opt)`` (reference/nki.md §2.1).
BENCHMARK_DECORATOR_OPTIONS = frozenset(
    {"warmup", "iters", "save_neff_name", "save_trace_name", "additional_compile_opt"}
)


def benchmark(kernel=None, *args, target: str | None = None, **kwargs):
    """NKI's ``@nki.benchmark`` decorator, or ``nki.benchmark(kernel, *specs_or_arrays, target="trn2", **kwargs)
    -> Profile``: the kernel's modelled timing from shapes and dtypes alone (``nki.spec(shape, dtype)`` or arrays,
    whose values are ignored).

    The rule, which looks at the call only: it is the decorator when it gets no kernel arguments, that is no
    positional argument after the kernel, no ``target=`` and only NKI's decorator keywords (``warmup``, ``iters``,
    ``save_neff_name``, ``save_trace_name``, ``additional_compile_opt``): ``@nki.benchmark``,
    ``@nki.benchmark(warmup=10, iters=100)``, ``nki.benchmark(fn, iters=5)``. The decorated kernel runs on the
    NumPy reference and the options are recorded. Every other call is the profiler. So a kernel with no
    parameters is profiled with ``nki.benchmark(kernel, target=...)``, and a kernel parameter that shares a name
    with a decorator keyword is passed positionally or beside ``target=``."""
    if kernel is not None and (args or target is not None or not set(kwargs) <= BENCHMARK_DECORATOR_OPTIONS):
        return benchmark_profile(kernel, *args, target=target or DEFAULT_TARGET, **kwargs)
    decorated = _benchmark_decorator(kernel, **kwargs)
    return benchmarked(decorated) if isinstance(decorated, JitKernel) else lambda k: benchmarked(decorated(k))


profile = _running_decorator("profile")
baremetal = _running_decorator("baremetal")


def parse_ir_unverified(text: str, *, budget: IRBudget | None = None, path: str = "<nkir>") -> Kernel:
    """Parse IR text within ``budget`` and return the IR (what ``TracedKernel.ir`` holds) WITHOUT verifying it: for
    tools that measure or inspect the parser alone. Parsed IR is untrusted input: never run what this returns;
    ``nki.parse_ir`` (parse, then verify) is the way from text to a kernel that runs."""
    from nki_dsl.ir.parser import parse_kernel  # deferred: `import nki_dsl` does not load the parser

    return parse_kernel(text, path, IRBudget() if budget is None else budget)


def parse_ir(text: str, target: str | Target = DEFAULT_TARGET, *, budget: IRBudget | None = None,
             path: str = "<nkir>") -> TracedKernel:  # fmt: skip
    """Parse IR text and verify it (parsed IR is untrusted input); raises an ``NkiError`` on any problem.

    ``budget`` bounds what the text may ask for (size, ops, loop nesting, iteration space, memory; default
    ``IRBudget()``, which fits every real kernel); over budget is an ``NkiVerificationError`` naming the budget.
    ``path`` names the text in error messages (e.g. the bundle file it came from)."""
    # deferred: `import nki_dsl` loads neither the parser nor the verifier; only parsing IR needs them
    from nki_dsl.ir.parser import parse_kernel
    from nki_dsl.passes.verifier import check

    target = get_target(target)
    budget = IRBudget() if budget is None else budget
    kernel = parse_kernel(text, path, budget)
    if kernel.symbols:
        raise NkiError(f"{path} is a shape family (it declares symbols): read it with nki.parse_family, whose "
                       f"instantiate() verifies each concrete shape")  # fmt: skip
    try:
        return TracedKernel(check(kernel, target, budget=budget))
    except (RecursionError, MemoryError) as e:  # only under budgets far looser than the defaults
        raise NkiError(f"verifying {path} exhausts the verifier ({type(e).__name__}); tighten the IRBudget") from None


def parse_family(text: str, *, budget: IRBudget | None = None, path: str = "<nkir>") -> ShapeFamily:
    """Parse the IR text of a shape family (untrusted input) within ``budget`` and check its form (where symbols may
    appear, their ranges and definitions). Nothing is run or compiled: ``family.instantiate(x)`` makes and verifies
    the concrete kernel for ``x``'s shape, within the same budget. A family is proved for its whole range when it is
    published (``nki.prove_family``); a loader need not trust that, since every instance is verified."""
    from nki_dsl.ir.parser import parse_kernel  # deferred: `import nki_dsl` loads neither the parser nor the verifier
    from nki_dsl.verify.family import check_form

    budget = IRBudget() if budget is None else budget
    kernel = parse_kernel(text, path, budget)
    if not kernel.symbols:
        raise NkiError(f"{path} declares no shape symbols: it is one concrete kernel; read it with nki.parse_ir")
    found = check_form(kernel)
    if found:
        raise NkiVerificationError(found)
    return ShapeFamily(kernel, budget)


def prove_family(family: ShapeFamily, target: str | Target = DEFAULT_TARGET, *, budget: IRBudget | None = None):
    """Prove every verifier rule for every shape of ``family``'s declared range on ``target``
    (``verify/family.py``); raises ``NkiVerificationError`` naming the rule and the dimension otherwise."""
    from nki_dsl.passes.verifier import prove_or_raise  # deferred: `import nki_dsl` does not load the verifier

    prove_or_raise(family.ir, get_target(target), IRBudget() if budget is None else budget)
    return family
