"""The XLA executables of the JAX backend, at most ``MAX_EXECUTABLES`` of them alive at once.

A compiled XLA program holds its machine code and constants: tens of megabytes for an unrolled kernel, and a test
session or a long-lived process compiles thousands of specialisations (every kernel object keeps its
``Executable`` for good, ``trace/jit.py``). ``jax.jit``'s own caches would keep each executable as long as its
function lives; here calls on concrete arrays go through an explicitly compiled program kept in one
least-recently-used table for the whole process instead, so memory stays bounded and a specialisation evicted and
called again is compiled again. Calls on tracers (inside a user's ``jax.jit``, ``vmap`` or ``grad``) never get
here: they are traced into the caller's program, which JAX compiles and caches as the caller's.
"""

from __future__ import annotations

import itertools
import os
from collections import OrderedDict

import jax

from nki_dsl.errors import NkiError

# Enough for every specialisation a kernel session uses in turn; the environment variable overrides it.
MAX_EXECUTABLES = int(os.environ.get("NKI_JAX_MAX_EXECUTABLES", "64"))


# LLVM's optimisation level for the machine code of the programs compiled here (``xla_backend_optimization_level``).
# 1 rather than XLA's default: on CPU most of a first call is LLVM compiling the program's fusions, and level 1
# cut the ViT attention kernel's XLA compile by 25-35% (0.53-0.71 s -> 0.38-0.48 s CPU, load 5-11; its first
# call 920 -> 732 ms) while every benchmark kernel ran as fast as at the default (`python benchmarks/jax_speed.py
# --opt-level xla,1 --cpu`): their dots and reductions go to library kernels (YNNPACK, Eigen), the loop fusions
# around them are memory-bound. Level 0 compiled in half the default's time but ran the kernels 1.1-8x slower.
# Floating point is the same at every level (no fast-math: LLVM may not reorder a sum), so results do not change.
# ``NKI_JAX_XLA_OPT_LEVEL`` overrides it (an integer, or ``xla`` for XLA's own default), read at each compilation.
# Only CPU programs get the level by default: it was measured there, and GPU/TPU compiles are not LLVM-bound alike.
OPT_LEVEL = 1


def compiler_options(platform: str = "cpu") -> dict | None:
    """XLA options of the programs compiled here for ``platform`` (None: XLA's defaults)."""
    level = os.environ.get("NKI_JAX_XLA_OPT_LEVEL", str(OPT_LEVEL) if platform == "cpu" else "xla")
    if level == "xla":
        return None
    try:
        return {"xla_backend_optimization_level": int(level)}
    except ValueError:
        raise NkiError(f"NKI_JAX_XLA_OPT_LEVEL={level!r}: expected an integer (LLVM's optimisation level) or "
                       f"'xla'") from None  # fmt: skip


_table: OrderedDict = OrderedDict()
_tokens = itertools.count()
compilations = 0  # XLA compilations so far (tests read it to check that a specialisation compiles once)


def new_owner() -> int:
    """A key prefix for one function's executables (not ``id()``: ids are reused once an object dies)."""
    return next(_tokens)


def signature(arrays) -> tuple:
    return tuple((a.shape, a.dtype, getattr(a, "sharding", None)) for a in arrays)


def _platform(arrays) -> str:
    """Where the program will run: the device of the first JAX array given, else JAX's default backend."""
    for a in arrays:
        if isinstance(a, jax.Array):
            return next(iter(a.devices())).platform
    return jax.default_backend()


def get(owner: int, make, arrays):
    """The compiled program for arguments like ``arrays`` of the function ``make()`` returns, compiled on first
    use. The function is made afresh for the compilation and dropped after it: JAX's tracing and lowering caches
    are keyed (weakly) on the function, so they let go of what they hold for it, and the table is all that keeps
    the program alive."""
    global compilations
    key = (owner, signature(arrays))
    compiled = _table.get(key)
    if compiled is not None:
        _table.move_to_end(key)
        return compiled
    compiled = jax.jit(make()).lower(*arrays).compile(compiler_options(_platform(arrays)))
    compilations += 1
    _table[key] = compiled
    while len(_table) > max(MAX_EXECUTABLES, 1):
        _table.popitem(last=False)
    return compiled


def count() -> int:
    return len(_table)


def clear() -> None:
    _table.clear()
