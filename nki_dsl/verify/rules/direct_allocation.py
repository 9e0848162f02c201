"""Rule ``direct-allocation``: placements a kernel chose (``buffer=ncc.sbuf.mod_alloc(...)``, ``ncc.psum.alloc``,
the current API's ``address=``) are ones the hardware can hold (reference/nki.md §1.1, §1.2, §2.7 "Direct
allocation"):

* the ``address`` attribute has a (partition, byte) pair per block, or one pair for the whole tensor (its
  blocks side by side from there);
* every block is inside the target's partitions and memory: SBUF bytes below the partition size and aligned to
  ``sbuf_min_align``; PSUM blocks inside the target's banks, each either within one 2 KiB bank or starting on a
  bank boundary (a PSUM allocation "must start at the beginning of each bank");
* a block starts on a partition its partition count allows (0 for more than 64 partitions, 0/64 for more than 32,
  else a multiple of 32);
* two blocks of one tensor either share space exactly (by design: ``num_free_tiles=(2,)``) or not at all;
* blocks that share space are never needed at once: the tensor's accesses are replayed in program order
  (``verify/block_schedule.py``) and no block is written while another block in its space still has contents
  to be read. This compares every access with every other, whatever its indices: a software pipeline's
  prologue ``buf[0] = ...`` and epilogue with the loop's ``buf[i]`` / ``buf[i + 1]``, a tensor filled in one
  loop and read in another. Past the replay's bound (large parsed IR) or for shape-family indices, a
  per-iteration check stands in: every access indexes the blocks with the same loop indices and the blocks one
  iteration touches are in distinct space (accesses with constant block indices beside loop-indexed ones are
  then not compared with the loop's);
* two directly allocated tensors live at the same time do not overlap.

Auto-allocated tensors are placed around these by the allocator (passes/allocate.py).
"""

from __future__ import annotations

import itertools
import math

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.affine import Affine, var_kind
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.block_schedule import Conflict, first_conflict
from nki_dsl.verify.placements import Rect, blocks, is_placed, rects, start_step
from nki_dsl.verify.program import Program, program

RULE = "direct-allocation"
_MAX_WINDOW = 5000  # block offsets one iteration may touch that are enumerated; wider accesses count as all blocks
_MAX_WORK = 300_000  # windows x offsets the aliasing check slides at most (a bound on its time for parsed IR)


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog = program(kernel)
    out: list[Diagnostic] = []
    placed = {}
    for t, site in prog.defs.items():
        if not is_placed(site.op):
            continue
        problem = _form(site.op) or _inside(site.op, target) or _aliasing(prog, t, rects(site.op))
        if problem:
            out.append(d.diagnostic(site.op, RULE, f"{_what(t)}{problem}"))
        else:
            placed[t] = site
    for buffer in ("sbuf", "psum"):
        ranges = sorted((r for r in prog.live_ranges(buffer) if r.tensor in placed), key=lambda r: r.start)
        for a, b in itertools.combinations(ranges, 2):
            if b.start > a.end or a.start > b.end:
                continue
            hit = next(((x, y) for x in rects(a.site.op) for y in rects(b.site.op) if x.overlaps(y)), None)
            if hit is not None:
                later, earlier = (b, a) if b.start >= a.start else (a, b)
                x, y = hit if later is b else hit[::-1]
                out.append(d.diagnostic(later.site.op, RULE, (
                    f"{_what(later.tensor)}{_block(later.tensor, y)}: overlaps {d.ref(earlier.tensor)}"
                    f"{_block(earlier.tensor, x)} (line {earlier.site.op.loc.line}, at {x.describe()}; this one at "
                    f"{y.describe()}) while both are live; place them apart or end one's use first")))
    return out


def _what(t) -> str:
    return f"{t.type.buffer.value.upper()} placement of {d.ref(t)}"


def _block(t, r: Rect) -> str:
    return f" block {list(r.index)}" if t.type.block_shape else ""


