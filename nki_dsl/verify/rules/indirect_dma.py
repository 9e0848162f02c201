"""Rule ``indirect-dma``: a DMA whose HBM rows come from an on-chip index tile (``nl.load(data[idx, i_f])``,
``nl.store(data[idx, i_f], value=t)``, ``nisa.dma_copy``; reference/nki.md §2.7 "Indirect DMA", ir/indirect.py)
has the form the backends read:

* ``indices`` and ``indirect_dim`` come together, and exactly one side of the DMA is in HBM (the side picked);
* ``indirect_dim`` is a dimension of that HBM tensor, and the access's index there is the placeholder ``d0``
  (partition ``p`` moves row ``indices[p]``), which no other index of the access uses;
* the index tile holds 32-bit integers, one per partition of the tile moved (``[P, 1]``);
* a mask only on a gather, and only over its partitions (``d0``, with loop indices and program ids): the
  masked-off partitions move nothing and their indices are not checked (a ragged last tile). A scatter takes
  no mask.
* ``oob_mode = skip`` (drop an out-of-range row's transfer instead of raising, §2.7 dma_copy) not on a
  scatter-add: the legacy ``dma_copy(dst_rmw_op=np.add)`` with dynamic offsets has "oob error mode only" (§2.7
  "Indirect DMA").

The rows themselves are data: they are checked against the dimension when the DMA runs (a clear error naming the
line, the partition, the index value and the dimension), not here.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir import indirect
from nki_dsl.ir.affine import var_kind
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "indirect-dma"
INDEX_DTYPES = ("int32", "uint32")  # §2.7: "an SBUF int32 index tile"; dma_copy's vector_offset takes u/int32


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op = site.op
        has_indices, has_dim = indirect.INDICES in op.operands, indirect.DIM in op.attrs
        if not (has_indices or has_dim):
            continue
        problem = _problem(op, has_indices, has_dim)
        if problem:
            found.append(d.diagnostic(op, RULE, problem))
    return found


def _problem(op, has_indices: bool, has_dim: bool) -> str | None:
    if has_indices != has_dim:
        return "an indirect DMA carries both operand 'indices' and attribute 'indirect_dim', or neither"
    idx = op.operands[indirect.INDICES]
    side = indirect.hbm_operand(op)
    sides = [n for n in ("src", "dst") if isinstance(op.operands.get(n), Access)]
    in_hbm = [n for n in sides if not op.operands[n].tensor.type.buffer.on_chip]
    if op.result is not None and op.result.type.buffer.on_chip:
        sides.append("result")
    if side is None or len(in_hbm) != 1:
        return (f"an indirect DMA moves between HBM and an on-chip tile: exactly one side is in HBM, here "
                f"{len(in_hbm)} of {', '.join(repr(s) for s in sides)}")
    a = op.operands[side]
    dim = op.attrs[indirect.DIM]
    rank = len(a.tensor.type.shape)
    if not isinstance(dim, int) or not 0 <= dim < rank:
        return f"indirect_dim = {dim} is not a dimension of {d.tensor(a.tensor)} (0..{rank - 1})"
    if a.index[dim] != indirect.PLACEHOLDER or any("d0" in e.vars() for k, e in enumerate(a.index) if k != dim):
        return (f"{d.operand(side, a)} must index dimension {dim} with the placeholder d0 (the partition whose "
                f"row the index tile names) and use d0 nowhere else")
    name = dtypes.get(idx.tensor.type.dtype).name
    if name not in INDEX_DTYPES:
        return (f"{d.operand('indices', idx)} holds {name}; the rows of an indirect DMA come from an "
                f"{' or '.join(INDEX_DTYPES)} tile")
    if idx.shape[0] != a.shape[0] or any(s != 1 for s in idx.shape[1:]):
        return (f"{d.operand('indices', idx)} must hold one row per partition of the {a.shape[0]}-partition tile "
                f"moved: shape [{a.shape[0]}, 1]")
    if op.attrs.get("oob_mode") == "skip" and op.attrs.get("dst_rmw_op", "none") != "none":
        return ("oob_mode = skip cannot drop rows of a scatter-add (dst_rmw_op = add): its out-of-range indices "
                "are an error (oob_mode = error)")
    if op.mask is not None:
        if side == "dst":
            return "a scatter DMA takes no mask: scatter whole tiles (name the rows to keep with the indices)"
        axes = {v for c in op.mask.constraints for v, _ in c.terms if var_kind(v) == "axis"}
        if axes - {"d0"}:
            return (f"a gather's mask may only cut its partitions (d0), not axes {sorted(axes - {'d0'})}: the rows "
                    f"are moved whole; mask the op that uses them")
    return None
