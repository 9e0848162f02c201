"""Tensor-engine instructions of the current API: ``nc_matmul`` with explicit accumulation, ``nc_transpose``.

``nc_matmul(dst, ..., accumulate=None)`` (reference/nki.md §2.7 nc_matmul): ``False`` overwrites ``dst``, ``True``
adds to it, ``None`` lets the compiler decide: the first write to a location overwrites, later ones add. That is
decided here, at trace time, per destination region (tensor, index, shape):

* a region an earlier ``nc_matmul`` of this trace wrote is accumulated into (the same access, or one whose
  elements, at constant positions, overlap it);
* otherwise, when the instruction sits in loops that enclose neither the destination's definition nor are
  named by its index (reduction loops: ``for k: nc_matmul(dst=psum, ...)``), the first iteration overwrites and
  the others add. This is the legacy PSUM idiom: the destination's allocation becomes ``nl.zeros`` (which the
  lower-language pass folds into the first matmul of the group, no memset) when it is the whole tensor allocated
  just before the loop, else a zero fill of the region is placed before the outermost reduction loop;
* otherwise it overwrites.
"""

from __future__ import annotations

import weakref

from nki_dsl.current.isa.destination import dst_access, engine_arg, write
from nki_dsl.current.isa.enums import matmul_perf_mode, member
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Access, Loop, Op
from nki_dsl.ir.types import Buffer
from nki_dsl.isa import matmul as legacy
from nki_dsl.isa import mx as legacy_mx
from nki_dsl.language.memory import assign
from nki_dsl.trace.builder import caller_loc, current

# builder -> {tensor name: destination accesses written by nc_matmul in that trace}
_WRITTEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None):  # fmt: skip
    """``dst[M, N] (PSUM) = stationary[K, M].T @ moving[K, N]``, fp32 accumulation; see the module docstring
    for ``accumulate``."""
    api = "nisa.nc_matmul"
    target = dst_access(api, dst)
    if accumulate not in (None, True, False):
        raise NkiApiError(f"accumulate= must be None, True or False, got {accumulate!r}", caller_loc(), api)
    tile = legacy.nc_matmul(
        stationary, moving, is_stationary_onezero=is_stationary_onezero, is_moving_onezero=is_moving_onezero,
        is_transpose=is_transpose, tile_position=tile_position, tile_size=tile_size,
        perf_mode=member(api, "perf_mode", perf_mode, matmul_perf_mode),
    )  # fmt: skip
    _accumulate_into(api, dst, target, tile, accumulate)


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):  # fmt: skip
    """``dst[M, N] (PSUM)`` = the MX matmul of packed ``stationary [P, M]`` and ``moving [P, N]`` with their e8m0
    scales (reference/nki.md §2.7 nc_matmul_mx; NC-v4); ``accumulate`` as for ``nc_matmul``."""
    api = "nisa.nc_matmul_mx"
    target = dst_access(api, dst)
    if accumulate not in (None, True, False):
        raise NkiApiError(f"accumulate= must be None, True or False, got {accumulate!r}", caller_loc(), api)
    tile = legacy_mx.nc_matmul_mx(stationary, moving, stationary_scale, moving_scale,
                                  tile_position=tile_position or (), tile_size=tile_size or ())  # fmt: skip
    _accumulate_into(api, dst, target, tile, accumulate)


def _accumulate_into(api: str, dst, target: Access, tile, accumulate) -> None:
    builder = current(api)
    written = _WRITTEN.setdefault(builder, {}).setdefault(target.tensor.name, [])
    if accumulate is None:
        if any(_overlap(target, a) for a in written):
            accumulate = True
        else:
            reduction = _reduction_loops(builder, target)
            if reduction:
                _zero_before(builder, target, reduction[0])
                accumulate = True
    written.append(target)
    write(api, dst, tile, "add" if accumulate else "none")


def _overlap(a: Access, b: Access) -> bool:
    """Do two accesses of one tensor share an element? Identical accesses do; otherwise only accesses at
    constant positions (no loop or program index) are compared, box by box."""
    if a.index == b.index and a.shape == b.shape:
        return True
    boxes = [_box(x) for x in (a, b)]
    if None in boxes:
        return False
    return all(lo1 <= hi2 and lo2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(*boxes))


def _box(a: Access) -> list[tuple[int, int]] | None:
    box = []
    for expr in a.index:
        lo = hi = expr.const
        for var, coef in expr.terms:
            if not var.startswith("d"):
                return None  # a loop or program index: position unknown at trace time
            span = coef * (a.shape[int(var[1:])] - 1)
            lo, hi = lo + min(0, span), hi + max(0, span)
        box.append((lo, hi))
    return box


def _reduction_loops(builder, target: Access) -> list[Loop]:
    """The open loops inside the destination's definition that its index does not name."""
    defined = _definition_depth(builder, target.tensor)
    used = target.vars()
    return [lp for lp in builder.loops[defined:] if lp.var not in used]


def _definition_depth(builder, tensor) -> int:
    """How many of the open loops enclose the op that defined ``tensor`` (0 for parameters)."""
    for depth, body in enumerate(_open_bodies(builder)):
        if any(isinstance(s, Op) and s.result is tensor for s in body):
            return depth
    return 0


def _open_bodies(builder) -> list[list]:
    """The kernel body and the body of every open loop, outermost first."""
    return [builder.kernel.body, *(lp.body for lp in builder.loops)]


def _zero_before(builder, target: Access, loop: Loop) -> None:
    """Zero the destination region before ``loop`` (the outermost reduction loop)."""
    depth = builder.loops.index(loop)
    parent = _open_bodies(builder)[depth]
    at = parent.index(loop)
    alloc = next((s for s in parent[:at] if isinstance(s, Op) and s.result is target.tensor), None)
    untouched = alloc is not None and not any(_touches(s, target.tensor) for s in parent[parent.index(alloc) + 1:at])
    if (alloc is not None and alloc.name == "alloc" and alloc.mask is None and target.is_full and untouched
            and target.tensor.type.buffer == Buffer.PSUM and not alloc.attrs.get("address")):  # fmt: skip
        alloc.name, alloc.attrs = "nl.full", {"value": 0.0}  # the legacy accumulator: acc = nl.zeros(..., psum)
        return
    assign(target, 0.0)  # emitted into the innermost open region; moved before the loop
    zero = builder.loops[-1].body.pop() if builder.loops else builder.kernel.body.pop()
    parent.insert(at, zero)


def _touches(stmt, tensor) -> bool:
    if isinstance(stmt, Loop):
        return any(_touches(s, tensor) for s in stmt.body)
    return stmt.result is tensor or any(isinstance(v, Access) and v.tensor is tensor for v in stmt.operands.values())


def nc_transpose(dst, data, engine=None, name=None):
    """``dst = data.T`` (free axes flattened): on the Tensor engine into PSUM (up to 128x128), or on the Vector
    engine (up to 32x32). Without ``engine=``, a PSUM ``dst`` picks the Tensor engine and an SBUF one the Vector
    engine when the tile fits it."""
    api = "nisa.nc_transpose"
    target = dst_access(api, dst)
    chosen = engine_arg(api, engine) if engine is not None else "unknown"
    if chosen == "unknown":
        small = all(s <= legacy.VECTOR_TRANSPOSE_MAX for s in target.shape)
        chosen = "tensor" if target.tensor.type.buffer == Buffer.PSUM or not small else "vector"
    write(api, dst, legacy.nc_transpose(data, dtype=target.tensor.type.dtype, engine=chosen))
