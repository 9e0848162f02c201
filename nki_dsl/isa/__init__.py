"""``nki_dsl.isa`` (``nisa``): engine instructions in the style of legacy ``neuronxcc.nki.isa``.

Each function emits one instruction of the op table (``nki_dsl.ir.ops.isa``) on the engine it names and returns
its result tile (``dma_copy`` writes into ``dst`` and returns None). Functions are passed as NumPy ufuncs, ``nl``
functions or names; ``mask=`` and ``dtype=`` work as on ``nl`` ops.
"""

from nki_dsl.isa.activations import activation, activation_reduce
from nki_dsl.isa.dma import dma_copy, dma_transpose
from nki_dsl.isa.dropout import dropout
from nki_dsl.isa.enums import (
    DgeMode,
    Engine,
    MatmulPerfMode,
    NcVersion,
    OobMode,
    ReduceCmd,
    dge_mode,
    engine,
    get_nc_version,
    gpsimd_engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)
from nki_dsl.isa.indexing import affine_select, iota
from nki_dsl.isa.matmul import nc_matmul, nc_transpose
from nki_dsl.isa.mx import nc_matmul_mx, quantize_mx
from nki_dsl.isa.random import rand2, rng, set_rng_seed
from nki_dsl.isa.reductions import bn_aggr, bn_stats, tensor_partition_reduce, tensor_reduce
from nki_dsl.isa.shuffle import nc_stream_shuffle
from nki_dsl.isa.unmodelled import (
    builtin_custom_op,
    local_gather,
    max8,
    nc_find_index8,
    nc_match_replace8,
    range_select,
    select_reduce,
    sequence_bounds,
    tensor_copy_dynamic_dst,
    tensor_copy_dynamic_src,
)
from nki_dsl.isa.vector_alu import (
    memset,
    reciprocal,
    scalar_tensor_tensor,
    tensor_copy,
    tensor_copy_predicated,
    tensor_scalar,
    tensor_scalar_reduce,
    tensor_tensor,
    tensor_tensor_scan,
)

# Instruction name (as in the op table, without "nisa.") -> API function.
INSTRUCTIONS = {
    f.__name__: f
    for f in (
        nc_matmul, nc_matmul_mx, quantize_mx, nc_transpose, activation, activation_reduce, tensor_tensor, tensor_scalar,
        tensor_scalar_reduce, scalar_tensor_tensor, tensor_tensor_scan, tensor_copy, tensor_copy_predicated, dropout,
        reciprocal, memset, rng, rand2, set_rng_seed,
        tensor_reduce, tensor_partition_reduce, bn_stats, bn_aggr, iota, affine_select, dma_copy, dma_transpose,
    )
}  # fmt: skip

# Compositions of several instructions (isa/shuffle.py) and the refused instructions (isa/unmodelled.py).
COMPOSED = {"nc_stream_shuffle": nc_stream_shuffle}
REFUSED = {
    f.__name__: f
    for f in (max8, nc_find_index8, range_select, select_reduce, nc_match_replace8, sequence_bounds, local_gather,
              tensor_copy_dynamic_src, tensor_copy_dynamic_dst, builtin_custom_op)
}  # fmt: skip

__all__ = [
    *INSTRUCTIONS, *COMPOSED, *REFUSED,
    "engine", "reduce_cmd", "dge_mode", "oob_mode", "nc_version", "get_nc_version", "matmul_perf_mode",
    "Engine", "ReduceCmd", "DgeMode", "OobMode", "NcVersion", "MatmulPerfMode",
    "tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine", "unknown_engine",
]  # fmt: skip
