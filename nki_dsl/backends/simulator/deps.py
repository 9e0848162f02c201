"""Who last wrote and who last read each buffer region: the RAW / WAR / WAW bookkeeping of the scheduler.

Per address space (a region key: SBUF, PSUM, or one HBM tensor, see ``addresses.py``) records hold a box with the
end time and id of its last writer and of its latest reader. Records sit in a grid of cells, so finding the
records a box overlaps looks at the few cells the box covers, not at every record: tile-shaped accesses stay O(1)
each. An HBM tensor's cell is the extent of the first box seen for it (its tile); the on-chip spaces get fixed
cells (``cells``), all partitions by a span of bytes, since many differently sized tensors share them.

A write supersedes the records its box contains: any later access overlapping one of them overlaps the write,
and the write already waited for them, so waiting for the write implies waiting for them. Dropping them keeps
the record count bounded by the live distinct regions.
"""

from __future__ import annotations

from itertools import product

# record layout (a list, mutated in place): [box, write_end, writer, read_end, reader, alive]
_BOX, _WEND, _WID, _REND, _RID, _ALIVE = range(6)


class _Space:
    __slots__ = ("cell", "cells", "exact")

    def __init__(self, cell: tuple[int, ...]):
        self.cell = cell
        self.cells: dict[tuple, list] = {}
        self.exact: dict[tuple, list] = {}

    def coords(self, box):
        cell = self.cell
        if len(cell) == 2:  # the common case (2-D tiles), without itertools
            c0, c1 = cell
            r0 = range(box[0] // c0, (box[1] - 1) // c0 + 1)
            r1 = range(box[2] // c1, (box[3] - 1) // c1 + 1)
            if len(r0) == 1 and len(r1) == 1:
                return ((r0[0], r1[0]),)
            return product(r0, r1)
        return product(*(range(box[2 * d] // c, (box[2 * d + 1] - 1) // c + 1) for d, c in enumerate(cell)))

    def overlapping(self, box):
        """Live records whose box overlaps ``box`` (each once)."""
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


def _contains(outer, inner) -> bool:
    return all(outer[k] <= inner[k] and inner[k + 1] <= outer[k + 1] for k in range(0, len(outer), 2))


class DependenceTracker:
    """``ready(reads, writes)`` -> (time, id of the instruction that sets it); ``commit`` records an instruction."""

    def __init__(self, untracked: set[int] = frozenset(), cells: dict[int, tuple[int, ...]] | None = None):
        self.spaces: dict[int, _Space] = {key: _Space(cell) for key, cell in (cells or {}).items()}
        self.untracked = untracked

    def _space(self, key: int, box) -> _Space:
        s = self.spaces.get(key)
        if s is None:
            s = self.spaces[key] = _Space(tuple(max(1, box[k + 1] - box[k]) for k in range(0, len(box), 2)))
        return s

    def ready(self, reads, writes) -> tuple[float, int]:
        t, who = 0.0, -1
        for key, box in reads:  # RAW: wait for the last writer of anything read
            if key in self.untracked:
                continue
            s = self.spaces.get(key)
            if s is None:
                continue
            rec = s.exact.get(box)
            if rec is not None and rec[_ALIVE] and len(s.exact) == 1:
                if rec[_WEND] > t:
                    t, who = rec[_WEND], rec[_WID]
                continue
            for r in s.overlapping(box):
                if r[_WEND] > t:
                    t, who = r[_WEND], r[_WID]
        for key, box in writes:  # WAW and WAR: wait for the last writer and the readers of anything written
            s = self.spaces.get(key)
            if s is None:
                continue
            for r in s.overlapping(box):
                if r[_WEND] > t:
                    t, who = r[_WEND], r[_WID]
                if r[_REND] > t:
                    t, who = r[_REND], r[_RID]
        return t, who

    def commit(self, reads, writes, end: float, ident: int) -> None:
        for key, box in writes:
            s = self._space(key, box)
            for r in s.overlapping(box):
                if _contains(box, r[_BOX]):
                    r[_ALIVE] = False
                    if s.exact.get(r[_BOX]) is r:
                        del s.exact[r[_BOX]]
            s.add([box, end, ident, 0.0, -1, True])
        for key, box in reads:
            if key in self.untracked:
                continue
            s = self._space(key, box)
            rec = s.exact.get(box)
            if rec is not None and rec[_ALIVE]:
                if end > rec[_REND]:
                    rec[_REND], rec[_RID] = end, ident
            else:
                s.add([box, 0.0, -1, end, ident, True])