def _form(op) -> str | None:
    ty, address = op.result.type, tuple(op.attrs["address"])
    need = 2 * blocks(ty)
    if len(address) not in (2, need):
        return (f": address has {len(address)} entries; a tensor with {d.plural(blocks(ty), 'block')} needs "
                f"{need} (start partition, byte offset per block)")
    if any(a < 0 for a in address):
        return f": address {list(address)} has a negative entry"
    return None


def _inside(op, target: Target) -> str | None:
    ty = op.result.type
    psum = ty.buffer.value == "psum"
    capacity = target.psum_bytes_per_partition if psum else target.sbuf_bytes_per_partition
    step = start_step(ty.partitions, target.partitions)
    bank = target.psum_bank_bytes
    rs = rects(op)
    for r in rs:
        where = _block(op.result, r)
        if r.p_hi > target.partitions:
            return f"{where}: partitions {r.p_lo}..{r.p_hi - 1} exceed the {target.partitions} partitions"
        if r.p_lo % step:
            return (f"{where}: a {ty.partitions}-partition tensor starts at a multiple of {step} partitions, "
                    f"not at partition {r.p_lo}")
        if r.b_hi > capacity:
            what = f" ({target.psum_banks} PSUM banks)" if psum else ""
            return (f"{where}: bytes {r.b_lo}..{r.b_hi - 1} exceed the {capacity} of a {target.name} "
                    f"partition{what}")
        if psum and r.b_lo % bank and r.b_lo // bank != (r.b_hi - 1) // bank:
            return (f"{where}: bytes {r.b_lo}..{r.b_hi - 1} cross a PSUM bank boundary; a PSUM tile lies within "
                    f"one {bank}-byte bank or starts at the beginning of one")
        if not psum and r.b_lo % target.sbuf_min_align:
            return f"{where}: byte offset {r.b_lo} is not a multiple of {target.sbuf_min_align} bytes"
    for x, y in itertools.combinations(rs, 2):
        if x.overlaps(y) and not x.same_space(y):
            return (f": block {list(x.index)} ({x.describe()}) and block {list(y.index)} ({y.describe()}) overlap "
                    f"partly; blocks either share their space exactly or not at all")
    return None


def _split(e: Affine) -> tuple[tuple, tuple, int]:
    """(loop/program-id terms, axis terms, constant) of a block index."""
    loops = tuple((v, c) for v, c in e.terms if var_kind(v) != "axis")
    axes = tuple((v, c) for v, c in e.terms if var_kind(v) == "axis")
    return loops, axes, e.const


def _dim_offsets(a: Access, k: int, limit: int) -> set[int] | None:
    """The offsets (constant plus axis span) block dimension ``k`` of access ``a`` touches; None past ``limit``."""
    _, axes, const = _split(a.index[k])
    values = {const}
    for v, c in axes:
        values = {x + c * j for x in values for j in range(a.shape[int(v[1:])])}
        if len(values) > limit:
            return None
    return values


def _aliasing(prog: Program, t, rs: list[Rect]) -> str | None:
    """Blocks sharing space are not in use at once. Per block dimension, the accesses either agree on its loop
    indices (then one iteration touches the blocks at their constant offsets and spans: a window slid over every
    iteration) or not (then, as far as this rule can tell, any block of that dimension may be in use at once,
    e.g. filled in one loop and read in another): the blocks one iteration may use must all be in distinct
    space."""
    ty = t.type
    nb = len(ty.block_shape)
    if not any(x.same_space(y) for x, y in itertools.combinations(rs, 2)):
        return None
    conflict = first_conflict(prog, t, {r.index: (r.p_lo, r.p_hi, r.b_lo, r.b_hi) for r in rs})
    if conflict is not False:
        return _conflict(conflict, {r.index: r for r in rs}) if conflict else None
    return _window_aliasing(prog, t, rs, nb)


