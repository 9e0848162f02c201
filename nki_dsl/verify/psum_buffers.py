"""Physical PSUM buffers: which banks are occupied over which stretch of the program (reference/nki.md §1.1: 8
banks of 2 KiB per partition; a PSUM tile takes whole banks). The ``psum-banks`` rule sums them where they peak,
and the allocator (``passes/allocate.py``) places the same buffers, so the two agree on what fits.

A PSUM tensor is one buffer over its live range (``Program.live_ranges``), ``blocks x ceil(tile bytes / 2 KiB)``
banks, except:

* **written straight into a destination**: a result whose only use is the ``assign`` right after it
  (``s_psum[i] = nisa.nc_matmul(...)``) takes no space; the instruction writes the destination (the allocator
  fuses the pair the same way, ``passes/engines.fused_writes``).
* **block-local**: a tensor with leading block dimensions (``nl.par_dim``) defined without contents (``alloc``)
  whose every access picks one block by loop indices only, the same block expression everywhere, with distinct
  blocks in distinct iterations (``s_psum[i_q, i_kv]`` inside loops over ``i_q`` and ``i_kv``). Each block is
  written and consumed within one iteration of the innermost loop that picks it, so the blocks' live ranges are
  disjoint and they share one block's banks (``BlockLocal``), as the compiler's allocator rotates them.
* **placed by the kernel**: a tensor with a chosen placement occupies a fixed set of banks (``fixed_banks``);
  tensors on the same banks share them by design and count once. The placement is the ``address`` attribute
  (a start partition and byte offset per block: direct allocation, ``ncc.psum.mod_alloc``, or the current API's
  ``address=``), read through ``verify/placements.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.ir.affine import Affine, var_kind
from nki_dsl.ir.nodes import Loop, Op, Tensor
from nki_dsl.ir.types import TensorType
from nki_dsl.targets import Target
from nki_dsl.verify.integer_sets import at_least, equal, has_point
from nki_dsl.verify.placements import banks_of
from nki_dsl.verify.program import Live, Program, Site, common_depth


@dataclass(frozen=True)
class BlockLocal:
    """A block-local tensor: every access picks block ``index`` (affine in loop indices); ``loop`` is the
    innermost loop whose index the block depends on: one block is in use per iteration of it."""

    index: tuple[Affine, ...]
    loop: Loop
    rotate: Loop | None = None  # the innermost loop picking the block that iterates: copies may rotate with it


@dataclass(frozen=True)
class PsumBuffer:
    """PSUM occupied by ``live.tensor`` over ``live``: ``banks`` banks, anywhere (``fixed`` None) or exactly the
    banks in ``fixed``. ``block_local`` is set when its blocks share one block's banks."""

    live: Live
    banks: int
    fixed: frozenset[int] | None = None
    block_local: BlockLocal | None = None


