"""Elementwise math, comparisons, reductions, matmul and selection on tiles.

Each function is one op of the op table. Elementwise functions compute in fp32 and round to the result dtype
(NKI promotion of the inputs unless ``dtype=`` is given). Functions carry ``__nki_function__`` so they can be
passed where an ISA instruction expects a function (``nisa.activation(op=nl.exp, ...)``).
"""

from __future__ import annotations

from nki_dsl.ir.ops import OPS, Family
from nki_dsl.trace.tensor import build_op


def _unary(fn: str):
    def op(x, *, dtype=None, mask=None):
        return build_op(f"nl.{fn}", {"x": x}, dtype=dtype, mask=mask)

    op.__name__ = op.__qualname__ = fn
    op.__doc__ = f"Elementwise {fn} of a tile."
    op.__nki_function__ = fn
    return op


def _binary(fn: str):
    def op(x, y, *, dtype=None, mask=None):
        return build_op(f"nl.{fn}", {"x": x, "y": y}, dtype=dtype, mask=mask)

    op.__name__ = op.__qualname__ = fn
    op.__doc__ = f"Elementwise {fn} of two tiles, or a tile and a scalar, with NumPy broadcasting."
    op.__nki_function__ = fn
    return op


def _reduce(name: str, fn: str):
    def op(x, axis, *, dtype=None, mask=None, keepdims=False):
        axis = (axis,) if isinstance(axis, int) else tuple(int(a) for a in axis)
        return build_op(f"nl.{name}", {"x": x}, {"axis": axis, "keepdims": bool(keepdims)}, dtype=dtype, mask=mask)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{name} of a tile along free axes ``axis``; ``keepdims`` keeps them with size 1."
    op.__nki_function__ = fn
    return op


# One function per unary, binary and reduce op of the table, named as the op without its ``nl.`` prefix.
_MAKERS = {Family.UNARY: lambda name, fn: _unary(fn), Family.BINARY: lambda name, fn: _binary(fn),
           Family.REDUCE: _reduce}  # fmt: skip
for _spec in OPS.values():
    if _spec.family in _MAKERS:
        _name = _spec.name.removeprefix("nl.")
        globals()[_name] = _MAKERS[_spec.family](_name, _spec.fn)


def matmul(x, y, *, transpose_x=False, mask=None):
    """``x @ y`` into PSUM (fp32). With ``transpose_x=True``, ``x`` is given as ``[K, M]`` and the result is
    ``x.T @ y``: the contraction runs along the partition dimension of both operands."""
    return build_op("nl.matmul", {"x": x, "y": y}, {"transpose_x": bool(transpose_x)}, mask=mask)


def where(condition, x, y, *, dtype=None, mask=None):
    """Elements of ``x`` where ``condition`` is true, else of ``y``."""
    return build_op("nl.where", {"condition": condition, "x": x, "y": y}, dtype=dtype, mask=mask)


def dropout(x, rate, *, dtype=None, mask=None):
    """Zero each element with probability ``rate`` (deterministic for a given ``nl.random_seed``)."""
    return build_op("nl.dropout", {"x": x, "rate": rate}, dtype=dtype, mask=mask)


def random_seed(seed, *, mask=None):
    """Seed the random generator ``nl.dropout`` draws from."""
    build_op("nl.random_seed", {"seed": seed}, mask=mask)
