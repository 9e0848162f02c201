"""``nki.isa.constants``: the enum re-export module production kernels import from
(``from nki.isa.constants import oob_mode, dge_mode``; reference/nki.md §2.7 "nki.isa.constants")."""

from nki_dsl.current.isa.enums import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd

__all__ = ["engine", "reduce_cmd", "dge_mode", "oob_mode", "dma_engine", "matmul_perf_mode", "nc_version"]
