"""``nki.isa`` of the current (0.6) API: engine instructions in destination-passing form. Every instruction takes
``dst`` first, writes it, and returns None (reference/nki.md §2.6, §2.7). ``mask=`` and ``dtype=`` are gone: edges
are slices, and the result dtype is ``dst``'s. Each is a thin wrapper over the legacy instruction (``nki_dsl.isa``):
one IR, one verifier, one set of backends for both generations."""

from nki_dsl.current import unmodelled as _unmodelled
from nki_dsl.current.isa import constants
from nki_dsl.current.isa.collectives import core_barrier, sendrecv
from nki_dsl.current.isa.composed import (
    dma_compute,
    exponential,
    max8,
    nc_find_index8,
    nc_stream_shuffle,
    range_select,
    select_reduce,
    tensor_scalar_cumulative,
)
from nki_dsl.current.isa.compute import (
    activation,
    activation_reduce,
    affine_select,
    bn_aggr,
    bn_stats,
    iota,
    quantize_mx,
    rand2,
    reciprocal,
    rng,
    scalar_tensor_tensor,
    set_rng_seed,
    tensor_reduce,
    tensor_scalar,
    tensor_scalar_reduce,
    tensor_tensor,
    tensor_tensor_scan,
)
from nki_dsl.current.isa.data_movement import (
    dma_copy,
    dma_transpose,
    memset,
    tensor_copy,
    tensor_copy_predicated,
)
from nki_dsl.current.isa.enums import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd
from nki_dsl.current.isa.instruction import NkiInstruction, returning_instruction
from nki_dsl.current.isa.registers import register_alloc, register_load, register_move, register_store
from nki_dsl.current.isa.tensor_engine import nc_matmul, nc_matmul_mx, nc_transpose
from nki_dsl.isa.enums import get_nc_version as _legacy_nc_version

# Every instruction returns its NkiInstruction (§2.7 "Common rules"; instruction.py says what depends_on honours).
(dma_copy, dma_transpose, tensor_copy, tensor_copy_predicated, memset, nc_matmul, nc_matmul_mx, nc_transpose,
 quantize_mx, activation, activation_reduce, tensor_tensor, tensor_scalar, scalar_tensor_tensor, tensor_tensor_scan,
 tensor_reduce, tensor_scalar_reduce, reciprocal, bn_stats, bn_aggr, iota, affine_select, rng, rand2, set_rng_seed,
 tensor_scalar_cumulative, exponential, select_reduce, range_select, dma_compute, nc_stream_shuffle, max8,
 nc_find_index8, sendrecv, core_barrier, register_move, register_load, register_store) = map(returning_instruction, (
    dma_copy, dma_transpose, tensor_copy, tensor_copy_predicated, memset, nc_matmul, nc_matmul_mx, nc_transpose,
    quantize_mx, activation, activation_reduce, tensor_tensor, tensor_scalar, scalar_tensor_tensor,
    tensor_tensor_scan, tensor_reduce, tensor_scalar_reduce, reciprocal, bn_stats, bn_aggr, iota, affine_select, rng,
    rand2, set_rng_seed, tensor_scalar_cumulative, exponential, select_reduce, range_select, dma_compute,
    nc_stream_shuffle, max8, nc_find_index8, sendrecv, core_barrier, register_move, register_load, register_store))

# Instructions only the current API has (no legacy nki_dsl.isa twin): name -> API function, as isa.INSTRUCTIONS.
CURRENT_ONLY = {f.__name__: f for f in (sendrecv, core_barrier)}

# Legacy spellings of the engines, still seen in kernels ported from neuronxcc.nki.
tensor_engine, vector_engine, scalar_engine, gpsimd_engine, unknown_engine = (
    engine.tensor, engine.vector, engine.scalar, engine.gpsimd, engine.unknown)  # fmt: skip


def get_nc_version() -> nc_version:
    """The NeuronCore generation the kernel is being specialised for (gen2 Trn1/Inf2, gen3 Trn2, gen4 Trn3); as
    the legacy query, reading it ties the trace to targets of that generation."""
    return nc_version(int(_legacy_nc_version()))


__all__ = [
    "dma_copy", "dma_transpose", "tensor_copy", "tensor_copy_predicated", "memset",
    "nc_matmul", "nc_matmul_mx", "nc_transpose", "quantize_mx",
    "activation", "activation_reduce", "tensor_tensor", "tensor_scalar", "scalar_tensor_tensor",
    "tensor_tensor_scan", "tensor_reduce", "tensor_scalar_reduce", "reciprocal", "bn_stats", "bn_aggr",
    "iota", "affine_select", "rng", "rand2", "set_rng_seed",
    "tensor_scalar_cumulative", "exponential", "select_reduce", "range_select", "dma_compute", "nc_stream_shuffle",
    "max8", "nc_find_index8",
    "sendrecv", "core_barrier",
    "register_alloc", "register_move", "register_load", "register_store",
    "engine", "reduce_cmd", "dge_mode", "oob_mode", "dma_engine", "matmul_perf_mode", "nc_version",
    "get_nc_version", "constants", "NkiInstruction",
    "tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine", "unknown_engine",
]  # fmt: skip

# 0.6 instructions that are not modelled resolve to functions refusing with the reason (current/unmodelled.py).
__getattr__ = _unmodelled.module_getattr("nisa", __name__, _unmodelled.ISA)
