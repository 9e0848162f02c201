"""``nl.tile_size`` of the current API (reference/nki.md §2.7 "tile_size", §1.2): tile limits, some per target.
Read while a kernel specialises, the memory sizes are the target's (``kernel`` traced for trn3 sees trn3's SBUF);
outside a trace they are the default target's."""

from __future__ import annotations

from nki_dsl.current.target import current_target
from nki_dsl.targets import get_target


class _TileSize:
    pmax = 128  # §1.2 TC#1
    psum_bank_fmax = 512  # fp32 elements in one 2 KiB bank (§1.2 TC#2)
    psum_fmax = 512  # deprecated name of psum_bank_fmax
    psum_bank_fmax_bytes = 2048
    gemm_stationary_fmax = 128  # §1.2 TC#3
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4  # unpublished (§2.7 "ndarray"); one fp32, as legacy nl.tile_size assumes
    sbuf_min_align = 4

    @property
    def psum_num_banks(self) -> int:
        return get_target(current_target()).psum_banks

    @property
    def sbuf_fmax_bytes(self) -> int:
        """Usable SBUF bytes per partition on the target (§1.1 table)."""
        return get_target(current_target()).sbuf_bytes_per_partition

    @property
    def total_available_sbuf_size(self) -> int:
        """Deprecated (0.4.0) name: usable SBUF bytes **per partition** (§2.7 "tile_size")."""
        return self.sbuf_fmax_bytes

    @property
    def sbuf_fmax(self) -> int:
        """fp32 elements per partition."""
        return self.sbuf_fmax_bytes // 4

    @property
    def sbuf_size_bytes(self) -> int:
        """All partitions."""
        return self.sbuf_fmax_bytes * self.pmax

    def __repr__(self) -> str:
        return f"nl.tile_size({current_target()})"


tile_size = _TileSize()
