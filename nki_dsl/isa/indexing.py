"""GpSimd instructions driven by compile-time index expressions: ``iota`` materialises one as data,
``affine_select`` uses a predicate over tile positions (the causal mask of attention)."""

from __future__ import annotations

from nki_dsl.isa.arguments import index_expr, predicate, shape_of
from nki_dsl.trace.tensor import build_op


def iota(expr, dtype, *, mask=None):
    """A new tile holding the integer values of ``expr``, an index expression of rank >= 2 built from
    ``nl.arange`` / ``nl.mgrid``, loop indices and program ids (``nl.arange(128)[:, None] * 4 + i``). The tile
    has ``expr``'s broadcast shape; values are computed in int32 and converted to ``dtype``."""
    name = "nisa.iota"
    index = index_expr(name, "expr", expr)
    attrs = {"expr": index.expr, "shape": tuple(index.shape)}
    return build_op(name, {}, attrs, dtype=dtype, mask=mask)


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None):
    """``on_true_tile`` where ``pred`` holds and the number ``on_false_value`` elsewhere. ``pred`` is a
    compile-time comparison of index expressions over the tile's positions (``i_q >= i_k`` with
    ``i_q = nl.arange(128)[:, None]``, ``i_k = nl.arange(512)[None, :]``), combined with ``&``."""
    name = "nisa.affine_select"
    shape = shape_of(on_true_tile)
    attrs = {"pred": predicate(name, "pred", pred, shape) if shape is not None else pred}
    operands = {"on_true_tile": on_true_tile, "on_false_value": on_false_value}
    return build_op(name, operands, attrs, dtype=dtype, mask=mask)
