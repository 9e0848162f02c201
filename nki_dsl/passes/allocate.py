"""Placement of every on-chip tensor in SBUF or PSUM for a target: what the ``allocate`` step produces and the
simulator reads to know which buffer region an instruction touches (so it can find RAW/WAR/WAW dependences)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Placement:
    """Where one on-chip tensor lives. SBUF/PSUM are 2-D (partitions x bytes), so a tensor is a rectangle: partitions
    ``[partition_start, partition_start + partitions)`` x bytes ``[byte_offset, byte_offset + bytes_per_partition)``
    of every partition (reference/nki.md §1.1). A tensor allocated in a loop body gets ``buffers`` rotating copies,
    copy ``k`` at ``byte_offset + k * bytes_per_partition``; iteration ``i`` uses copy ``i % buffers``, so a DMA
    filling the next copy can overlap compute on the current one."""

    tensor: str
    buffer: str  # "sbuf" | "psum"
    partition_start: int
    partitions: int
    byte_offset: int
    bytes_per_partition: int
    buffers: int = 1

    @property
    def footprint(self) -> int:
        """Bytes per partition taken by all rotating copies."""
        return self.bytes_per_partition * self.buffers

    def copy_offset(self, iteration: int) -> int:
        """Byte offset of the copy iteration ``iteration`` of the enclosing loop uses."""
        return self.byte_offset + (iteration % self.buffers) * self.bytes_per_partition


@dataclass
class Allocation:
    """The placements of one kernel for one target, keyed by tensor name."""

    target: str
    placements: dict[str, Placement] = field(default_factory=dict)

    def peak_bytes(self, buffer: str) -> int:
        """Highest byte address (per partition) any tensor in ``buffer`` reaches."""
        return max((p.byte_offset + p.footprint for p in self.placements.values() if p.buffer == buffer), default=0)
