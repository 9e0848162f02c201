"""Advance whole loop iterations once the schedule has reached a steady state, instead of scheduling each instruction.

The scheduler is a deterministic function of its state (engine and DMA queue clocks, the round-robin queue counter,
the DMA engines' bookings, the dependence records, the Tensor engine's stationary) and of the instructions it is
given. All it does with times is add durations and take maxima, and both commute with a shift: a state whose every
time is later by ``delta`` (and every instruction id larger by ``D``) yields a schedule later by ``delta``. The
period between a loop's period boundaries b1 and b2 is what the state at b1 leads to. If the state at b2 is the
state at b1 moved along by one period (times by ``delta``, ids by ``D``, the DMA queue rotation by the period's
transfers), and the next period's instructions are the last one's moved along the same way (``loop_facts.py``: the
same on-chip regions, moving HBM tiles by a constant step), the next period is the last one moved along, its end
state is the state at b2 moved along, and so on by induction: the rest of the loop can be written down by
arithmetic. That is exact in real arithmetic; in floating point the written-down times differ from
instruction-by-instruction ones by rounding (``TOL`` = 1e-10, relative, bounds what counts as "moved along"; the
tests compare both paths to 1e-9 of the latency, tests/simulator/test_speed_invariance.py).

"The state" is what the loop's remaining instructions can observe. A time older than the frontier ``F`` -- the
least free time of the units the body runs on (and of the LoadStationary clock), so the earliest any remaining
instruction can start -- can never win a maximum that decides a start, so it is not observed:

* the clocks of the units the body runs on (every DMA queue, in rotation order, if it has DMAs), the shared ports,
  DGE instances and the Tensor engine's LoadStationary clock must have moved along, and its stationary and the
  stream's record of what the last Vector/Scalar instruction wrote (the dependent-instruction overhead) be equal;
* the DMA engines' bookings that end after ``F`` must have moved along (one that began before ``F`` blocks every
  later transfer to its end, so only its end is compared);
* the dependence record of every region the period touched is compared field by field (writer, latest reader): a
  field the period rewrote must have moved along or be older than the frontier at both boundaries (then neither
  period's future saw it, and the next rewrite is the last one moved along like everything else); a field it did
  not rewrite must be older than ``F``. Every other record overlapping those regions must be older than ``F``;
* the moving HBM tiles of the remaining iterations may overlap only records older than ``F``, and none of the
  records of the regions above (those are moved along in place, not replayed).

Advancing m periods then appends m copies of the last period's schedule (times + k*delta, ids and predecessors +
k*D, queues rotated), moves the clocks, the bookings after ``F`` and the record fields the last period rewrote
along by m periods, and replays just the moving-tile accesses of the skipped instructions through the dependence
tracker (``_replay<k>``), so the state afterwards is the one instruction-by-instruction scheduling would have
left, for whatever follows the loop. Every instruction is still in the Schedule, so the Profile, its busy-time
split, critical path and Chrome trace list each one (``Schedule.advanced`` counts those written down).

Comparing costs a snapshot per period (the regions the period touched come from the scheduler's log of each
instruction's regions), so only loops of at least ``loop_facts.MIN_PERIODS`` periods are watched, and a loop stops
looking once less than ``GIVE_UP_SHARE`` of it is left.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import chain
from types import SimpleNamespace

import numpy as np

from nki_dsl.backends.simulator.dma_pool import KEEP

TOL = 1e-10  # relative: two times are "the same" up to this fraction of their size (floating-point rounding)
_DTYPES = (np.int64, np.int8, np.float64, np.float64, np.int64)  # the Schedule's arrays: template unit start end pred
TRIM_ENTRIES = 65536  # the log of instructions' regions is trimmed when this many entries are no longer needed
# A loop stops looking for its steady state once less than this share of its periods is left to advance: the
# comparisons (about a tenth of scheduling a period) would cost more than they could save.
GIVE_UP_SHARE = 0.25
# After this many periods that did not repeat the last one, a loop watches periods twice as long (up to
# ``MAX_MULTIPLE`` times the loop's own period): any multiple of a period is a period too (the same on-chip regions,
# the moving tiles by a constant step), and a schedule can settle into a cycle of several of them.
DOUBLE_AFTER = 1
MAX_MULTIPLE = 4


def _overlapping(space, box):
    """The live records of an HBM tensor's ``space`` overlapping ``box`` (``deps._GridSpace.overlapping``), with
    the common case of a box inside one cell (a tile the size of the first one seen) looked up directly."""
    cell = getattr(space, "cell", None)
    if cell is None:  # an on-chip space
        return space.overlapping(box)
    coords = tuple(box[2 * d] // c for d, c in enumerate(cell))
    if all((box[2 * d + 1] - 1) // c == coords[d] for d, c in enumerate(cell)):
        n = len(box)
        out = []
        for r in space.cells.get(coords, ()):
            rb = r[0]
            if r[5] and all(rb[k] < box[k + 1] and box[k] < rb[k + 1] for k in range(0, n, 2)):
                out.append(r)
        return out
    return space.overlapping(box)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


class Steady:
    """Loop controller for one run: ``enter(k, outer)`` gives loop ``k``'s iteration values (the stream's ``for``
    takes them), skipping the ones it advances by arithmetic."""

    def __init__(self, stream, sched, log: list):
        self.loops = stream.steady
        self.ns = stream.namespace
        self.sched = sched
        self.st = sched.state
        self.log = log
        self.log_base = 0  # absolute position of log[0]
        self.active: dict[int, list] = {}  # runs still comparing periods -> their snapshots (the last: log they need)
        self.advanced = 0  # instructions written down by arithmetic (for benchmarks and tests)
        self.used: dict[int, list] = {}  # id(loop facts) -> the units its body runs on

    def enter(self, k: int, outer: tuple):
        return self._values(k, self.loops[k], outer)

    # -- one execution of a loop ------------------------------------------------------------------------------------
    def _values(self, k, lf, outer):
        lp = lf.loop
        v, stop, step, period = lp.start, lp.stop, lp.step, lf.period
        # the iterations that may be advanced: those at which every masked instruction is whole (loop_facts)
        whole = stop if lf.full_until == math.inf else min(stop, int(lf.full_until) + 1)
        key = object()
        snaps = [self._snapshot(lf, None)]
        self.active[id(key)] = snaps
        done = fails = 0
        total = len(range(v, whole, step))  # iterations that may be advanced
        try:
            while v < stop:
                yield v
                v += step
                done += 1
                if snaps is None or done % period:
                    continue
                snaps.append(self._snapshot(lf, snaps[-1]))
                if len(snaps) > 2:
                    del snaps[0]
                    self._trim()
                left = len(range(v, whole, step))
                m = left // period
                if snaps[0].fields is None or m < 1:
                    continue
                found = self._compare(lf, *snaps, period)
                if found is not None and self._advance(k, lf, outer, *snaps, m, v, found, period):
                    v += m * period * step
                    snaps = None
                elif left <= GIVE_UP_SHARE * total:
                    snaps = None
                else:
                    fails += 1
                    if fails >= DOUBLE_AFTER and period < MAX_MULTIPLE * lf.period and left >= 3 * 2 * period:
                        # the schedule may repeat only every few periods (e.g. transfers of two kinds sharing
                        # the DMA engines in turns): watch a period twice as long, from this boundary on
                        period, fails, done = 2 * period, 0, 0
                        snaps[:] = [self._snapshot(lf, None)]
                if snaps is None:
                    self._retire(key)
        finally:
            self._retire(key)

    def _retire(self, key) -> None:
        self.active.pop(id(key), None)
        if not self.active:  # nobody compares periods: the regions logged so far are not needed
            self.log_base += len(self.log)
            self.log.clear()

    def _trim(self) -> None:
        """Forget logged regions no run still needs (each needs those since its last snapshot)."""
        low = min(snaps[-1].logpos for snaps in self.active.values()) - self.log_base
        if low > TRIM_ENTRIES:
            del self.log[:low]
            self.log_base += low

    # -- state --------------------------------------------------------------------------------------------------------
    def _snapshot(self, lf, prev):
        st, sched = self.st, self.sched
        pool = st.pool
        s = SimpleNamespace(
            id=len(sched.arrays[0]), logpos=self.log_base + len(self.log), rr=st.rr[0], free=st.free[:],
            last=st.last[:], port_free=st.port_free[:], port_last=st.port_last[:], dge_free=st.dge_free[:],
            dge_last=st.dge_last[:], te=st.te_start[0], loaded=st.loaded[0], lw=list(self.ns["_LW"]),
            dma_busy=sched.dma_busy[:], fields=None)  # fmt: skip
        s.F = self._frontier(lf, s)
        if lf.dma:  # the bookings that end after the frontier (earlier ones can delay no remaining transfer)
            j = bisect_right(pool.ends, s.F)
            s.pool = (pool.starts[j:], pool.ends[j:], pool.owners[j:], pool.floor, pool.floor_owner)
        if prev is not None:  # the records of every region the period just ended touched
            untracked = st.tracker.untracked
            spaces = st.tracker.spaces
            entries = self.log[prev.logpos - self.log_base:s.logpos - self.log_base]
            fields = {}
            for region in set(chain.from_iterable(chain.from_iterable(entries))):
                key = region[0]
                if key in untracked:
                    continue
                space = spaces.get(key)
                rec = space.exact.get(region[1]) if space is not None else None
                fields[region] = (rec[1], rec[2], rec[3], rec[4]) if rec is not None and rec[5] else None
            s.fields = fields
        return s

    def _frontier(self, lf, s) -> float:
        """The earliest a remaining instruction of the body can start: the least free time of the units it uses."""
        units = self.used.get(id(lf))
        if units is None:
            units = self.used[id(lf)] = [u for u in range(len(s.free)) if self._uses(lf, u)]
        free = s.free
        f = min([free[u] for u in units])
        return min(f, s.te) if "tensor" in lf.engines else f

    def _uses(self, lf, u: int) -> bool:
        n = self.st.n_engines
        return lf.dma if u >= n else self.sched.units[u] in lf.engines

    def _compare(self, lf, s1, s2, period):
        """(delta, D, DMA transfers per period, F1, F2) when the state at ``s2`` is the state at ``s1`` moved along by
        one period (module docstring); None otherwise. ``F1``, ``F2``: the frontiers at ``s1`` and ``s2``."""
        st = self.st
        D = lf.per_iteration * period
        if s2.id - s1.id != D:
            return None
        ne, nq = st.n_engines, st.dma_queues
        n_dma = s2.rr - s1.rr
        if s1.loaded != s2.loaded or s1.lw != s2.lw:
            return None
        used = [u for u in range(ne) if self._uses(lf, u)]
        delta = s2.free[used[0]] - s1.free[used[0]] if used else s2.free[ne + s2.rr % nq] - s1.free[ne + s1.rr % nq]
        if not delta > 0:
            return None
        for u in used:
            if not (_close(s2.free[u], s1.free[u] + delta) and s2.last[u] == s1.last[u] + D):
                return None
        if lf.dma:
            for c in range(nq):
                q1, q2 = ne + (s1.rr + c) % nq, ne + (s2.rr + c) % nq
                if not (_close(s2.free[q2], s1.free[q1] + delta) and s2.last[q2] == s1.last[q1] + D):
                    return None
        F1, F2 = s1.F, s2.F
        for p in lf.ports:
            if not (_close(s2.port_free[p], s1.port_free[p] + delta) and s2.port_last[p] == s1.port_last[p] + D):
                return None
        if lf.dge:
            for d in range(len(s2.dge_free)):
                moved = _close(s2.dge_free[d], s1.dge_free[d] + delta) and s2.dge_last[d] == s1.dge_last[d] + D
                if not moved and not (s2.dge_last[d] == s1.dge_last[d] and s2.dge_free[d] <= F1):
                    return None
        if "tensor" in lf.engines and not _close(s2.te, s1.te + delta):
            return None
        if lf.dma and not self._pool_moved(s1, s2, F1, F2, delta, D):
            return None
        if not self._records_moved(lf, s1, s2, F1, F2, delta, D):
            return None
        return delta, D, n_dma, F1, F2

    def _pool_moved(self, s1, s2, F1, F2, delta, D) -> bool:
        (st1, en1, ow1, fl1, fo1), (st2, en2, ow2, fl2, fo2) = s1.pool, s2.pool  # (only those ending after F)
        if len(en1) != len(en2) or len(en2) > KEEP // 4:  # well inside what the pool keeps, so none is dropped
            return False
        for j in range(len(en2)):
            # a booking that began before the frontier blocks every later transfer to its end, whenever it began
            a1, a2 = max(st1[j], F1), max(st2[j], F2)
            if not (_close(a2, a1 + delta) and _close(en2[j], en1[j] + delta) and ow2[j] == ow1[j] + D):
                return False
        if fl2 > F2:
            return fl1 > F1 and _close(fl2, fl1 + delta) and fo2 == fo1 + D
        return fl1 <= F1

    def _records_moved(self, lf, s1, s2, F, F2, delta, D) -> bool:
        f1, f2 = s1.fields, s2.fields
        moving = lf.moving
        if {r for r in f1 if r[0] not in moving} != {r for r in f2 if r[0] not in moving}:
            return False
        for region, b in f2.items():
            if region[0] in moving:
                continue
            a = f1[region]
            if a is None or b is None:
                if a is not b:
                    return False
                continue
            for t, i in ((0, 1), (2, 3)):  # the writer's (end, id), the latest reader's
                if b[i] >= s1.id:  # rewritten in the last period: moved along, or older than the frontier at both
                    # boundaries (then neither period's future can see it, and the next rewrite is the last one
                    # moved along, as everything the last period did)
                    moved = a[i] == b[i] - D and _close(b[t], a[t] + delta)
                    if not moved and not (a[t] <= F and b[t] <= F2):
                        return False
                elif not (a[i] == b[i] and a[t] == b[t] and b[t] <= F):
                    return False
        # every other record overlapping those regions must be older than F: look at each cell they cover once,
        # and only for a record newer than F (rare) ask whether it overlaps one of them
        spaces = self.st.tracker.spaces
        by_cell: dict = {}
        for region in f2:
            key, box = region
            if key in moving:
                continue
            space = spaces.get(key)
            if space is None:
                continue
            if hasattr(space, "width"):  # on-chip: byte cells
                w = space.width
                for c in range(box[2] // w, (box[3] - 1) // w + 1):
                    by_cell.setdefault((key, c), []).append(box)
            else:
                for r in space.overlapping(box):
                    kept = space.exact.get(r[0]) is r and (key, r[0]) in f2
                    if not kept and (r[1] > F or r[3] > F):
                        return False
        for (key, c), boxes in by_cell.items():
            space = spaces[key]
            exact = space.exact
            for r in space.cells.get(c, ()):
                if not r[5] or (r[1] <= F and r[3] <= F):
                    continue
                rb = r[0]
                if exact.get(rb) is r and (key, rb) in f2:
                    continue
                for b in boxes:
                    if rb[2] < b[3] and b[2] < rb[3] and rb[0] < b[1] and b[0] < rb[1]:
                        return False
        return True

    # -- advancing --------------------------------------------------------------------------------------------------
    def _advance(self, k, lf, outer, s1, s2, m, v, found, period) -> bool:
        delta, D, n_dma, F, F2 = found
        st, sched = self.st, self.sched
        tracker = st.tracker
        lp = lf.loop
        items: list = []
        if lf.moving:
            replay = self.ns[f"_replay{k}"]
            replay(lambda n, r, w: items.append((n, r, w)), s2.id, *outer, v, v + m * period * lp.step)
            if not self._replay_safe(items, s2.fields, F):
                return False
        # the schedule: m copies of the last period, moved along
        t_arr, u_arr, s_arr, e_arr, p_arr = sched.arrays
        a, b = s1.id, s2.id
        ks = np.arange(1, m + 1)[:, None]
        ne, nq = st.n_engines, st.dma_queues
        period = [np.frombuffer(x, dtype=dt)[a:b].copy() for x, dt in zip(sched.arrays, _DTYPES)]
        tm, u, st_, en, p = (x[None, :] for x in period)
        u = u.astype(np.int64)
        grown = (np.tile(tm, (m, 1)), np.where(u >= ne, ne + (u - ne + ks * n_dma) % nq, u), st_ + ks * delta,
                 en + ks * delta, np.where(p >= 0, p + ks * D, -1))  # fmt: skip
        for x, g, dt in zip(sched.arrays, grown, _DTYPES):  # (no NumPy view of an array may live while it grows)
            x.frombytes(g.astype(dt).tobytes())
        shift, ids = m * delta, m * D
        for j, (b1, b2) in enumerate(zip(s1.dma_busy, s2.dma_busy)):
            sched.dma_busy[j] += m * (b2 - b1)
        self.advanced += m * D
        # clocks
        free, last = st.free, st.last
        for u_ in range(ne):
            if self._uses(lf, u_):
                free[u_] += shift
                last[u_] += ids
        if lf.dma:
            old_free, old_last = free[ne:], last[ne:]
            rr0, rr1 = s2.rr, s2.rr + m * n_dma
            for c in range(nq):
                src, dst = (rr0 + c) % nq, ne + (rr1 + c) % nq
                free[dst], last[dst] = old_free[src] + shift, old_last[src] + ids
            st.rr[0] = rr1
        for port in lf.ports:
            st.port_free[port] += shift
            st.port_last[port] += ids
        if lf.dge:
            for d in range(len(st.dge_free)):
                if st.dge_last[d] >= s1.id:
                    st.dge_free[d] += shift
                    st.dge_last[d] += ids
        if "tensor" in lf.engines:
            st.te_start[0] += shift
        if lf.dma:
            pool = st.pool
            for j in range(bisect_right(pool.ends, F2), len(pool.ends)):
                pool.starts[j] = max(pool.starts[j], F2) + shift
                pool.ends[j] += shift
                pool.owners[j] += ids
            if pool.floor > F2:
                pool.floor += shift
                pool.floor_owner += ids
        # the records the last period touched, then the moving tiles' accesses of the skipped instructions
        spaces = tracker.spaces
        for (key, box), f in s2.fields.items():
            if f is None or key in lf.moving:
                continue
            rec = spaces[key].exact[box]
            if rec[2] >= a:
                rec[1] += shift
                rec[2] += ids
            if rec[4] >= a:
                rec[3] += shift
                rec[4] += ids
        self._replay(items, e_arr)
        return True

    def _replay_safe(self, items, fields, F) -> bool:
        """The moving regions of the skipped iterations overlap only records older than ``F`` (what they read was
        written before any of them could start; a tile they store to was not touched since before either), and
        none of the regions the body keeps touching (which are moved along in place, not replayed)."""
        spaces = self.st.tracker.spaces
        kept = {id(spaces[key].exact[box]) for (key, box), f in fields.items() if f is not None}
        for _, r, w in items:
            for key, box in r:
                space = spaces.get(key)
                if space is not None and any(rec[1] > F or id(rec) in kept for rec in _overlapping(space, box)):
                    return False
            for key, box in w:
                space = spaces.get(key)
                if space is not None and any(rec[1] > F or rec[3] > F for rec in _overlapping(space, box)):
                    return False
        return True

    def _replay(self, items, e_arr) -> None:
        """Commit the moving regions' accesses of the skipped instructions, as scheduling them would have."""
        tracker = self.st.tracker
        ready, commit, spaces, log = tracker.ready, tracker.commit, tracker.spaces, self.log
        for n, r, w in items:
            log.append((r, w))
            end = e_arr[n]
            if w:
                ready(r, w)  # (finds the records the write supersedes, for commit)
                commit(r, w, end, n)
                continue
            for key, box in r:  # a read: the region's record learns its latest reader (``deps.commit``)
                space = spaces.get(key)
                rec = space.exact.get(box) if space is not None else None
                if rec is not None and rec[5]:
                    if end > rec[3]:
                        rec[3], rec[4] = end, n
                else:
                    commit(((key, box),), (), end, n)
