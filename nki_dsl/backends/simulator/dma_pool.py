"""The DMA engines' shared bandwidth, as one timeline that later transfers may backfill.

The 16 DMA engines serve all queues, interleaving them (§3.4: round-robin across queues), so a transfer that
became ready early is not held behind one issued before it that is still waiting for its data. A transfer over
``n`` of the 16 engines for ``d`` ns uses ``n / 16`` of the aggregate bandwidth for ``d``; the pool books that as
``d * n / 16`` ns of the whole (a fluid approximation: small transfers share the engines). Bookings are kept as
merged busy intervals. A transfer streams whenever bandwidth is free from its ready time on: it fills the gaps
left between bookings made for transfers issued before it (which may lie in the future, e.g. a store waiting for
compute), in as many pieces as it takes, so a store booked ahead does not hold back loads that are ready now.

Only the most recent ``KEEP`` intervals are kept: time before them counts as busy, which is conservative (a
transfer never backfills further back than that).
"""

from __future__ import annotations

from bisect import bisect_right

KEEP = 256
_EPS = 1e-6  # ns: gaps narrower than this are not worth a piece


class DmaPool:
    def __init__(self, engines: int):
        self.engines = engines
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.owners: list[int] = []  # the transfer whose booking ends each interval
        self.floor = 0.0
        self.floor_owner = -1

    def book(self, ready: float, duration: float, engines: int, ident: int) -> tuple[float, float, int]:
        """Stream ``duration`` ns over ``engines`` engines from ``ready`` on, in the free gaps; returns the stream
        start, the end (never before ``start + duration``: a transfer is no faster than its own engines) and the
        transfer whose booking delayed it (-1 when none did)."""
        remaining = duration * engines / self.engines
        cur, who = ready, -1
        if self.floor > cur:
            cur, who = self.floor, self.floor_owner
        starts, ends, owners = self.starts, self.ends, self.owners
        k = bisect_right(ends, cur)  # intervals ending at or before cur cannot block
        if k == len(starts):  # nothing booked from cur on (the common case): one piece
            hi = cur + remaining
            self._insert(cur, hi, ident)
            return cur, max(hi, cur + duration), who
        pieces = []
        while True:
            if k < len(starts) and starts[k] <= cur + _EPS:  # inside a booking: skip to its end
                if ends[k] > cur:
                    cur, who = ends[k], owners[k]
                k += 1
                continue
            gap = (starts[k] if k < len(starts) else float("inf")) - cur
            take = remaining if remaining <= gap else gap
            pieces.append((cur, cur + take))
            remaining -= take
            cur += take
            if remaining <= _EPS:
                break
        for lo, hi in pieces:
            self._insert(lo, hi, ident)
        start = pieces[0][0]
        return start, max(cur, start + duration), who

    def _insert(self, lo: float, hi: float, ident: int) -> None:
        starts, ends, owners = self.starts, self.ends, self.owners
        k = bisect_right(starts, lo)
        if k > 0 and ends[k - 1] >= lo:  # touches the previous interval: extend it
            k -= 1
            if hi > ends[k]:
                ends[k], owners[k] = hi, ident
        else:
            starts.insert(k, lo)
            ends.insert(k, hi)
            owners.insert(k, ident)
        while k + 1 < len(starts) and starts[k + 1] <= ends[k]:  # swallow intervals it now touches
            if ends[k + 1] > ends[k]:
                ends[k], owners[k] = ends[k + 1], owners[k + 1]
            del starts[k + 1], ends[k + 1], owners[k + 1]
        if len(starts) > KEEP:
            drop = len(starts) - KEEP
            self.floor, self.floor_owner = max(self.floor, max(ends[:drop])), owners[drop - 1]
            del starts[:drop], ends[:drop], owners[:drop]
