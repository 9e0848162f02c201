"""Who last wrote and who last read each buffer region: the RAW / WAR / WAW bookkeeping of the scheduler.

Per address space (a region key: SBUF, PSUM, or one HBM tensor, see ``addresses.py``) records hold a box with the
end time and id of its last writer and of its latest reader. Records sit in cells, so finding the records a box
overlaps looks at the few cells the box covers, not at every record: tile-shaped accesses stay O(1) each.

* On-chip spaces (keys in ``cells``) have boxes ``(p_lo, p_hi, b_lo, b_hi)`` and fixed cells over the bytes only
  (``cells[key]`` bytes wide, all partitions), since many differently sized tensors share them; this is the hot
  path and is written out for that shape.
* An HBM tensor's cells are a grid whose cell is the extent of the first box seen for it (its tile).

A write supersedes the records its box contains: any later access overlapping one of them overlaps the write,
and the write already waited for them, so waiting for the write implies waiting for them. Dropping them keeps
the record count bounded by the live distinct regions. ``ready`` keeps the records each write overlaps for the
``commit`` that follows it (nothing changes in between), so they are looked up once.
"""

from __future__ import annotations

from itertools import product

# A record is a list, mutated in place:
#   r[0] box        the region                          r[1] write end  end time of its last writer
#   r[2] writer     id of that instruction              r[3] read end   latest end time of its readers
#   r[4] reader     id of that instruction              r[5] alive      False once a write superseded it
# The hot paths (``_ByteSpace.overlapping``, ``ready``, ``commit``) index with these literals: a named constant
# there is a global lookup per access, which the simulator's speed budget notices. Colder code uses the names.
_BOX, _WEND, _WID, _REND, _RID, _ALIVE = range(6)


