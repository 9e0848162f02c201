"""Legacy ``nl`` calls composed of other instructions: ``shared_identity_matrix`` and ``atomic_rmw``
(reference/nki.md §2.2), and ``gather_flattened`` and ``all_reduce``, which are refused.

* ``shared_identity_matrix(n, dtype)``: an ``[n, n]`` SBUF identity, ``iota`` of ``p - j`` compared with 0 (NKI
  deduplicates it per dtype; here each call builds its own, with the same values).
* ``atomic_rmw(dst, value, op)``: ``dst = op(dst, value)`` in HBM as one DMA with a read-modify-write, the
  ``dma_copy(..., dst_rmw_op=np.add)`` the reference documents; ``dst`` may be indexed with an on-chip index tile
  (a scatter-add). ``add`` is the one read-modify-write the DMA model has; other ops are refused.
* ``gather_flattened(data, indices)``: a per-partition gather over an SBUF tile's flattened free dimensions. No
  instruction in this project gathers within partitions (``nisa.local_gather`` is not modelled either), so it is
  refused, naming the gather this project has: an indirect DMA from HBM (``nl.load(data[idx_tile, i_f])``).
* ``all_reduce(x, op, program_axes, ...)``: a collective across the programs of a launch. The backends run a
  launch's programs one after another, so a value that waits on the other programs cannot be modelled; refused.
"""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir import functions
from nki_dsl.ir.affine import Affine
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.tensor import build_op, indirect_operands


def shared_identity_matrix(n, dtype="uint8", **kwargs):
    """An ``[n, n]`` SBUF tile with ones on the diagonal and zeros elsewhere, of ``dtype``."""
    n = int(n)
    diff = IndexValue(Affine.var("d0") + Affine.var("d1", -1), (n, n))  # p - j over the tile
    p_minus_j = build_op("nisa.iota", {}, {"expr": diff.expr, "shape": (n, n)}, dtype="int32")
    return build_op("nl.equal", {"x": p_minus_j, "y": 0}, dtype=dtype)


def atomic_rmw(dst, value, op, *, mask=None):
    """``dst[...] = op(dst[...], value)`` in HBM, atomically (one DMA read-modify-write); ``op`` is ``np.add``
    (or ``nl.add``)."""
    api = "nl.atomic_rmw"
    try:
        rmw = functions.function_name(op, ("add",), "op")
    except NkiApiError as e:
        raise NkiApiError(f"{e.bare_message}; the DMA read-modify-write this project models adds (dst_rmw_op=np.add)",
                          caller_loc(), api) from None  # fmt: skip
    operands = {"dst": dst, "src": value}
    attrs = {"dst_rmw_op": rmw, "oob_mode": "error", "dge_mode": "unknown"}
    got = indirect_operands(dst)
    if got is not None:
        operands["dst"], extra = got
        operands["indices"] = extra.pop("indices")
        attrs.update(extra)
    build_op("nisa.dma_copy", operands, attrs, mask=mask)


def gather_flattened(data, indices, *, mask=None, dtype=None, **kwargs):
    raise NkiApiError("gather_flattened (a gather within each partition of an SBUF tile) is not modelled: no "
                      "instruction here gathers within partitions; gather rows from HBM with an indirect DMA "
                      "instead (nl.load(data[idx_tile, i_f]) with an int32 index tile)", caller_loc(),
                      "nl.gather_flattened")  # fmt: skip


def all_reduce(x, op, program_axes, *, dtype=None, mask=None, parallel_reduce=True, asynchronous=False, **kwargs):
    raise NkiApiError("all_reduce (a collective across the programs of a launch) is not modelled: the backends run "
                      "a launch's programs one after another; reduce across programs in HBM after the launch",
                      caller_loc(), "nl.all_reduce")  # fmt: skip
