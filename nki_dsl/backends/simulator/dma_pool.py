"""The DMA engines' shared bandwidth, as one timeline that later transfers may backfill.

The 16 DMA engines serve all queues, interleaving them (§3.4: round-robin across queues), so a transfer that
became ready early is not held behind one issued before it that is still waiting for its data. A transfer over
``n`` of the 16 engines for ``d`` ns uses ``n / 16`` of the aggregate bandwidth for ``d``; the pool books that as
``d * n / 16`` ns of the whole (a fluid approximation: small transfers share the engines). Bookings are kept as
merged busy intervals; the earliest gap at or after a transfer's ready time that fits it is taken.

Only the most recent ``KEEP`` intervals are kept: time before them counts as busy, which is conservative (a
transfer never backfills further back than that).
"""

from __future__ import annotations

from bisect import bisect_right

KEEP = 256


class DmaPool:
    def __init__(self, engines: int):
        self.engines = engines
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.owners: list[int] = []  # the transfer whose booking ends each interval
        self.floor = 0.0
        self.floor_owner = -1

    def book(self, ready: float, duration: float, engines: int, ident: int) -> tuple[float, int]:
        """Book ``duration`` ns over ``engines`` engines at the earliest fitting time >= ready; returns the stream
        start and the transfer whose booking delayed it (-1 when none did)."""
        occupy = duration * engines / self.engines
        s, who = ready, -1
        if self.floor > s:
            s, who = self.floor, self.floor_owner
        starts, ends = self.starts, self.ends
        k = bisect_right(ends, s)  # intervals ending at or before s cannot block
        while k < len(starts) and starts[k] < s + occupy:
            if ends[k] > s:
                s, who = ends[k], self.owners[k]
            k += 1
        self._insert(s, s + occupy, ident)
        return s, who

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