def _conflict(c: Conflict, by_index: dict) -> str:
    e, later = c.earlier, c.later
    verb = "written" if later.filled else "read"
    line = e.first.site.op.loc.line
    since = f"written at line {line}" if e.filled else f"first read at line {line}"
    return (f": blocks {list(e.block)} and {list(later.block)} share space ({by_index[e.block].describe()}), but "
            f"block {list(later.block)} is {verb} at line {later.first.site.op.loc.line} while block "
            f"{list(e.block)}, {since}, is still to be read at line "
            f"{e.last.site.op.loc.line}; give them separate space (more num_free_tiles) or finish with block "
            f"{list(e.block)} first")


def _window_aliasing(prog: Program, t, rs: list[Rect], nb: int) -> str | None:
    """The per-iteration check that stands in when the replay is out of reach (see the module docstring)."""
    ty = t.type
    uses = [u for u in prog.uses.get(t, []) if u.access.index]
    loop_parts = [{_split(u.access.index[k])[0] for u in uses} for k in range(nb)]
    if any(len(p) > 1 for p in loop_parts):  # constant block indices beside loop-indexed ones (a pipeline's
        # prologue, buf[0] = ...) are not compared with the loop's: which iteration they meet is not tracked
        uses = [u for u in uses if any(_split(e)[0] for e in u.access.index[:nb])] or uses
        loop_parts = [{_split(u.access.index[k])[0] for u in uses} for k in range(nb)]
    free = [len(p) > 1 for p in loop_parts]  # dims the accesses index with different loop indices
    window_dims: list[set[int]] = []
    for k in range(nb):
        if free[k]:
            window_dims.append(set(range(ty.block_shape[k])))
            continue
        vals: set[int] = set()
        for u in uses:
            got = _dim_offsets(u.access, k, _MAX_WINDOW)
            vals = set(range(ty.block_shape[k])) if got is None else vals | got
        window_dims.append(vals)
    by_index = {r.index: r for r in rs}
    base_ranges = []
    for k in range(nb):
        moving = not free[k] and any(p for p in loop_parts[k])
        lo, hi = min(window_dims[k]), max(window_dims[k])
        base_ranges.append(range(-hi, ty.block_shape[k] - lo) if moving else range(1))
    offsets = list(itertools.product(*(sorted(w) for w in window_dims)))
    if len(offsets) * math.prod(len(r) for r in base_ranges) > _MAX_WORK:
        # too many windows to slide (large untrusted IR): every block counts as in use at once (conservative)
        offsets, base_ranges = sorted(by_index), [range(1)] * nb
    for base in itertools.product(*base_ranges):
        seen: dict[tuple, Rect] = {}
        for o in offsets:
            r = by_index.get(tuple(b + x for b, x in zip(base, o)))
            if r is None:
                continue
            key = (r.p_lo, r.b_lo)
            if key in seen and seen[key].index != r.index:
                first = seen[key]
                if any(free):
                    u1, u2 = _differing(uses, loop_parts, nb)
                    return (f": blocks {list(first.index)} and {list(r.index)} share space ({r.describe()}), and "
                            f"the tensor is indexed with different loop indices at line {u1.site.op.loc.line} "
                            f"({_index(u1.access, nb)}) and line {u2.site.op.loc.line} ({_index(u2.access, nb)}): "
                            f"a block may be read after a later block took its space; index every use with the "
                            f"same loop indices, or give each block its own space")
                return (f": blocks {list(first.index)} and {list(r.index)} share space ({r.describe()}) but "
                        f"are in use at the same time (one iteration's accesses touch both); give them separate "
                        f"space (more num_free_tiles)")
            seen[key] = r
    return None


def _differing(uses, loop_parts, nb):
    k = next(k for k in range(nb) if len(loop_parts[k]) > 1)
    first = uses[0]
    other = next(u for u in uses if _split(u.access.index[k])[0] != _split(first.access.index[k])[0])
    return first, other


def _index(a: Access, nb: int) -> str:
    return "[" + ", ".join(str(e) for e in a.index[:nb]) + "]"
