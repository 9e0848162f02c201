"""``nl.loop_reduce``: a reduction across the iterations of symbolic loops (legacy NKI, reference/nki.md §1.4).

``b = nl.loop_reduce(a, op=np.max, loop_indices=[k])`` inside ``for k in nl.affine_range(n)`` makes ``b`` the
``op``-reduction of ``a`` over every iteration of ``k``: per iteration ``b = op(b, a)``. It is written with
op-table ops only: an accumulator filled with ``op``'s identity is declared just before the outermost reduced loop,
and the loop body accumulates into it (``assign`` with ``accumulate=op``), the same associative accumulation as
``acc += x``. After the loop ``b`` holds the full reduction; the verifier rejects reading it inside the loop.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir import functions
from nki_dsl.ir.nodes import Op
from nki_dsl.language.creation import full
from nki_dsl.language.memory import assign
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.tensor import is_tile

LOOP_REDUCIBLE = ("add", "multiply", "maximum", "minimum")


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None):
    """The ``op``-reduction (add, multiply, maximum, minimum) of tile ``x`` over the loops of ``loop_indices``."""
    builder = current("nl.loop_reduce")
    if not is_tile(x):
        raise NkiApiError(f"x must be a tile, got {type(x).__name__}", caller_loc(), "nl.loop_reduce")
    fn = functions.function_name(op, LOOP_REDUCIBLE, "nl.loop_reduce: op")
    outermost = min(_loop_depth(builder, i) for i in _as_list(loop_indices))
    name = dtypes.normalize(dtype if dtype is not None else x.dtype)
    acc = full(x.shape, _identity(fn, name), name, buffer=None, name="loop_reduce")
    _hoist_last(builder, outermost)
    assign(acc.access(), x, accumulate=fn, mask=mask)
    return acc


def _as_list(loop_indices) -> list:
    items = list(loop_indices) if isinstance(loop_indices, list | tuple) else [loop_indices]
    if not items:
        raise NkiApiError("loop_indices is empty: name the loop indices to reduce over", caller_loc(), "nl.loop_reduce")
    return items


def _loop_depth(builder, index) -> int:
    """Position among the open loops of the loop whose index ``index`` is."""
    terms = index.expr.terms if isinstance(index, IndexValue) and not index.shape else ()
    if len(terms) != 1 or terms[0][1] != 1 or index.expr.const:
        raise NkiApiError(
            f"loop_indices must be indices of enclosing nl.affine_range / nl.sequential_range loops, got {index!r}",
            caller_loc(),
            "nl.loop_reduce",
        )
    var = terms[0][0]
    for depth, loop in enumerate(builder.loops):
        if loop.var == var:
            return depth
    raise NkiApiError(f"loop index {var} is not an enclosing loop here", caller_loc(), "nl.loop_reduce")


def _hoist_last(builder, depth: int) -> None:
    """Move the op just emitted (the accumulator) to just before the loop at ``depth`` in its enclosing region."""
    loops = builder.loops
    inner = loops[-1].body
    stmt = inner.pop()
    assert isinstance(stmt, Op)
    region = builder.kernel.body if depth == 0 else loops[depth - 1].body
    at = next(k for k, s in enumerate(region) if s is loops[depth])
    region.insert(at, stmt)


def _identity(fn: str, dtype_name: str) -> float:
    """The value ``fn`` leaves every element of ``dtype_name`` unchanged with."""
    if fn == "add":
        return 0.0
    if fn == "multiply":
        return 1.0
    d = dtypes.get(dtype_name)
    if d.kind == "bool":
        lo, hi = 0.0, 1.0
    elif d.is_float:
        # float8_e4m3 has no infinity: its largest finite value bounds every value it holds.
        has_inf = bool(np.isinf(np.float32(np.inf).astype(d.np_dtype)))
        hi = float("inf") if has_inf else float(ml_dtypes.finfo(d.np_dtype).max)
        lo = -hi
    else:
        lo, hi = float(np.iinfo(d.np_dtype).min), float(np.iinfo(d.np_dtype).max)
    return lo if fn == "maximum" else hi
