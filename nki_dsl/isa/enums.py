"""The enumerations and target queries of legacy ``nki.isa``: engines, accumulator commands, DMA modes and the
NeuronCore generation of the target being traced for."""

from __future__ import annotations

from enum import Enum, IntEnum

from nki_dsl.targets import DEFAULT_TARGET, get_target
from nki_dsl.trace.builder import current, is_tracing


class Engine(IntEnum):
    """The engine an instruction runs on (``engine=``); ``unknown`` lets the compiler choose."""

    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    vector = 5
    sync = 6


class ReduceCmd(Enum):
    """What an instruction does with the engine's per-partition accumulator registers (``reduce_cmd=``).

    ``idle``: do not use them; ``reset``: reset them; ``reset_reduce``: reset, then accumulate this instruction's
    reduction; ``reduce``: accumulate onto their current value.
    """

    idle = 0
    reset = 1
    reset_reduce = 2
    reduce = 3


class DgeMode(Enum):
    """Descriptor generation for a DMA (``dge_mode=``): software, hardware, none, or compiler's choice."""

    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class OobMode(Enum):
    """What a DMA does with an out-of-bounds access (``oob_mode=``): raise, or skip the element."""

    error = 0
    skip = 1


class MatmulPerfMode(Enum):
    """Tensor-engine matmul mode (``perf_mode=``; reference/nki.md §2.6, §2.7 "Enums": 'none' / 'double_row').

    ``double_row`` (NC-v3+, FP8 operands only): the contraction runs over the partitions times a first free
    axis of 2, ``stationary [K, 2, M]``, ``moving [K, 2, N]``, so K*2 = 256 rows "effectively presenting a
    256x128 systolic array" at twice the rate (§1.2, §2.7 nc_matmul, §3.1)."""

    none = "none"
    double_row = "double_row"


class NcVersion(IntEnum):
    """NeuronCore generation: gen2 (Trn1/Inf2), gen3 (Trn2), gen4 (Trn3)."""

    gen2 = 2
    gen3 = 3
    gen4 = 4


# Legacy NKI spells these in lower case (``nisa.engine.vector``, ``nisa.reduce_cmd.idle``).
engine = Engine
reduce_cmd = ReduceCmd
dge_mode = DgeMode
oob_mode = OobMode
nc_version = NcVersion
matmul_perf_mode = MatmulPerfMode

tensor_engine = Engine.tensor
vector_engine = Engine.vector
scalar_engine = Engine.scalar
gpsimd_engine = Engine.gpsimd
unknown_engine = Engine.unknown


def get_nc_version() -> NcVersion:
    """The NeuronCore generation of the target the kernel is being traced for (``Target.nc_version``; reference/nki.md
    §2.7 "Multi-core, target, enums"); reading it ties the trace to targets of that generation. Called outside a
    kernel: the generation of the target user-facing calls run on when they name none (trn2, gen3)."""
    if not is_tracing():
        return NcVersion(get_target(DEFAULT_TARGET).nc_version)
    return NcVersion(current("nisa.get_nc_version").target_fact("nc_version"))