class _ByteSpace:
    """An on-chip address space: boxes ``(p_lo, p_hi, b_lo, b_hi)``, cells of ``width`` bytes."""

    __slots__ = ("width", "cells", "exact")

    def __init__(self, width: int):
        self.width = width
        self.cells: dict[int, list] = {}
        self.exact: dict[tuple, list] = {}

    def overlapping(self, box):
        w = self.width
        p0, p1, b0, b1 = box
        lo, hi = b0 // w, (b1 - 1) // w
        cells = self.cells
        if lo == hi:  # the common case: one cell, no duplicates possible
            recs = cells.get(lo)
            if not recs:
                return ()
            out = []
            dead = False
            for r in recs:
                if not r[5]:
                    dead = True
                    continue
                rb = r[0]
                if rb[2] < b1 and b0 < rb[3] and rb[0] < p1 and p0 < rb[1]:
                    out.append(r)
            if dead:
                recs[:] = [r for r in recs if r[5]]
            return out
        out = []
        for c in range(lo, hi + 1):
            recs = cells.get(c)
            if not recs:
                continue
            first = c * w  # a record starting before this cell sits in the previous one too: already seen there
            dead = False
            for r in recs:
                if not r[5]:
                    dead = True
                    continue
                rb = r[0]
                if rb[2] < b1 and b0 < rb[3] and rb[0] < p1 and p0 < rb[1] and (c == lo or rb[2] >= first):
                    out.append(r)
            if dead:
                recs[:] = [r for r in recs if r[5]]
        return out

    def add(self, rec) -> None:
        box = rec[0]
        self.exact[box] = rec
        w = self.width
        cells = self.cells
        for c in range(box[2] // w, (box[3] - 1) // w + 1):
            recs = cells.get(c)
            if recs is None:
                cells[c] = [rec]
            else:
                recs.append(rec)


class _GridSpace:
    """An HBM tensor: boxes ``(lo0, hi0, lo1, hi1, ...)`` in its index space, a grid of cells."""

    __slots__ = ("cell", "cells", "exact")

    def __init__(self, cell: tuple[int, ...]):
        self.cell = cell
        self.cells: dict[tuple, list] = {}
        self.exact: dict[tuple, list] = {}

    def coords(self, box):
        return product(*(range(box[2 * d] // c, (box[2 * d + 1] - 1) // c + 1) for d, c in enumerate(self.cell)))

    def overlapping(self, box):
        out = []
        seen = set()
        n = len(box)
        for c in self.coords(box):
            recs = self.cells.get(c)
            if not recs:
                continue
            dead = False
            for r in recs:
                if not r[_ALIVE]:
                    dead = True
                    continue
                rb = r[_BOX]
                if id(r) in seen:
                    continue
                k = 0
                while k < n and rb[k] < box[k + 1] and box[k] < rb[k + 1]:
                    k += 2
                if k >= n:
                    seen.add(id(r))
                    out.append(r)
            if dead:
                recs[:] = [r for r in recs if r[_ALIVE]]
        return out

    def add(self, rec) -> None:
        self.exact[rec[_BOX]] = rec
        for c in self.coords(rec[_BOX]):
            self.cells.setdefault(c, []).append(rec)


class DependenceTracker:
    """``ready(reads, writes)`` -> (time, id of the instruction that sets it); ``commit`` records an instruction.
    ``cells``: region key -> cell width in bytes for the on-chip (partition x byte) spaces.

    ``ready`` and ``commit`` are closures (set per tracker) with the single-cell on-chip case written out inline:
    they run once per instruction, so the calls and attribute lookups saved count. Records are scanned in the
    same order as ``overlapping`` returns them, so ties on the latest end pick the same instruction."""

    def __init__(self, untracked: set[int] = frozenset(), cells: dict[int, int] | None = None):
        self.spaces: dict = {key: _ByteSpace(width) for key, width in (cells or {}).items()}
        self.untracked = untracked
        # after each ``ready``: when the last writer of its first read region ended (the Tensor engine's stationary
        # tile, for LoadStationary)
        self.first_read = [0.0]
        self.ready, self.commit = self._make()

    def _space(self, key: int, box):
        s = self.spaces.get(key)
        if s is None:
            s = self.spaces[key] = _GridSpace(tuple(max(1, box[k + 1] - box[k]) for k in range(0, len(box), 2)))
        return s

    def _make(self):
        spaces, untracked, new_space = self.spaces, self.untracked, self._space
        byte = {key: (s, s.width, s.cells, s.exact) for key, s in spaces.items()}  # the fixed on-chip spaces
        pending: list = []

        first = self.first_read

        def ready(reads, writes):
            # record fields by index: see the table at the top of this module
            nonlocal pending
            t, who = 0.0, -1
            n = 0
            for key, box in reads:  # RAW: wait for the last writer of anything read
                if n == 1:
                    first[0] = t  # the first read's RAW time, before the others raise t
                n += 1
                if key in untracked:
                    continue
                b = byte.get(key)
                if b is not None:
                    w = b[1]
                    p0, p1, b0, b1 = box
                    lo = b0 // w
                    if lo == (b1 - 1) // w:  # one cell: scan it here
                        recs = b[2].get(lo)
                        if recs:
                            dead = False
                            for r in recs:
                                if not r[5]:
                                    dead = True
                                elif r[1] > t:
                                    rb = r[0]
                                    if rb[2] < b1 and b0 < rb[3] and rb[0] < p1 and p0 < rb[1]:
                                        t, who = r[1], r[2]
                            if dead:
                                recs[:] = [r for r in recs if r[5]]
                        continue
                    recs = b[0].overlapping(box)
                else:
                    s = spaces.get(key)
                    if s is None:
                        continue
                    recs = s.overlapping(box)
                for r in recs:
                    if r[1] > t:
                        t, who = r[1], r[2]
            if n == 1:
                first[0] = t
            pending = []
            for key, box in writes:  # WAW and WAR: wait for the last writer and the readers of anything written
                b = byte.get(key)
                if b is not None:
                    w = b[1]
                    p0, p1, b0, b1 = box
                    lo = b0 // w
                    if lo == (b1 - 1) // w:
                        recs = b[2].get(lo)
                        if recs:
                            out = []
                            dead = False
                            for r in recs:
                                if not r[5]:
                                    dead = True
                                    continue
                                rb = r[0]
                                if rb[2] < b1 and b0 < rb[3] and rb[0] < p1 and p0 < rb[1]:
                                    out.append(r)
                                    if r[1] > t:
                                        t, who = r[1], r[2]
                                    if r[3] > t:
                                        t, who = r[3], r[4]
                            if dead:
                                recs[:] = [r for r in recs if r[5]]
                            recs = out
                        else:
                            recs = ()
                        pending.append(recs)
                        continue
                    recs = b[0].overlapping(box)
                else:
                    s = spaces.get(key)
                    recs = s.overlapping(box) if s is not None else ()
                pending.append(recs)
                for r in recs:
                    if r[1] > t:
                        t, who = r[1], r[2]
                    if r[3] > t:
                        t, who = r[3], r[4]
            return t, who

        def commit(reads, writes, end: float, ident: int) -> None:
            """Record an instruction; must follow the ``ready`` call for the same regions."""
            for (key, box), recs in zip(writes, pending):
                b = byte.get(key)
                if b is not None:
                    exact = b[3]
                    p0, p1, b0, b1 = box
                    for r in recs:
                        rb = r[0]
                        if p0 <= rb[0] and rb[1] <= p1 and b0 <= rb[2] and rb[3] <= b1:
                            r[5] = False
                            if exact.get(rb) is r:
                                del exact[rb]
                    rec = [box, end, ident, 0.0, -1, True]
                    exact[box] = rec
                    w, cells = b[1], b[2]
                    for c in range(b0 // w, (b1 - 1) // w + 1):
                        cl = cells.get(c)
                        if cl is None:
                            cells[c] = [rec]
                        else:
                            cl.append(rec)
                    continue
                s = new_space(key, box)
                exact = s.exact
                n = len(box)
                for r in recs:
                    rb = r[0]
                    if all(box[k] <= rb[k] and rb[k + 1] <= box[k + 1] for k in range(0, n, 2)):
                        r[5] = False
                        if exact.get(rb) is r:
                            del exact[rb]
                s.add([box, end, ident, 0.0, -1, True])
            for key, box in reads:
                if key in untracked:
                    continue
                b = byte.get(key)
                s = b[0] if b is not None else spaces.get(key)
                if s is None:
                    s = new_space(key, box)
                rec = s.exact.get(box)
                if rec is not None and rec[5]:
                    if end > rec[3]:
                        rec[3], rec[4] = end, ident
                else:
                    s.add([box, 0.0, -1, end, ident, True])

        return ready, commit