def tile_banks(t: TensorType, bank_bytes: int) -> int:
    """Banks one block of ``t`` takes: its free bytes rounded up to whole banks."""
    per_block = t.bytes_per_partition // max(1, _blocks(t))
    return max(1, -(-per_block // bank_bytes))


def tensor_banks(t: TensorType, bank_bytes: int) -> int:
    """Banks all blocks of ``t`` take when each has its own."""
    return _blocks(t) * tile_banks(t, bank_bytes)


def _blocks(t: TensorType) -> int:
    n = 1
    for s in t.block_shape:
        n *= s
    return n


def fixed_banks(op: Op, t: TensorType, bank_bytes: int) -> frozenset[int] | None:
    """The banks a tensor the kernel placed itself occupies (None when the allocator places it): the banks its
    blocks' placements touch (``verify/placements.banks_of``: the ``address`` attribute, a (partition, byte)
    pair per block; blocks sharing a bank by design count it once)."""
    return banks_of(op, bank_bytes)


def psum_buffers(prog: Program, target: Target) -> list[PsumBuffer]:
    """The physical PSUM buffers of the program, one per PSUM tensor that takes space."""
    bank = target.psum_bank_bytes
    out = []
    for live in prog.live_ranges("psum"):
        t, site = live.tensor, live.site
        if written_into_destination(prog, t, site):
            continue
        fixed = fixed_banks(site.op, t.type, bank)
        if fixed is not None:
            out.append(PsumBuffer(live, len(fixed), fixed))
            continue
        local = block_local(prog, t, site)
        if local is not None:
            start, end = block_range(prog, t, local.loop)
            first = min(prog.uses[t], key=lambda u: u.site.pos).site  # where one block's use begins
            out.append(PsumBuffer(Live(t, first, start, end), tile_banks(t.type, bank), block_local=local))
            continue
        out.append(PsumBuffer(live, tensor_banks(t.type, bank)))
    return out


@dataclass(frozen=True)
class BankPeak:
    """The most banks in use at one program position (``total``), the buffers live there (heaviest first) and the
    op that brings use up to it (``site``, where a diagnostic points; None when nothing is live)."""

    total: int
    live: list[PsumBuffer]
    site: Site | None


def peak_banks(buffers: list[PsumBuffer]) -> BankPeak:
    """Where the banks in use peak: the floating buffers' banks plus the distinct fixed banks live at one program
    position. One sweep over start and end events (frees sort before starts at the same position)."""
    events = []
    for b in buffers:
        events.append((b.live.start, 1, b))
        events.append((b.live.end + 1, 0, b))
    events.sort(key=lambda e: (e[0], e[1]))
    floating, holders = 0, {}  # bank -> how many live fixed buffers hold it
    best, best_at = 0, -1
    for pos, starts, b in events:
        sign = 1 if starts else -1
        if b.fixed is None:
            floating += sign * b.banks
        else:
            for bank in b.fixed:
                holders[bank] = holders.get(bank, 0) + sign
                if not holders[bank]:
                    del holders[bank]
        total = floating + len(holders)
        if starts and total > best:
            best, best_at = total, pos
    live = [b for b in buffers if b.live.start <= best_at <= b.live.end]
    live.sort(key=lambda b: (-b.banks, b.live.start))
    site = max(live, key=lambda b: b.live.start).live.site if live else None
    return BankPeak(best, live, site)


# -- results written into their destination -------------------------------------------------------------------------


def written_into_destination(prog: Program, t: Tensor, site: Site) -> bool:
    """``t`` (made by the op at ``site``) is used only by the ``assign`` right after it, as its source: the
    instruction writes the assign's destination directly."""
    uses = prog.uses.get(t, ())
    if len(uses) != 1 or uses[0].name != "src" or uses[0].site.op.name != "assign":
        return False
    nxt = uses[0].site
    return nxt.pos == site.pos + 1 and nxt.loops == site.loops


# -- block-local tensors --------------------------------------------------------------------------------------------


def block_local(prog: Program, t: Tensor, site: Site) -> BlockLocal | None:
    """``t``'s block-local facts, or None when its blocks may be live together (see the module docstring)."""
    nb = t.type.par_axis
    uses = prog.uses.get(t, ())
    if nb == 0 or site.op.name != "alloc" or not uses:
        return None
    index = uses[0].access.index[:nb]
    for use in uses:
        block = use.access.index[:nb]
        if block != index or any(var_kind(v) == "axis" for e in block for v in e.vars()):
            return None  # another block expression, or one access spanning several blocks
    # Loops every use shares, inside the definition's loops: the block may only move with these.
    common = uses[0].site.loops
    for use in uses[1:]:
        common = common[: common_depth(common, use.site.loops)]
    own = common[len(site.loops):] if common[: len(site.loops)] == site.loops else ()
    by_var = {lp.var: lp for lp in own}
    block_vars = {v for e in index for v in e.vars() if var_kind(v) == "loop"}
    if not block_vars or not block_vars <= by_var.keys():
        return None
    picking = [lp for lp in own if lp.var in block_vars]  # outermost first
    if not _distinct_blocks(index, picking):
        return None
    iterating = [lp for lp in picking if lp.trip_count > 1]
    return BlockLocal(tuple(index), picking[-1], iterating[-1] if iterating else None)


def _distinct_blocks(index: tuple[Affine, ...], loops: list[Loop]) -> bool:
    """No two different iterations of ``loops`` pick the same block (an integer-set question on the block index,
    ``verify/integer_sets.py``; its "maybe" counts as "same"). Only the loop indices differ between the two sides:
    a program id is the same on both, so it cancels from every difference and needs no range."""
    ranges: dict[str, tuple[int, int]] = {}
    sides = []
    for tag in ("a", "b"):
        env: dict[str, Affine | int] = {}
        for lp in loops:
            name = f"{lp.var}.{tag}"
            ranges[name] = (0, max(lp.trip_count - 1, 0))
            env[lp.var] = Affine.var(name, lp.step) + lp.start
        sides.append([e.substitute(env) for e in index])
    same = [equal(x - y) for x, y in zip(*sides)]
    for lp in loops:
        a, b = Affine.var(f"{lp.var}.a"), Affine.var(f"{lp.var}.b")
        for first, second in ((a, b), (b, a)):
            if has_point(same + [at_least(second - first - 1)], ranges):
                return False
    return True


def block_range(prog: Program, t: Tensor, loop: Loop) -> tuple[int, int]:
    """The program positions one block is live over, within one iteration of ``loop``: from its first use to its
    last, widened to the whole of any loop nested in ``loop`` that holds a use (all its iterations need it)."""
    start, end = None, None
    depth = None
    for use in prog.uses[t]:
        loops = use.site.loops
        depth = loops.index(loop) + 1 if depth is None else depth
        lo = hi = use.site.pos
        if len(loops) > depth:
            inner = loops[depth]
            lo, hi = prog.loop_start[inner], prog.loop_end[inner]
        start = lo if start is None else min(start, lo)
        end = hi if end is None else max(end, hi)
    return start, end

