"""``nl.tile_size`` of the current API (reference/nki.md §2.7 "tile_size", §1.2): the legacy ``nl.tile_size``
limits (read from the target a kernel is traced for, each read recorded as a fact the trace depends on) plus the
0.6 names derived from them."""

from __future__ import annotations

from nki_dsl.language import tile_size as _legacy

_DERIVED = {
    # 0.6 name -> (legacy limit it derives from, factor)
    "psum_bank_fmax_bytes": ("psum_bank_fmax", 4),  # fp32 elements of one bank, in bytes
    "sbuf_fmax_bytes": ("total_available_sbuf_size", 1),  # usable bytes per partition
    "sbuf_fmax": ("total_available_sbuf_size", 1 / 4),  # fp32 elements per partition
}


class _TileSize:
    def __getattr__(self, name: str):
        if name in _DERIVED:
            base, factor = _DERIVED[name]
            return int(getattr(_legacy, base) * factor)
        if name == "sbuf_size_bytes":  # all partitions
            return int(_legacy.total_available_sbuf_size * _legacy.pmax)
        return getattr(_legacy, name)

    def __dir__(self) -> list[str]:
        return sorted({*dir(_legacy), *_DERIVED, "sbuf_size_bytes"})

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()
