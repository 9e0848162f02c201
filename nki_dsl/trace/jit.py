"""``@nki.jit``: a kernel that traces on first call per argument spec, verifies, compiles and runs.

``kernel(a, b)`` launches one instance; ``kernel[2, 2](a, b)`` an SPMD grid. Traces are cached by (source hash,
fingerprint of the helpers the body calls, argument specs and constants, grid) whatever the target: a kernel body
that consulted the target (``nisa.get_nc_version()``, ``nl.tile_size``) records which facts it read, and its trace
is reused only for targets with the same values. Verification, lowering and compiled executables are per target
(``(trace key, Target)``).

Called while another kernel is being traced, a kernel is a sub-kernel (legacy NKI decorates those
``@nki.jit(mode='trace')``, reference/nki.md §2.1; the current compiler "inline[s] calls" during specialisation,
§2.6): its body runs inline in the caller's trace, on the caller's tiles and HBM tensors, and its ops keep their
own source lines. It is not a new kernel with HBM parameters of its own.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from dataclasses import dataclass, field

from nki_dsl import backends
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.builder import caller_loc, is_tracing
from nki_dsl.trace.call_errors import api_call_error
from nki_dsl.trace.dependencies import HelperFingerprint
from nki_dsl.trace.specs import bind
from nki_dsl.trace.tracer import trace_kernel

# Functions called as hook(kernel, target) with every freshly traced and verified kernel. Tools register here
# explicitly (the test suite checks that each traced kernel's text round-trips through the parser and verifies again
# for the target it was traced for).
TRACE_HOOKS: list = []


def _source_hash(fn) -> str:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = repr(fn.__code__.co_code) + repr(fn.__code__.co_consts)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class _Trace:
    """One trace of a specialisation: valid for every target whose attributes equal ``facts`` (all targets when
    the body read none), verified so far for the targets in ``verified``."""

    kernel: Kernel
    facts: dict
    verified: set = field(default_factory=set)

    def fits(self, target: Target) -> bool:
        return all(getattr(target, name) == value for name, value in self.facts.items())


def _normalize_grid(grid) -> tuple[int, ...]:
    grid = grid if isinstance(grid, tuple) else (grid,)
    out = []
    for g in grid:
        try:
            n = int(g.__index__())
        except (AttributeError, TypeError):
            raise NkiApiError(f"launch grid entries must be positive ints, got {g!r}") from None
        if n <= 0:
            raise NkiApiError(f"launch grid entries must be positive ints, got {n}")
        out.append(n)
    return tuple(out)


class JitKernel:
    """A kernel function decorated with ``@nki.jit``."""

    def __init__(self, fn, **options):
        if isinstance(fn, JitKernel):
            fn = fn.fn
        if not callable(fn):
            raise NkiApiError(f"@nki.jit decorates a function, got {type(fn).__name__}")
        self.fn = fn
        self.options = options
        self.source_hash = _source_hash(fn)
        self.helpers = HelperFingerprint(fn)  # what the body reaches, walked again only when it changed
        self._traced: dict[tuple, list[_Trace]] = {}  # (source hash, helpers, argument key, grid) -> traces
        self.trace_count = 0  # bodies run so far (tests check that targets share traces)
        self._compiled: dict[tuple, object] = {}
        # Functions called as hook(launch, args, kwargs) after each launch (not a sub-kernel call): @nki.benchmark
        # records the modelled latency with one (nki_dsl/benchmarking.py).
        self.launch_hooks: list = []
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid) -> Launch:
        return Launch(self, _normalize_grid(grid))

    def __call__(self, *args, **kwargs):
        if is_tracing():
            return self.inline(args, kwargs)
        return Launch(self, ())(*args, **kwargs)

    def inline(self, args, kwargs):
        """Run the body inside the kernel being traced (a sub-kernel call); returns what the body returns."""
        try:
            inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise NkiApiError(f"sub-kernel {self.fn.__name__}: {e}", caller_loc()) from None
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<nki.jit kernel {self.fn.__name__}>"

    def specialize(self, grid, args, kwargs, target: Target) -> tuple[Kernel, dict, tuple]:
        """Trace (or fetch from the cache) and verify the kernel for these arguments on ``target``; the key returned
        (which the compile and profile caches use) ends with the target."""
        # deferred: `import nki_dsl` does not load the verifier (23 modules, ~50 ms)
        from nki_dsl.passes.verifier import check, prove_or_raise

        bound, arrays = bind(self.fn, args, kwargs)
        # what the body (and a function passed as an argument) can reach is part of the key: rebinding or editing a
        # helper, or a global it reads, retraces (trace/dependencies.py)
        roots = [v for v in (*args, *kwargs.values()) if callable(v) and not isinstance(v, type)]  # not np.float32
        if self.helpers.fn is not self.fn:
            self.helpers = HelperFingerprint(self.fn)
        key = (self.source_hash, self.helpers(*roots), bound.key, grid)
        traces = self._traced.setdefault(key, [])
        entry = next((t for t in traces if t.fits(target)), None)
        if entry is None:
            entry = _Trace(*self._trace(bound, grid, target))
            traces.append(entry)
        if target not in entry.verified and entry.kernel.symbols:  # a shape family: proved for its whole range
            prove_or_raise(entry.kernel, target)
            entry.verified.add(target)
        if target not in entry.verified:  # hardware rules (SBUF capacity, ...) depend on the target
            check(entry.kernel, target)
            for hook in TRACE_HOOKS:
                hook(entry.kernel, target)
            entry.verified.add(target)
        return entry.kernel, arrays, (*key, target)

    def _trace(self, bound, grid, target: Target) -> tuple[Kernel, dict]:
        self.trace_count += 1
        try:
            return trace_kernel(self.fn, bound, grid, target)
        except TypeError as e:  # a kernel line called an nl/nisa function with arguments it does not take
            error = api_call_error(e)
            if error is None:
                raise
            raise error from None

    def executable(self, kernel: Kernel, key: tuple, backend: str):
        """The compiled ``kernel`` (specialisation ``key``) on ``backend``, compiled once per (key, backend)."""
        concrete_only(kernel, "run or compile")
        exe = self._compiled.get((key, backend))
        if exe is None:
            exe = backends.load(backend).compile_kernel(kernel, key[-1])  # key ends with the Target
            self._compiled[(key, backend)] = exe
        return exe


def concrete_only(kernel: Kernel, what: str) -> None:
    """Refuse to run, time or emit a shape family: only its concrete instances have one shape."""
    if kernel.symbols:
        dims = ", ".join(s.describe() for s in kernel.symbols.values() if s.is_base)
        raise NkiApiError(f"kernel {kernel.name} was traced as a shape family ({dims}), which cannot {what} as such: "
                          f"pass arrays or nki.spec shapes with concrete sizes, or instantiate the family "
                          f"(nki.trace(...).instantiate(shape))")  # fmt: skip


class Launch:
    """A kernel bound to a launch grid: ``kernel[2, 2]``."""

    def __init__(self, jit: JitKernel, grid: tuple[int, ...]):
        self.jit = jit
        self.grid = grid

    def __call__(self, *args, backend: str | None = None, target: str | Target = DEFAULT_TARGET, **kwargs):
        """Run on ``backend``; without one, on the default backend (``nki.use_backend``, ``NKI_BACKEND``, JAX arrays
        in: ``backends.resolve``)."""
        if is_tracing():
            raise NkiApiError(
                f"sub-kernel {self.jit.fn.__name__} is called with a launch grid {list(self.grid)} from inside a "
                f"kernel; a sub-kernel runs inline in its caller: call it without a grid",
                caller_loc(),
            )
        # a launch is where the user names the target: resolved once here, passed inward as a Target
        kernel, arrays, key = self.jit.specialize(self.grid, args, kwargs, get_target(target))
        out = self.jit.executable(kernel, key, backends.resolve(backend, arrays.values())).run(arrays)
        for hook in self.jit.launch_hooks:
            hook(self, args, {**kwargs, "target": target})
        return out

    def __getitem__(self, grid):
        raise NkiApiError("a launch grid is given once: kernel[g0, g1](...), not kernel[g0][g1](...)")

    def __repr__(self) -> str:
        return f"<nki kernel {self.jit.fn.__name__} grid={list(self.grid)}>"


def as_launch(kernel) -> Launch:
    if isinstance(kernel, Launch):
        return kernel
    if isinstance(kernel, JitKernel):
        return Launch(kernel, ())
    if callable(kernel):
        raise NkiApiError(
            f"{getattr(kernel, '__name__', kernel)!r} is not an NKI kernel: decorate it with @nki.jit"
        )
    raise NkiApiError(f"expected an @nki.jit kernel, got {type(kernel).__name__}")


def jit(fn=None, *, mode: str = "auto", **options):
    """Decorate a kernel. ``mode`` and other NKI options are accepted; kernels run on the NumPy reference."""
    if fn is None:
        return lambda f: JitKernel(f, mode=mode, **options)
    return JitKernel(fn, mode=mode, **options)
