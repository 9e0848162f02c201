"""``@nki.jit``: a kernel that traces on first call per argument spec, verifies, compiles and runs.

``kernel(a, b)`` launches one instance; ``kernel[2, 2](a, b)`` an SPMD grid. The compile cache is keyed by
(source hash, argument specs and constants, grid, backend).

Called while another kernel is being traced, a kernel is a sub-kernel (legacy NKI decorates those
``@nki.jit(mode='trace')``, reference/nki.md §2.1; the current compiler "inline[s] calls" during specialisation,
§2.6): its body runs inline in the caller's trace, on the caller's tiles and HBM tensors, and its ops keep their
own source lines. It is not a new kernel with HBM parameters of its own.
"""

from __future__ import annotations

import functools
import hashlib
import inspect

from nki_dsl import backends
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.trace.builder import caller_loc, is_tracing
from nki_dsl.trace.call_errors import api_call_error
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
        self._traced: dict[tuple, Kernel] = {}
        self._compiled: dict[tuple, object] = {}
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

    def specialize(self, grid, args, kwargs, target: str = "trn2") -> tuple[Kernel, dict, tuple]:
        """Trace (or fetch from the cache) and verify the kernel for these arguments."""
        from nki_dsl.verify import check  # verify imports the op table; kept off the import path of nki_dsl

        bound, arrays = bind(self.fn, args, kwargs)
        key = (self.source_hash, bound.key, grid, target)
        kernel = self._traced.get(key)
        if kernel is None:
            try:
                kernel = trace_kernel(self.fn, bound, grid)
            except TypeError as e:  # a kernel line called an nl/nisa function with arguments it does not take
                error = api_call_error(e)
                if error is None:
                    raise
                raise error from None
            check(kernel, target=target)
            for hook in TRACE_HOOKS:
                hook(kernel, target)
            self._traced[key] = kernel
        return kernel, arrays, key

    def executable(self, kernel: Kernel, key: tuple, backend: str):
        """The compiled ``kernel`` (specialisation ``key``) on ``backend``, compiled once per (key, backend)."""
        exe = self._compiled.get((key, backend))
        if exe is None:
            exe = backends.load(backend).compile_kernel(kernel, target=key[-1])  # key ends with the target
            self._compiled[(key, backend)] = exe
        return exe


class Launch:
    """A kernel bound to a launch grid: ``kernel[2, 2]``."""

    def __init__(self, jit: JitKernel, grid: tuple[int, ...]):
        self.jit = jit
        self.grid = grid

    def __call__(self, *args, backend: str = "numpy", **kwargs):
        if is_tracing():
            raise NkiApiError(
                f"sub-kernel {self.jit.fn.__name__} is called with a launch grid {list(self.grid)} from inside a "
                f"kernel; a sub-kernel runs inline in its caller: call it without a grid",
                caller_loc(),
            )
        kernel, arrays, key = self.jit.specialize(self.grid, args, kwargs)
        return self.jit.executable(kernel, key, backend).run(arrays)

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
