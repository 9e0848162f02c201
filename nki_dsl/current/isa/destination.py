"""Destination passing: every current-API instruction takes ``dst`` first and returns nothing (reference/nki.md
§2.6, §2.7 "Common rules"). A wrapper traces the legacy instruction, which yields a fresh tile, and assigns that
tile into ``dst``. The lower-language pass fuses such an ``assign`` into the instruction before it (the
instruction writes ``dst`` directly; the tile is never materialised), so both generations give one IR and one
engine program."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.current.isa.enums import engine, member
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Access
from nki_dsl.language.memory import assign
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import is_tile


def dst_access(api: str, dst) -> Access:
    if not is_tile(dst):
        raise NkiApiError(f"'dst' must be a tensor (nl.ndarray or a view of one), got {type(dst).__name__}",
                          caller_loc(), api)  # fmt: skip
    return dst.access()


def dst_dtype(api: str, dst) -> str:
    return dtypes.normalize(dst_access(api, dst).tensor.type.dtype)


def write(api: str, dst, tile, accumulate: str = "none") -> None:
    """``dst[...] = tile`` (or ``+=``): the instruction's result lands in ``dst``, which must have its shape."""
    target = dst_access(api, dst)
    if tile is None:
        return
    if _squeezed(target.shape) != _squeezed(tile.shape) or target.shape[0] != tile.shape[0]:
        raise NkiApiError(f"'dst' {list(target.shape)} does not have the result's shape {list(tile.shape)}",
                          caller_loc(), api)  # fmt: skip
    assign(target, tile, accumulate=accumulate)


def _squeezed(shape) -> tuple[int, ...]:
    """A shape without its size-1 axes: a ``[P]`` result (``keepdims=False``) fills a ``[P, 1]`` dst."""
    return tuple(s for s in shape if s != 1)


def engine_arg(api: str, value) -> str:
    """An ``engine=`` argument as the engine name the legacy front end takes."""
    return member(api, "engine", value, engine)
