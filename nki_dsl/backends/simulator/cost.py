"""Per-instruction durations from the cost formulas of reference/nki.md §2.3 and §3, with the target's constants.

Every compute formula counts engine cycles and converts with that engine's clock (§1.1 table). ``N`` is elements
per partition, ``P`` partitions. ``MIN_II`` (minimum initiation interval, ~64 cycles, §2.3 header) bounds every
instruction from below: an engine cannot issue faster than that however small the tile is.

On top of the per-instruction formulas (which are back-to-back throughput figures), ``overhead_cycles`` adds the
static costs §3.3 documents for Vector/Scalar instructions that cannot stream behind the previous one, and
``stride_factor`` the halved SBUF bandwidth of accesses whose minor-dim stride exceeds 16 B.

A DMA is priced as a fixed per-transfer cost plus its payload streamed over the DMA engines it uses (§3.4). The
two parts are returned separately: the scheduler lets a transfer's fixed cost overlap the streaming of the one
before it on the engines, never another fixed cost (docs/dma_model.md), while payloads share the 16 engines'
bandwidth. A DMA transpose streams at a fraction of plain DMA throughput (§3.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from nki_dsl.targets import Target

SIXTEEN_BIT = frozenset({"bfloat16", "float16"})  # the dtypes the 16-bit rates and perf modes apply to
_FP32 = "float32"
FP8 = frozenset({"float8_e4m3", "float8_e5m2"})
MX_VALUES_PER_ELEMENT = 4  # a packed MX element holds 4 values (§2.7 "dtypes")


@dataclass(frozen=True)
class CostRule:
    """How one instruction is priced: ``formula(target, template)`` in engine cycles (None for DMA, priced by
    ``dma_ns``), and ``source``, the reference/nki.md section(s) the formula comes from."""

    formula: object
    source: str


def _ii(t: Target, cycles: float) -> float:
    return max(t.min_ii_cycles, cycles)


def _matmul(t: Target, s) -> float:
    # §2.3 nc_matmul / §3.2: II = max(min(64, N_stationary), N_moving), 4x for fp32 (average back-to-back cost;
    # the 64 is MM_INIT_LATENCY, §3.2). The N_moving cycles stream the moving tile at the array's input rate
    # (§3.1: 2x128 elements per cycle). FP8 is faster only in double-row mode (perf_mode=double_row, §1.2 "a
    # 256x128 systolic array", §2.7 "2x throughput"): the moving tile [K, 2, N] (free size 2N) enters at the
    # dense-FP8 rate where the target has one (NC-v3: 4x128, the 158 TFLOPS "(double-row)" of §3.1), so in N
    # cycles for twice the contraction. A plain FP8 matmul (contraction 128) uses the 128x128 array as BF16 does:
    # FP8 at twice the BF16 FLOPs is quoted for double row only, and double row is "2x" over it (§2.7), so the
    # plain one runs at the BF16 rate. NC-v4's table gives non-MX FP8 2x128 (§3.1): no speed-up there.
    # MM_INIT_LATENCY stays the floor.
    moving = s.n_moving
    if s.double_row:
        moving = moving * t.tensor_input_elems_per_cycle / t.tensor_fp8_input_elems_per_cycle
    cycles = max(min(t.mm_init_latency_cycles, s.n_stationary), moving)
    return cycles * _fp32_factor(t, s)


def _matmul_mx(t: Target, s) -> float:
    # §2.7 nc_matmul_mx, §3.1: the MX array takes "8x128 (MXFP8 dense)" input elements per cycle, 4x the BF16
    # 2x128, so a moving tile of N packed elements (4N values per partition) streams in the cycles a BF16 tile of
    # N elements takes: II = max(min(64, M), 4N / 4), as nc_matmul's formula at the MX input rate.
    if not t.tensor_mx_speedup:
        raise NotImplementedError(f"{t.name} has no MX matmul (NC-v4 only, reference/nki.md §2.7 nc_matmul_mx)")
    moving = s.n_moving * MX_VALUES_PER_ELEMENT / t.tensor_mx_speedup
    return max(min(t.mm_init_latency_cycles, s.n_stationary), moving)


def _quantize_mx(t: Target, s) -> float:
    # §2.7 quantize_mx [T3]: "4 elems/partition/cycle" of the source, so a [P, F] source (N = F, its largest
    # operand) takes F / 4 cycles.
    return _ii(t, s.N / 4)


def _fp32_factor(t: Target, s) -> float:
    """FP32 streams at 1/4 the rate (§3.1, §3.2); is_transpose on NC-v3+ and the zeros-and-ones operand modes halve
    that (§3.2: "2x speedup in FP32 transpose", "2x better performance if ... float32")."""
    if s.dtype != _FP32:
        return 1.0
    return t.fp32_matmul_slowdown / (2.0 if s.fp32_fast else 1.0)


def load_stationary_ns(t: Target, s) -> float:
    """LoadStationary of an nc_matmul's stationary tile (§3.2): "fast LoadStationary" is up to 4x faster than a
    MultiplyMoving of the same free size, so a [128, 128] stationary loads in 32 cycles (x the FP32 factor: the
    array takes FP32 operands at a quarter of the rate either way)."""
    return s.n_stationary / t.fast_load_stationary_factor * _fp32_factor(t, s) / t.tensor_ghz


def _transpose(t: Target, s) -> float:
    if s.engine == "tensor":
        return max(s.P, min(t.mm_init_latency_cycles, s.N))  # §2.3 nc_transpose on Tensor: max(P, min(64, F))
    return _ii(t, s.N)  # §2.3 nc_transpose on Vector: max(MIN_II, N)


def _vector_perf_mode(t: Target, s) -> float:
    """NC-v3+ Vector perf mode for tensor_copy / tensor_scalar (§3.3): 4x for bf16/fp16 SBUF-to-SBUF with a
    contiguous inner dim, 2x when not contiguous or one side is in PSUM. The 4x is the 16-bit elements per cycle
    over the 128 lanes of the baseline (§3.1 VectorE row); NC-v2 has no perf mode (factor 1)."""
    full = t.vector_elems_per_cycle_16bit // t.vector_lanes
    if full <= 1 or not s.all_16bit:
        return 1.0
    if s.any_psum or not s.contiguous:
        return max(1.0, full / 2)
    return float(full)


def _scalar_perf_mode(t: Target, s) -> float:
    """NC-v4 ScalarE: 2x for bf16/fp16 tensor_scalar / tensor_copy (§3.3, §3.1 ScalarE row)."""
    if s.all_16bit and s.opcode in ("nisa.tensor_scalar", "nisa.tensor_copy"):
        return t.scalar_elems_per_cycle_16bit / t.scalar_elems_per_cycle_other
    return 1.0


def _gpsimd(t: Target, s) -> float:
    return t.gpsimd_start_cycles + s.N  # §2.3 iota / affine_select: GPSIMD_START + N; §6 GpSimd 150 + N


def _one_input(t: Target, s) -> float:
    if s.engine == "scalar":
        return _ii(t, s.N / _scalar_perf_mode(t, s))  # §2.3 / §3.3 ScalarE: max(MIN_II, N)
    if s.engine == "gpsimd":
        return _gpsimd(t, s)
    return _ii(t, s.N / _vector_perf_mode(t, s))  # §2.3 tensor_copy / tensor_scalar: max(MIN_II, N)


def _tensor_tensor(t: Target, s) -> float:
    if s.engine == "gpsimd":
        return _gpsimd(t, s)
    # §2.3: max(MIN_II, N) if one input is in PSUM and the other in SBUF, or all-bf16 SBUF add/multiply/subtract;
    # otherwise two reads per element, max(MIN_II, 2N). (The §3.3 NC-v3 "2x for all-16-bit tensor_tensor" is this
    # same halving, not applied twice.)
    fast = (s.any_psum and not s.all_psum) or (s.all_16bit and not s.any_psum and s.fn in ("add", "multiply",
                                                                                           "subtract"))
    return _ii(t, s.N if fast else 2 * s.N)


def reads_accumulator(s) -> bool:
    """Is ``s`` ScalarE's read-out of its accumulator registers (an ``activation`` marked ``reads_accumulator``,
    nki_dsl/current/isa/accumulators.py)?"""
    op = getattr(s, "op", None)
    return op is not None and bool(op.attrs.get("reads_accumulator"))


def _activation(t: Target, s) -> float:
    if reads_accumulator(s):  # §3.3: ActReadAccumulator ~64 ScalarE cycles (overhead_cycles: none)
        return t.act_read_accumulator_cycles
    cycles = _ii(t, s.N / _scalar_perf_mode(t, s))  # §2.3 activation: max(MIN_II, N)
    if s.reduces:
        cycles += t.min_ii_cycles  # §2.3 activation_reduce: max(MIN_II, N) + MIN_II
    return cycles


def _tensor_reduce(t: Target, s) -> float:
    # §2.3: N/2 when bf16 in and out and the op is add or max, else N.
    fast = s.all_16bit and s.fn in ("add", "maximum")
    return _ii(t, s.N / 2 if fast else s.N)


def _memset(t: Target, s) -> float:
    if s.engine == "gpsimd":
        return _gpsimd(t, s)
    # §2.3: max(MIN_II, N/2) when writing zero to a bf16/fp16 tile, else max(MIN_II, N).
    return _ii(t, s.N / 2 if (s.value == 0 and s.out_16bit) else s.N)


def _scalar_tensor_tensor(t: Target, s) -> float:
    # §2.3: N for bf16 subtract-then-multiply with N even, else 2N.
    fast = s.all_16bit and s.fn == "subtract" and s.fn1 == "multiply" and s.N % 2 == 0
    return _ii(t, s.N if fast else 2 * s.N)


def _predicated(t: Target, s) -> float:
    # §2.3 tensor_copy_predicated: max(MIN_II, N) with one operand in PSUM, max(MIN_II, 2N) with all in SBUF.
    return _ii(t, s.N if s.any_psum else 2 * s.N)


COMPUTE: dict[str, CostRule] = {
    "nisa.nc_matmul": CostRule(_matmul, "§2.3 nc_matmul, §3.1, §3.2; double row §1.2, §2.7"),
    "nisa.nc_matmul_mx": CostRule(_matmul_mx, "§2.7 nc_matmul_mx, §3.1 TensorE (MXFP8 input rate), §3.2"),
    "nisa.quantize_mx": CostRule(_quantize_mx, "§2.7 quantize_mx: 4 elements per partition per cycle"),
    "nisa.nc_transpose": CostRule(_transpose, "§2.3 nc_transpose"),
    "nisa.activation": CostRule(_activation, "§2.3 activation, §3.3"),
    # §2.3: max(MIN_II, N) + MIN_II
    "nisa.activation_reduce": CostRule(lambda t, s: _ii(t, s.N) + t.min_ii_cycles, "§2.3 activation_reduce"),
    "nisa.tensor_tensor": CostRule(_tensor_tensor, "§2.3 tensor_tensor, §3.3"),
    "nisa.tensor_scalar": CostRule(_one_input, "§2.3 tensor_scalar, §3.3 perf modes"),
    "nisa.tensor_copy": CostRule(_one_input, "§2.3 tensor_copy, §3.3 perf modes"),
    "nisa.tensor_copy_predicated": CostRule(_predicated, "§2.3 tensor_copy_predicated"),
    "nisa.dropout": CostRule(lambda t, s: _ii(t, s.N), "§2.3 dropout: max(MIN_II, N)"),
    "nisa.tensor_scalar_reduce": CostRule(lambda t, s: _ii(t, s.N) + t.min_ii_cycles,
                                          "§2.3 tensor_scalar_reduce: max(MIN_II, N) + MIN_II"),
    "nisa.scalar_tensor_tensor": CostRule(_scalar_tensor_tensor, "§2.3 scalar_tensor_tensor"),
    "nisa.tensor_tensor_scan": CostRule(lambda t, s: _ii(t, 2 * s.N), "§2.3 tensor_tensor_scan: max(MIN_II, 2N)"),
    # §2.7 "Random" gives no costs: priced as one pass over the elements, as dropout (§2.3: max(MIN_II, N)).
    "nisa.rng": CostRule(lambda t, s: _one_input(t, s), "§2.7 Random (no formula: max(MIN_II, N), as §2.3 dropout)"),
    "nisa.rand2": CostRule(lambda t, s: _ii(t, s.N), "§2.7 Random (no formula: max(MIN_II, N), as §2.3 dropout)"),
    "nisa.set_rng_seed": CostRule(lambda t, s: _ii(t, 1), "§2.7 Random (no formula: one MIN_II issue)"),
    "nisa.reciprocal": CostRule(lambda t, s: _ii(t, 8 * s.N), "§2.3 reciprocal: max(MIN_II, 8N) on Vector"),
    "nisa.memset": CostRule(_memset, "§2.3 memset"),
    "nisa.tensor_reduce": CostRule(_tensor_reduce, "§2.3 tensor_reduce"),
    "nisa.bn_stats": CostRule(lambda t, s: _ii(t, s.N), "§2.3 bn_stats: max(MIN_II, N)"),
    "nisa.bn_aggr": CostRule(lambda t, s: _ii(t, 13 * (s.N / 3)), "§2.3 bn_aggr: max(MIN_II, 13 * (N / 3))"),
    # §2.3 gives no formula for the partition reduce; priced like the other GpSimd ops (GPSIMD_START + N).
    "nisa.tensor_partition_reduce": CostRule(_gpsimd, "§2.3 (no formula: GpSimd GPSIMD_START + N), §3.3"),
    "nisa.iota": CostRule(_gpsimd, "§2.3 iota: 150 + N"),
    "nisa.affine_select": CostRule(_gpsimd, "§2.3 affine_select: GPSIMD_START + N"),
    # The barrier's issue; its wait for the peer core and the signal's latency are the two-core driver's
    # (simulator/cores.py: §2.7 core_barrier, the semaphore cost of §3.4).
    "nisa.core_barrier": CostRule(lambda t, s: _ii(t, 1), "§2.7 core_barrier (issue: one MIN_II; wait: cores.py)"),
}

# DMA instructions: fixed cost plus payload over the DMA engines (``dma_ns``), not an engine-cycle formula.
DMA_RULES: dict[str, CostRule] = {
    "nisa.dma_copy": CostRule(None, "§3.4"),
    "nisa.dma_transpose": CostRule(None, "§3.4 DMA transpose throughput"),
    # src into the peer core's dst: an SBUF-to-SBUF transfer, from when both cores are there (simulator/cores.py)
    "nisa.sendrecv": CostRule(None, "§3.4, §2.7 sendrecv"),
}


STATIC_OVERHEAD_ENGINES = frozenset({"vector", "scalar"})


def overhead_cycles(t: Target, s) -> float:
    """Static cycles on top of the throughput formula (§3.3), for Vector and Scalar instructions:

    * an instruction reading the output of the previous instruction on its engine (``s.dependent``) cannot be
      pipelined behind it: it pays the ~100-cycle static instruction overhead, and the ~60-cycle access overhead
      twice, since the producer's write access must complete before the consumer's read access can start (in a
      stream of independent instructions one's write overlaps the next one's read). MIN_II + 100 + 2 x 60 = 284
      cycles per tiny dependent instruction, against the 264 ScalarE cycles the perf guide measured (§3.3);
    * an instruction with N << 128 pays the static overhead only. "<<" is taken as N <= MIN_II (= 64 = half the
      lanes): the instruction is issue-bound, its formula already at the MIN_II floor."""
    if s.engine not in STATIC_OVERHEAD_ENGINES or reads_accumulator(s):
        return 0.0  # (a read of the accumulator registers is priced whole by §3.3's figure: _activation)
    if s.dependent:
        return t.vector_static_overhead_cycles + 2 * t.sbuf_access_overhead_cycles
    if t.min_ii_cycles >= s.N:
        return t.vector_static_overhead_cycles
    return 0.0


def stride_factor(t: Target, minor_stride_bytes: int) -> float:
    """SBUF/PSUM bandwidth penalty of an access whose minor-dim stride is ``minor_stride_bytes`` (§3.3: peak below
    16 B, "stride > 16 B halves bandwidth")."""
    return t.stride_penalty if abs(minor_stride_bytes) > t.stride_penalty_min_bytes else 1.0


def compute_ns(t: Target, s) -> float:
    """Duration in ns of compute instruction ``s`` (a stream template) on target ``t``: the §2.3 formula, with the
    element count scaled by the stride penalty on the Vector/Scalar/GpSimd engines (an access at half bandwidth
    takes twice the cycles per element), plus ``overhead_cycles``."""
    try:
        formula = COMPUTE[s.opcode].formula
    except KeyError:
        raise NotImplementedError(f"no cost formula for {s.opcode}") from None
    if s.stride_factor != 1.0 and s.engine != "tensor":
        s = replace(s, N=s.N * s.stride_factor)
    return (formula(t, s) + overhead_cycles(t, s)) / t.clock_ghz(s.engine)


def _without_fixed_costs(t: Target) -> Target:
    """``t`` with every per-instruction fixed cost zeroed (MIN_II, MM_INIT_LATENCY, GPSIMD_START, static and
    access overheads): pricing an instruction on it leaves only its per-element work."""
    got = _BARE.get(t.name)
    if got is None or got[0] is not t:
        bare = replace(t, min_ii_cycles=0, mm_init_latency_cycles=0, gpsimd_start_cycles=0,
                       vector_static_overhead_cycles=0, sbuf_access_overhead_cycles=0)  # fmt: skip
        got = _BARE[t.name] = (t, bare)
    return got[1]


_BARE: dict[str, tuple[Target, Target]] = {}


def useful_ns(t: Target, s) -> float:
    """The part of ``compute_ns`` that is work, not fixed cost (the Profile's "useful" time)."""
    return compute_ns(_without_fixed_costs(t), s)


def dma_efficiency(t: Target, chunk_bytes: float) -> float:
    """Fraction of peak bandwidth a descriptor of ``chunk_bytes`` contiguous bytes reaches (§3.4 payload curve): it
    pays a fixed ``Target.dma_descriptor_ns`` (the time to stream 256 B at peak) before streaming, so the efficiency
    is b / (b + 256): severely overhead-bound below 256 B, 50 % at the knee, 89 % at 2 KiB, 94 % at 4 KiB."""
    b = max(chunk_bytes, 1.0)
    return b / (b + t.dma_overhead_bound_bytes)


def dma_engines_used(t: Target, partitions: int) -> int:
    """Engines one transfer's data spreads over: each serves ``dma_partitions_per_engine`` (8) partitions (§3.4)."""
    return max(1, min(t.dma_engines, -(-partitions // t.dma_partitions_per_engine)))


def transpose_fraction(t: Target, src_on_chip: bool) -> float:
    """Throughput of a DMA transpose relative to a plain DMA (§3.4): from HBM up to 90 %, SBUF to SBUF 50 %."""
    return t.dma_transpose_sbuf_fraction if src_on_chip else t.dma_transpose_hbm_fraction


@dataclass(frozen=True)
class DmaCost:
    """One transfer (§3.4), as the scheduler books it.

    ``fixed_ns``: the per-transfer cost on its queue before any byte moves (descriptor setup, synchronisation,
    semaphore-to-start; or the hardware DGE's instruction time). ``engine_ns``: how long the busiest DMA engine
    works on it (its partitions' descriptors, each a fixed descriptor cost plus its bytes at the engine's peak
    over the transpose fraction). ``engines``: the engines holding its data. ``engine_total_ns``: work summed over
    all 16 engines, including the 4 B completion-semaphore write every engine makes for every transfer (§3.4:
    the core waits for "a semaphore increment of 16"). ``useful_ns``: the busiest engine's bytes at peak, the part
    of ``engine_ns`` that is payload rather than overhead."""

    fixed_ns: float
    engine_ns: float
    engines: int
    engine_total_ns: float
    useful_ns: float
    descriptors: int


def dma_cost(t: Target, nbytes: int, partitions: int, chunk_bytes: float, dge: bool = False,
             fraction: float = 1.0) -> DmaCost:
    """The ``DmaCost`` of one transfer of ``nbytes`` over ``partitions`` rows whose contiguous runs are
    ``chunk_bytes`` long: a scatter-gather list of one descriptor per run (§3.4), each row's descriptors on the
    engine serving that row (8 rows per engine), and the hardware DGE's fixed cost where the target documents
    one and the kernel asked for it."""
    P = max(1, partitions)
    engines = dma_engines_used(t, P)
    rows = -(-P // engines)  # rows on the busiest engine: 8 to an engine (more for an HBM-to-HBM copy of > 128)
    per_row = nbytes / P
    runs = max(1, math.ceil(per_row / max(chunk_bytes, 1.0) - 1e-9)) if nbytes else 0
    bw = t.dma_engine_bytes_per_ns
    useful = rows * per_row / bw
    engine_ns = rows * runs * t.dma_descriptor_ns + useful / fraction
    total = P * runs * t.dma_descriptor_ns + nbytes / (bw * fraction) + t.dma_engines * _semaphore_ns(t)
    fixed = t.dge_fixed_ns if (dge and t.dge_fixed_ns is not None) else t.dma_fixed_ns
    return DmaCost(fixed, engine_ns + _semaphore_ns(t), engines, total, useful, P * runs)


def _semaphore_ns(t: Target) -> float:
    """The completion write each engine makes per transfer: one more (4 B) descriptor (§3.4)."""
    return t.dma_descriptor_ns + 4 / t.dma_engine_bytes_per_ns
