"""The memory an access touches, as Python source the unrolled stream evaluates per instruction.

On-chip data is tracked by address, so tensors the allocator placed in the same bytes (lifetime sharing, rotating
copies) get WAR/WAW dependences between them: a region is ``(buffer key, (p_lo, p_hi, b_lo, b_hi))``, the
partitions and the bytes within each partition, from the ``Placement`` (``partition_start``, ``byte_offset``, the
rotating copy's ``copy_offset``) and the access's box in the tensor. The byte range is the bounding range of the
box's free dimensions in row-major order (conservative for strided accesses: it may add a dependence, never drop
one).

HBM is linear memory no two tensors share, so a region there is ``(tensor key, box in the tensor's index space)``;
HBM views (``hbm.reshape``, ``hbm.view``: ir/hbm_views.py) share their root's key and touch its whole storage
(conservative), so a write through a view and an access of its root, or of another view of it, are ordered.

Index expressions are affine in loop indices and program ids, which the generated code has as local variables
named as in the IR (``i3``, ``pid0``), so a region costs a few integer operations per instruction.
"""

from __future__ import annotations

import math

from nki_dsl import dtypes
from nki_dsl.ir.affine import Affine, var_kind
from nki_dsl.ir.hbm_views import VIEW_OPS
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op, Tensor
from nki_dsl.ir.source_safe import py_int, py_var

SBUF_KEY, PSUM_KEY = 0, 1  # keys of the two on-chip address spaces; HBM tensors get keys from FIRST_HBM_KEY up
FIRST_HBM_KEY = 2
ON_CHIP_KEYS = {"sbuf": SBUF_KEY, "psum": PSUM_KEY}


