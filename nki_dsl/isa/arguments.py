"""Normalising ``nisa`` arguments at the API boundary: functions to canonical names, engine and command enums to
the strings the op table records, index expressions and predicates to ``Affine``/``Mask``."""

from __future__ import annotations

from enum import Enum

from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.ir import functions
from nki_dsl.ir.ops import OPS
from nki_dsl.isa.enums import Engine
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.index import IndexValue, MaskValue


def fn_name(op: str, arg: str, value, allowed: tuple[str, ...], optional: bool = False) -> str:
    """The canonical name of a function argument (``np.exp``, ``nl.exp``, ``"exp"``); ``None`` -> ``"none"``."""
    if value is None:
        if optional:
            return "none"
        raise NkiApiError(f"argument '{arg}' is required", caller_loc(), op)
    names = tuple(a for a in allowed if a != "none")
    try:
        return functions.function_name(value, names, arg)
    except NkiApiError:
        refusal = getattr(value, "__nki_refusal__", None)  # an unmodelled 0.6 name (current/unmodelled.py): say why
        if refusal is not None:
            raise NkiApiError(f"{arg}={value.__name__}: {refusal}", caller_loc(), op) from None
        shown = getattr(value, "__name__", None) or repr(value)
        raise NkiApiError(
            f"{arg}={shown} is not supported by this instruction; expected one of: {', '.join(names)}",
            caller_loc(),
            op,
        ) from None


def engine_name(op: str, value, default: str | None = None) -> str:
    """The engine an instruction runs on: the given ``nisa.engine`` member, or ``default`` (the op table's)
    for ``engine.unknown``. Engines the instruction cannot run on are rejected."""
    choices = OPS[op].attr("engine").choices
    try:
        member = value if isinstance(value, Engine) else Engine[value] if isinstance(value, str) else Engine(value)
    except (KeyError, ValueError):
        raise NkiApiError(f"engine={value!r} is not a nisa.engine", caller_loc(), op) from None
    if member is Engine.unknown:
        return default or OPS[op].engine.value
    if member.name not in choices:
        raise NkiApiError(
            f"engine={member.name} is not supported; this instruction runs on: {', '.join(choices)}", caller_loc(), op
        )
    return member.name


def enum_name(op: str, arg: str, value, enum: type[Enum]) -> str:
    """An enum argument given as a member or its name."""
    if isinstance(value, enum):
        return value.name
    if isinstance(value, str) and value in enum.__members__:
        return value
    names = ", ".join(enum.__members__)
    raise NkiApiError(f"{arg}={value!r} is not one of {enum.__name__} ({names})", caller_loc(), op)


def number(value):
    """Scalar operands that scale or offset float data are floats (``scale=2`` is ``2.0``); tiles pass through."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def flag(op: str, arg: str, value) -> bool:
    if not isinstance(value, bool | int):
        raise NkiApiError(f"{arg}= must be a bool, got {type(value).__name__}", caller_loc(), op)
    return bool(value)


def ints(op: str, arg: str, value) -> tuple[int, ...]:
    """A tuple of Python ints (an int alone is a 1-tuple)."""
    items = (value,) if isinstance(value, int) else value
    try:
        return tuple(int(v.__index__()) for v in items)
    except (AttributeError, TypeError):
        raise NkiApiError(f"{arg}= must be an int or a tuple of ints, got {value!r}", caller_loc(), op) from None


def index_expr(op: str, arg: str, value) -> IndexValue:
    """An index expression of rank >= 2 built from ``nl.arange``/``nl.mgrid``, loop indices and program ids."""
    if not isinstance(value, IndexValue):
        raise NkiTraceError(
            f"{arg} must be an index expression built from nl.arange / nl.mgrid (e.g. nl.arange(128)[:, None]), "
            f"got {type(value).__name__}",
            caller_loc(),
            op,
        )
    if value.ndim < 2:
        raise NkiTraceError(
            f"{arg} has rank {value.ndim}; a tile needs a partition axis and a free axis, as in "
            f"nl.arange(n)[:, None] or nl.mgrid[0:p, 0:f]",
            caller_loc(),
            op,
        )
    return value


def predicate(op: str, arg: str, value, shape: tuple[int, ...]):
    """A compile-time predicate (``i_q >= i_k``) as a ``Mask`` over the axes of a tile of ``shape``."""
    if not isinstance(value, MaskValue):
        raise NkiTraceError(
            f"{arg} must be a comparison of indices built from nl.arange (e.g. i_q >= i_k), got {type(value).__name__}",
            caller_loc(),
            op,
        )
    ndim = len(shape)
    if len(value.shape) > ndim:
        raise NkiTraceError(f"{arg} of rank {len(value.shape)} is applied to a tile of rank {ndim}", caller_loc(), op)
    own = (1,) * (ndim - len(value.shape)) + tuple(value.shape)
    if any(e not in (1, s) for e, s in zip(own, shape)):
        raise NkiTraceError(
            f"{arg} of shape {list(value.shape)} does not match the tile {list(shape)}", caller_loc(), op
        )
    return value.aligned(ndim)


def shape_of(value) -> tuple[int, ...] | None:
    """The shape of a tile argument, or None when it is not one (``build_op`` then reports it)."""
    shape = getattr(value, "shape", None)
    return tuple(shape) if isinstance(shape, tuple | list) else None
