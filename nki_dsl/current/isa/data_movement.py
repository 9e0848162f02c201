"""Data movement in the current API: ``dma_copy``, ``dma_transpose``, ``tensor_copy``, ``tensor_copy_predicated``
and ``memset`` (reference/nki.md §2.7 "Data movement")."""

from __future__ import annotations

import functools
import inspect

from nki_dsl.current.isa.destination import dst_access, dst_dtype, engine_arg, write
from nki_dsl.current.isa.enums import dge_mode, engine, member, oob_mode
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer
from nki_dsl.isa import dma as legacy_dma
from nki_dsl.isa import vector_alu as legacy_alu
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.runtime_offset import takes_runtime_offsets
from nki_dsl.trace.tensor import IndirectView, NkiTensor, is_tile


def _count(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _no_skip_at_a_register_offset(fn):
    """``oob_mode=skip`` is modelled for ``vector_offset`` rows (``_indirect_dma_copy``); a ``scalar_offset`` view's
    register is checked against its declared range when the loop reading it runs (trace/runtime_offset.py), which
    raises, so ``skip`` there is refused rather than silently read as ``error``."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs).arguments
        registered = [v for v in (bound.get("dst"), bound.get("src")) if getattr(type(v), "runtime_offset", False)]
        if registered and bound.get("oob_mode") is not None and \
                member("nisa.dma_copy", "oob_mode", bound["oob_mode"], oob_mode) == "skip":  # fmt: skip
            raise NkiApiError("oob_mode=skip with a scalar_offset (register) address is not modelled: an offset out "
                              "of range raises (oob_mode=error); skip is modelled for vector_offset gathers and "
                              "scatters", caller_loc(), "nisa.dma_copy")  # fmt: skip
        return fn(*args, **kwargs)

    return call


@_no_skip_at_a_register_offset
@takes_runtime_offsets("nisa.dma_copy")
def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             name=None):  # fmt: skip
    """``dst = src`` on a DMA queue, converting to ``dst``'s dtype. Element counts must match; shapes may differ
    when one side is a whole HBM tensor (it is viewed in the other's shape, row-major). PSUM cannot be read
    (0.3.0); ``priority`` (0-3) and ``engine`` (sync or scalar, hwdge only) are accepted for the cost model's
    sake and do not change the result."""
    api = "nisa.dma_copy"
    if isinstance(dst, IndirectView) or isinstance(src, IndirectView):  # hbm.ap(..., vector_offset=idx)
        _indirect_dma_copy(api, dst, src, oob_mode, dge_mode)
        return
    target = dst_access(api, dst)
    if not is_tile(src):
        raise NkiApiError(f"'src' must be a tensor, got {type(src).__name__}", caller_loc(), api)
    source = src.access()
    if source.tensor.type.buffer == Buffer.PSUM:
        raise NkiApiError("'src' is in PSUM, which DMA cannot read (since NKI 0.3.0); copy it to SBUF with "
                          "nisa.tensor_copy first", caller_loc(), api)  # fmt: skip
    if priority is not None and priority not in (0, 1, 2, 3):
        raise NkiApiError(f"priority={priority!r} must be 0..3 (0 highest)", caller_loc(), api)
    chosen = engine_arg(api, engine)
    mode = member(api, "dge_mode", dge_mode, globals()["dge_mode"])
    if chosen in ("sync", "scalar") and mode != "hwdge":
        raise NkiApiError(f"engine={chosen} triggers a DMA only with dge_mode=hwdge", caller_loc(), api)
    if mode == "hwdge" and target.tensor.type.dtype != source.tensor.type.dtype:
        raise NkiApiError(f"dge_mode=hwdge copies raw bytes: 'src' ({source.tensor.type.dtype}) and 'dst' "
                          f"({target.tensor.type.dtype}) must have one dtype (§2.7 dma_copy)",
                          caller_loc(), api)  # fmt: skip
    if tuple(target.shape) != tuple(source.shape):
        if _count(target.shape) != _count(source.shape):
            raise NkiApiError(f"'dst' {list(target.shape)} and 'src' {list(source.shape)} hold different numbers of "
                              f"elements", caller_loc(), api)  # fmt: skip
        if _whole_hbm(src):
            src = src.reshape(tuple(target.shape))
        elif _whole_hbm(dst):
            dst = dst.reshape(tuple(source.shape))
        else:
            raise NkiApiError(f"'dst' {list(target.shape)} and 'src' {list(source.shape)} differ in shape; reshape "
                              f"one of them (t.reshape(...)) first", caller_loc(), api)  # fmt: skip
    legacy_dma.dma_copy(dst=dst, src=src, oob_mode=member(api, "oob_mode", oob_mode, globals()["oob_mode"]),
                        dge_mode=mode)  # fmt: skip


def _indirect_dma_copy(api: str, dst, src, oob, dge) -> None:
    """A gather (``src``) or scatter (``dst``) through ``hbm.ap(pattern, vector_offset=idx)``
    (trace/vector_offset.py): the software DGE's job (§2.7 dma_copy: ``swdge`` is "only mode for vector_offset
    gather/scatter"). Every index is checked when it runs: one out of range raises (``oob_mode.error``), or its
    partition's transfer is dropped (``oob_mode.skip``: a gather leaves that partition of ``dst`` as it was, a
    scatter writes nothing for it; backends/*/indirect.py)."""
    mode = member(api, "dge_mode", dge, dge_mode)
    if mode not in ("swdge", "unknown"):
        raise NkiApiError(f"dge_mode={mode}: a vector_offset gather or scatter needs the software DGE "
                          f"(dge_mode=swdge or unknown)", caller_loc(), api)  # fmt: skip
    oob = member(api, "oob_mode", oob, oob_mode)
    for name, side in (("dst", dst), ("src", src)):
        if not is_tile(side):
            raise NkiApiError(f"'{name}' must be a tensor, got {type(side).__name__}", caller_loc(), api)
    if isinstance(dst, IndirectView) and isinstance(src, IndirectView):
        raise NkiApiError("only one side of a DMA can pick its rows with a vector offset", caller_loc(), api)
    if tuple(dst.shape) != tuple(src.shape):
        raise NkiApiError(f"'dst' {list(dst.shape)} and 'src' {list(src.shape)} differ in shape", caller_loc(), api)
    legacy_dma.dma_copy(dst=dst, src=src, oob_mode=oob, dge_mode=mode)


def _whole_hbm(t) -> bool:
    return isinstance(t, NkiTensor) and not t.tensor.type.buffer.on_chip


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error, name=None):
    """``dst`` (SBUF) = ``src`` with its axes permuted by a DMA: out axis i is src axis ``axes[i]``."""
    api = "nisa.dma_transpose"
    member(api, "dge_mode", dge_mode, globals()["dge_mode"])
    member(api, "oob_mode", oob_mode, globals()["oob_mode"])
    write(api, dst, legacy_dma.dma_transpose(src, axes=axes, dtype=dst_dtype(api, dst)))


@takes_runtime_offsets("nisa.tensor_copy")
def tensor_copy(dst, src, engine=engine.unknown, name=None):
    """``dst = src`` on the Vector (default), Scalar or GpSimd engine, converting to ``dst``'s dtype."""
    api = "nisa.tensor_copy"
    write(api, dst, legacy_alu.tensor_copy(src, dtype=dst_dtype(api, dst), engine=engine_arg(api, engine)))


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """``dst = src`` where ``predicate`` is nonzero (zero with ``reverse_pred``); elsewhere ``dst`` keeps its
    values (a partial write)."""
    dst_access("nisa.tensor_copy_predicated", dst)
    legacy_alu.tensor_copy_predicated(src=src, dst=dst, predicate=predicate, reverse_pred=reverse_pred)


def memset(dst, value, engine=engine.unknown, name=None):
    """Fill ``dst`` with the number ``value`` (Vector or GpSimd engine)."""
    api = "nisa.memset"
    target = dst_access(api, dst)
    tile = legacy_alu.memset(tuple(target.shape), value, dst_dtype(api, dst), engine=engine_arg(api, engine))
    write(api, dst, tile)