def whole_box(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The box ``(lo0, hi0, lo1, hi1, ...)`` of a whole tensor."""
    out: list[int] = []
    for s in shape:
        out += [0, s]
    return tuple(out)


def _affine_source(e: Affine, const: int) -> str:
    """``const`` plus the non-axis terms of ``e`` as source (names and numbers checked: ir/source_safe.py)."""
    parts = [py_var(v) if c == 1 else f"{py_int(c)}*{py_var(v)}" for v, c in e.terms if var_kind(v) != "axis"]
    if const or not parts:
        parts.append(py_int(const))
    return " + ".join(parts)


def _axis_extremes(access: Access, e: Affine) -> tuple[int, int]:
    """The constant offsets of the lowest and highest element ``e`` reaches over the access axes."""
    lo = hi = e.const
    for v, c in e.terms:
        if var_kind(v) == "axis":
            ext = access.shape[int(v[1:])] - 1
            lo += min(0, c * ext)
            hi += max(0, c * ext)
    return lo, hi


class AddressMap:
    """Region sources for the accesses of lowered ``kernel`` under ``allocation``."""

    def __init__(self, kernel: Kernel, allocation):
        self.allocation = allocation
        self.roots: dict[str, Tensor] = {}  # HBM tensor name -> the storage it views (itself unless a view)
        self.keys: dict[str, int] = {}  # HBM storage name -> key
        self.loops: dict[str, Loop] = {}
        for p in kernel.params:
            self._hbm(p, p)
        for stmt, loops in kernel.walk():
            for lp in loops:
                self.loops[lp.var] = lp
            if isinstance(stmt, Op) and stmt.result is not None and not stmt.result.type.buffer.on_chip:
                src = stmt.operands.get("x") if stmt.name in VIEW_OPS else None
                self._hbm(stmt.result, self.roots[src.tensor.name] if isinstance(src, Access) else stmt.result)

    def _hbm(self, t: Tensor, root: Tensor) -> None:
        self.roots[t.name] = root
        self.keys.setdefault(root.name, len(self.keys) + FIRST_HBM_KEY)

    def key_of(self, tensor_name: str) -> int:
        """The region key of an HBM tensor (its storage's)."""
        return self.keys[self.roots[tensor_name].name]

    def source(self, access: Access, clip: bool) -> str:
        ty = access.tensor.type
        if not ty.buffer.on_chip:
            return self._hbm_source(access, clip)
        return self._on_chip_source(access, clip)

    # -- HBM: a box in the tensor's index space ---------------------------------------------------------------------
    def _hbm_source(self, access: Access, clip: bool) -> str:
        root = self.roots[access.tensor.name]
        key = self.keys[root.name]
        if root is not access.tensor:  # a reshaped view: the whole storage
            return f"({key}, {whole_box(root.type.shape)!r})"
        parts = []
        for d, e in enumerate(access.index):
            lo, hi = _axis_extremes(access, e)
            lo_s, hi_s = _affine_source(e, lo), _affine_source(e, hi + 1)
            if clip:  # masked ops may index past the tensor where the mask is off; what they touch is inside it
                lo_s, hi_s = f"max(0, {lo_s})", f"min({access.tensor.type.shape[d]}, {hi_s})"
            parts += [lo_s, hi_s]
        return f"({key}, ({', '.join(parts)},))"

    # -- SBUF / PSUM: partitions x bytes at the placement ----------------------------------------------------------
    def _on_chip_source(self, access: Access, clip: bool) -> str:
        ty = access.tensor.type
        p = self.allocation.placements.get(access.tensor.name)
        if p is None:
            raise ValueError(f"on-chip tensor %{access.tensor.name} has no placement in the allocation")
        if p.blocks:
            return self._block_source(access, p, clip)
        item = dtypes.get(ty.dtype).itemsize
        par = ty.par_axis
        # A block-local tensor's blocks share one block's space: block indices do not move the address.
        free = [k for k in range(len(ty.shape)) if k != par and not (p.shared_blocks and k < par)]
        strides = {k: item * math.prod(ty.shape[j] for j in free if j > k) for k in free}
        base = str(p.byte_offset)
        if p.buffers > 1:  # the copy of the flattened iteration of the loops it turns with (allocate.Placement)
            terms = []
            for var, weight in p.turns:
                lp, loop = self.loops[var], py_var(var, "loop")
                it = loop if (lp.start, lp.step) == (0, 1) else f"(({loop} - {py_int(lp.start)}) // {py_int(lp.step)})"
                terms.append(it if weight == 1 else f"{py_int(weight)} * {it}")
            base += f" + {py_int(p.bytes_per_partition)} * (({' + '.join(terms)}) % {py_int(p.buffers)})"
        e_par = access.index[par]
        plo, phi = _axis_extremes(access, e_par)
        if not clip:
            # unmasked: lo and hi are affine with the same variable terms, so hi = lo + a constant span
            b_terms = sum((Affine.of(**{v: c * strides[k] for v, c in access.index[k].terms if var_kind(v) != "axis"})
                           for k in free), Affine())  # fmt: skip
            b_lo = sum(_axis_extremes(access, access.index[k])[0] * strides[k] for k in free)
            b_hi = sum(_axis_extremes(access, access.index[k])[1] * strides[k] for k in free) + item
            p_src = _affine_source(e_par, p.partition_start + plo)
            b_src = f"{base} + {_affine_source(b_terms, b_lo)}"
            key = ON_CHIP_KEYS[p.buffer]
            return f"({key}, ((_p := {p_src}), _p + {phi - plo + 1}, (_b := {b_src}), _b + {b_hi - b_lo}))"
        # masked: clip every dimension to the tensor first, then convert
        lo_parts, hi_parts = [], []
        for k in free:
            e = access.index[k]
            lo, hi = _axis_extremes(access, e)
            lo_parts.append(f"{strides[k]} * max(0, {_affine_source(e, lo)})")
            hi_parts.append(f"{strides[k]} * (min({ty.shape[k]}, {_affine_source(e, hi + 1)}) - 1)")
        p_lo = f"{p.partition_start} + max(0, {_affine_source(e_par, plo)})"
        p_hi = f"{p.partition_start} + min({ty.shape[par]}, {_affine_source(e_par, phi + 1)})"
        b_lo = " + ".join([base] + lo_parts)
        b_hi = " + ".join([base] + hi_parts + [str(item)])
        return f"({ON_CHIP_KEYS[p.buffer]}, ({p_lo}, {p_hi}, {b_lo}, {b_hi}))"

    def _block_source(self, access: Access, p, clip: bool) -> str:
        """A directly allocated tensor whose blocks lie where the kernel put them (``Placement.blocks``): an access
        to one block (block indices free of access axes) looks its block's (partition, byte) up in the table and
        adds its box within the block; an access spanning blocks, or masked, takes every block's space or the
        whole block (conservative: a dependence may be added, never dropped)."""
        ty = access.tensor.type
        key = ON_CHIP_KEYS[p.buffer]
        nb, item = ty.par_axis, dtypes.get(ty.dtype).itemsize
        block_index = access.index[:nb]
        if any(var_kind(v) == "axis" for e in block_index for v, _ in e.terms):
            return f"({key}, ({p.partition_start}, {p.partition_start + p.partitions}, {p.byte_offset}, " \
                   f"{p.byte_offset + p.bytes_per_partition}))"
        lin, stride = Affine(), 1
        for k in reversed(range(nb)):
            lin = lin + block_index[k] * stride
            stride *= ty.shape[k]
        table = "(" + ", ".join(f"({py_int(a)}, {py_int(b)})" for a, b in p.blocks) + ",)"
        at = f"(_q := {table}[{_affine_source(lin, lin.const)}])"
        free = list(range(nb + 1, len(ty.shape)))
        block_bytes = item * math.prod(ty.shape[k] for k in free)
        if clip:
            return f"({key}, ({at}[0], _q[0] + {ty.partitions}, _q[1], _q[1] + {block_bytes}))"
        strides = {k: item * math.prod(ty.shape[j] for j in free if j > k) for k in free}
        e_par = access.index[nb]
        plo, phi = _axis_extremes(access, e_par)
        b_terms = sum((Affine.of(**{v: c * strides[k] for v, c in access.index[k].terms if var_kind(v) != "axis"})
                       for k in free), Affine())  # fmt: skip
        b_lo = sum(_axis_extremes(access, access.index[k])[0] * strides[k] for k in free)
        b_hi = sum(_axis_extremes(access, access.index[k])[1] * strides[k] for k in free) + item
        p_src = f"{at}[0] + {_affine_source(e_par, plo)}"
        b_src = f"_q[1] + {_affine_source(b_terms, b_lo)}"
        return f"({key}, ((_p := {p_src}), _p + {phi - plo + 1}, (_b := {b_src}), _b + {b_hi - b_lo}))"
