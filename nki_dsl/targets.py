"""Hardware constants of one NeuronCore per target (trn1, trn2, trn3): the single table the verifier, the allocator
and the simulator's cost model read. Every field names its source section in ``reference/nki.md``; where sources
disagree the comment says which value was chosen and why, and the other is kept as a documented alternative. The
model must predict, not fit: never change a constant to make one benchmark look better."""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.errors import NkiApiError

KIB = 1024


@dataclass(frozen=True, repr=False)
class Target:
    """One NeuronCore generation's facts. Resolved from a name once, where the user names it (``get_target``),
    then passed inward as this object: nothing below the API takes a target name."""

    name: str
    nc_version: int  # NeuronCore generation: v2 (Trn1/Inf2), v3 (Trn2), v4 (Trn3) (§1.1 table, §2.3 enums)
    cores_per_chip: int  # §1.1 table "cores / chip"

    # --- on-chip memory (§1.1, §1.2) ---
    partitions: int  # SBUF and PSUM partitions, tile_size.pmax (§1.1, §1.2 TC#1)
    sbuf_bytes_per_partition: int  # §1.1 table "SBUF / core" divided by 128 partitions
    psum_bytes_per_partition: int  # §1.1 table "PSUM / core": 128 x 16 KiB
    psum_banks: int  # §1.1 "8 banks x 2 KiB per partition"
    psum_bank_bytes: int  # §1.1, §1.2 TC#2: one bank holds 512 fp32 per partition

    # --- tile limits (§1.2, §2.3); ``nl.tile_size`` and the verifier read them from here ---
    max_free_dims: int  # "up to four-dimensional tensorized access pattern": partition + 4 free axes (§1.2)
    bn_stats_fmax: int  # elements per partition one bn_stats reads: tile_size.bn_stats_fmax = 512 (§1.2, §2.3)
    vector_transpose_max: int  # the Vector engine transposes tiles of at most 32x32 (§2.3 nc_transpose)
    # nisa.sendrecv with dma_engine=gpsimd_dma moves at most 1024 / 512 / 256 B per partition for 32 / 16 / 8-bit
    # dtypes: this many elements, whatever the width (§2.7 sendrecv)
    gpsimd_dma_elements: int
    # Byte alignment of free-dim addresses (tile_size.sbuf_min_align / psum_min_align): "values not documented"
    # (§1.2); 4 B (one fp32) is assumed. PSUM tiles are placed on whole 2 KiB banks anyway (§1.1).
    sbuf_min_align: int
    psum_min_align: int

    # --- engine clocks, GHz (§1.1 table) ---
    tensor_ghz: float
    vector_ghz: float
    scalar_ghz: float
    gpsimd_ghz: float

    # --- instruction issue (§2.3) ---
    min_ii_cycles: int  # "MIN_II is roughly 64 engine cycles" (§2.3 header)

    # --- Tensor engine (§3.1, §3.2) ---
    pe_rows: int  # 128x128 systolic array (§3.1)
    pe_cols: int
    mm_init_latency_cycles: int  # MM_INIT_LATENCY = 64 TensorE cycles; II ~ max(N, 64) (§3.2)
    fp32_matmul_slowdown: int  # "FP32 ~ 4x slower" (§3.2; §3.1 FP32 TFLOPS = 1/4 of bf16)
    fast_load_stationary_factor: int  # LoadStationary "up to 4x faster" than MultiplyMoving (§3.2)
    quoted_bf16_tflops: float  # quoted dense BF16 peak per core (§3.1); tests check it against 128*128*2*clock
    quoted_fp32_tflops: float  # quoted FP32 matmul peak per core (§3.1)
    # Moving-tile elements the array takes in per cycle (§3.1 TensorE row, "(input)"): 2x128 for dense BF16/FP16
    # on every generation; dense FP8 is 4x128 on NC-v3 only ("double-row": 158 FP8 vs 79 BF16 TFLOPS). NC-v2 lists
    # cFP8 at the BF16 rate; NC-v4 has 8x128 for MXFP8 but 2x128 for non-MX FP8 (MX formats are not modelled).
    tensor_input_elems_per_cycle: int
    tensor_fp8_input_elems_per_cycle: int
    # MX matmul (nc_matmul_mx, NC-v4 only): "8x128 (MXFP8 dense)" input elements per cycle against "2x128" for
    # BF16 (§3.1 TensorE row): 4x the BF16 rate ("4x BF16 throughput", §2.7 nc_matmul_mx; 315 vs 79 TFLOPS,
    # §3.1). 0 where there is no MX.
    tensor_mx_speedup: int
    # Moving free size one nc_matmul takes, fp32 dst: 512 on NC-v2/v3, "due to the fact that each nc_matmul can
    # only write to a single PSUM bank"; NC-v4 "can go up to 4096 for float32 dst or 8192 for bfloat16 dst,
    # matching the size of 8x PSUM banks (the entire PSUM)" (§1.2 "Matmul detail", §2.7 nc_matmul and
    # nc_matmul_mx). ``nl.tile_size.gemm_moving_fmax`` stays 512 (§1.2 TC#3, §2.7 tile_size): it is the
    # documented constant kernels size one-bank PSUM tiles with, not this limit.
    matmul_moving_fmax: int
    quoted_fp8_tflops: float  # quoted dense (non-MX) FP8 peak per core (§3.1); tests check the model against it

    # --- Vector / Scalar / GpSimd (§3.3, §3.1) ---
    vector_static_overhead_cycles: int  # +100 cycles for dependent or N << 128 instructions (§3.3)
    sbuf_access_overhead_cycles: int  # ~60 cycles to initiate an SBUF/PSUM access, quoted for NC-v2 (§3.3)
    stride_penalty: float  # minor-dim stride > 16 B halves bandwidth (§3.3)
    stride_penalty_min_bytes: int  # the 16 B threshold of that penalty (§3.3)
    # Elements per cycle across all partitions. The §2.3 costs (N cycles for N elements per partition) are the
    # 128-lane baseline; NC-v3+ perf modes raise bf16/fp16 SBUF-contiguous copies/tensor_scalar to 4x (512) and other
    # dtypes / non-contiguous / tensor_tensor to 2x (256) (§3.1 VectorE row, §3.3 "NC-v3 VectorE perf mode").
    vector_lanes: int  # 128 lanes: one partition per lane (§3.1)
    vector_elems_per_cycle_16bit: int  # bf16/fp16(/fp8 on v4) peak (§3.1)
    vector_elems_per_cycle_other: int  # other dtypes peak (§3.1)
    scalar_elems_per_cycle_16bit: int  # §3.1 ScalarE row: v4 gets 256 for bf16/fp16/fp8 (§3.3 "NC-v4 ScalarE 2x")
    scalar_elems_per_cycle_other: int  # §3.1 ScalarE row: 128
    act_read_accumulator_cycles: int  # ActReadAccumulator ~64 ScalarE cycles (§3.3)
    gpsimd_start_cycles: int  # GPSIMD_START ~150 cycles (iota 150 + N, affine_select; §2.3)
    dynamic_copy_min_ii_cycles: int  # MIN_II_DYNAMIC ~600 cycles (tensor_copy_dynamic_*; §2.3)

    # --- DMA (§3.4) ---
    dma_engines: int  # 16 DMA engines per core (§1.1, §3.4)
    dma_queues_per_engine: int  # 16 queues per engine, in order within a queue (§3.4)
    # Per-engine peak, bytes per ns. Three figures are documented: the NC-v2 arch guide's 27 GiB/s (29 B/ns), the
    # newer DMA guide's prose (27.2 GB/s for NC-v2/v3, 38.4 GB/s for NC-v4) and the same guide's table (17 / 23 /
    # 33 B/ns). Chosen: the table. The one measurement documented (§3.4: "the first DMA engine takes 1416 ns to
    # load 32 KiB" on Trn2, 23.1 B/ns at 4 KiB per partition, where the payload curve says the transfer is fully
    # amortised) agrees with the table's 23 and rules out 27.2 for NC-v3; the table is one consistent source for
    # all three generations, so its 17 (NC-v2) and 33 (NC-v4) are taken with it. The 27 GiB/s and 27.2 / 38.4 GB/s
    # figures are kept as ``dma_engine_bytes_per_ns_alt``.
    dma_engine_bytes_per_ns: float
    dma_engine_bytes_per_ns_alt: float  # documented alternative: 27 GiB/s (v2 arch guide) / 38.4 GB/s (v4 prose)
    # Fixed cost of one transfer, ns: ~1300 ns "descriptor setup, synchronization, and semaphore-to-start latency
    # (cross-engine)" (§3.4). The DMA engines process one transfer at a time and every transfer involves all 16, so
    # the fixed costs of all queues' transfers follow one another on the engines, each one overlapping the streaming
    # of the transfer before it: a transfer of more than dma_fixed_ns * per-engine peak / 8 bytes per partition
    # (2.7 KiB on trn1, 3.7 KiB on trn2, between the curve's "approaches peak" at 2 KiB and "fully amortizes" at
    # 4 KiB) hides the next one's (scheduler docstring; docs/dma_model.md argues the reading).
    dma_fixed_ns: float
    # Hardware DGE (NC-v3 only is documented, §3.4): "each DGE-based DMA instruction takes about 600 ns to
    # execute", on one of "two DGE instances per core". A DMA asking for the hardware DGE pays this instead of the
    # fixed cost above, and the two instances are shared by all queues. None where undocumented.
    dge_fixed_ns: float | None
    dge_instances: int  # two DGE instances per core (§3.4); 0 where there is no hardware DGE
    dma_partitions_per_engine: int  # "each DMA engine ... eight SBUF partitions (128 / 16)" (§3.4)
    # Payload-efficiency curve by bytes per partition (§3.4): "< 256 B per partition: severely overhead-bound;
    # 256 B - 2 KiB: improving; >= 2 KiB: approaches peak; >= 4 KiB: fully amortizes". A transfer is a
    # scatter-gather list with one descriptor per contiguous run (§3.4), and the mechanism behind the curve is a
    # fixed cost per descriptor. The curve's knee, where a descriptor stops being overhead-bound, is where its
    # overhead equals its streaming time: the overhead is the time to stream ``dma_overhead_bound_bytes`` (256 B)
    # at peak. That gives efficiency b / (b + 256): 33 % at 128 B, 50 % at 256 B, 89 % at 2 KiB ("approaches
    # peak"), 94 % at 4 KiB, 97 % at 8 KiB (``cost.dma_efficiency``). The other two sizes are kept for the
    # fidelity table that checks the curve against the documented bands.
    dma_overhead_bound_bytes: int
    dma_near_peak_bytes: int
    dma_full_efficiency_bytes: int
    # DMA transpose throughput as a fraction of plain DMA (§3.4, documented for Trn2 and used for every target, as
    # no other figure is given): HBM -> SBUF "up to 90%", SBUF -> SBUF "up to 50%" of DMA throughput.
    dma_transpose_hbm_fraction: float
    dma_transpose_sbuf_fraction: float
    quoted_dma_gb_per_s: float  # quoted per-core DMA peak, = engines x per-engine (§3.4 table: 272 / 368 / 528 GB/s)

    # --- HBM (§1.1 table, §3.4) ---
    # Chip HBM bandwidth (§1.1): trn1 820, trn2 2900 ("2.9 TB/sec"; the NKI guide's "3TB/s" is the same figure
    # rounded), trn3 4700. The per-core share (chip / cores, §3.4 "derived, not stated") is the roofline's memory
    # roof when it is below the DMA engines' peak (trn2: 362 < 368 GB/s). It does not cap the modelled DMA rate:
    # the documented Trn2 measurement streams 16 x 23.1 = 370 GB/s into one core, above its 362 GB/s share, so
    # one core running alone is limited by its DMA engines, not by HBM. (The third-party 440 / 640 GB/s figures
    # of §3.4 have no stated definition and are not used.)
    hbm_chip_gb_per_s: float
    hbm_bytes_per_chip: int  # chip HBM capacity (§1.1 table "HBM / chip"): trn1 32 GiB, trn2 96 GiB, trn3 144 GiB

    def __repr__(self) -> str:
        return f"<Target {self.name}>"

    def __hash__(self) -> int:
        # Targets key the jit and simulator caches on every call: hash the name (equal targets share it) rather
        # than all fields; equality still compares every field.
        return hash(self.name)

    @property
    def psum_bank_fp32(self) -> int:
        """fp32 elements per partition in one PSUM bank (512, tile_size.psum_fmax; §1.2 TC#2)."""
        return self.psum_bank_bytes // 4

    @property
    def gemm_stationary_fmax(self) -> int:
        """Free size of the stationary matmul operand: 128, "due to the number of PE columns" (§1.2 TC#3)."""
        return self.pe_cols

    @property
    def gemm_moving_fmax(self) -> int:
        """Free size of the moving matmul operand: 512, as "each nc_matmul can only write to a single PSUM bank"
        of 512 fp32 per partition (§1.2 TC#3)."""
        return self.psum_bank_fp32

    @property
    def psum_tile_bytes(self) -> int:
        """Bytes per partition of the largest PSUM tile: one bank, or on NC-v4 the span of a widest matmul
        result (4096 fp32 = all 8 banks, §1.2 "Matmul detail")."""
        return max(self.psum_bank_bytes, 4 * self.matmul_moving_fmax)

    @property
    def max_tile_rank(self) -> int:
        """Dimensions of one on-chip access pattern: the partition axis and ``max_free_dims`` free axes (§1.2)."""
        return 1 + self.max_free_dims

    @property
    def tensor_peak_flops_per_ns(self) -> float:
        """Dense BF16 Tensor-engine peak, derived: every PE does one multiply-add (2 FLOPs) per cycle (§3.1:
        128*128*2*clock)."""
        return self.pe_rows * self.pe_cols * 2 * self.tensor_ghz

    @property
    def hbm_bytes_per_ns_per_core(self) -> float:
        """HBM bandwidth per core, derived: chip bandwidth shared evenly by its cores (§3.4 'HBM per core')."""
        return self.hbm_chip_gb_per_s / self.cores_per_chip

    @property
    def dma_descriptor_ns(self) -> float:
        """Fixed cost of one DMA descriptor on its engine: the time to stream the payload-curve knee (256 B) at
        the engine's peak (§3.4; see ``dma_overhead_bound_bytes``)."""
        return self.dma_overhead_bound_bytes / self.dma_engine_bytes_per_ns

    @property
    def dma_bytes_per_ns(self) -> float:
        """Aggregate DMA peak of one core: all engines streaming at once (§3.4)."""
        return self.dma_engines * self.dma_engine_bytes_per_ns

    def clock_ghz(self, engine: str) -> float:
        """Clock of ``engine`` ('tensor', 'vector', 'scalar', 'gpsimd')."""
        try:
            return {"tensor": self.tensor_ghz, "vector": self.vector_ghz, "scalar": self.scalar_ghz,
                    "gpsimd": self.gpsimd_ghz}[engine]  # fmt: skip
        except KeyError:
            raise ValueError(f"{self.name} has no clock for engine {engine!r}") from None


# Facts the three targets share (§1.1, §1.2, §2.3, §3.2-§3.4); only the 'v2' numbers are documented for the
# overheads (MM_INIT_LATENCY, 60-cycle access, 100-cycle static overhead) and are used for all generations.
_COMMON = dict(
    partitions=128, psum_bytes_per_partition=16 * KIB, psum_banks=8, psum_bank_bytes=2 * KIB,
    max_free_dims=4, bn_stats_fmax=512, vector_transpose_max=32, gpsimd_dma_elements=256, sbuf_min_align=4,
    psum_min_align=4,
    min_ii_cycles=64, pe_rows=128, pe_cols=128, mm_init_latency_cycles=64, fp32_matmul_slowdown=4,
    fast_load_stationary_factor=4, vector_static_overhead_cycles=100, sbuf_access_overhead_cycles=60,
    stride_penalty=2.0, stride_penalty_min_bytes=16, vector_lanes=128, act_read_accumulator_cycles=64,
    gpsimd_start_cycles=150, dynamic_copy_min_ii_cycles=600, dma_engines=16, dma_queues_per_engine=16,
    dma_fixed_ns=1300.0, dma_partitions_per_engine=8, dma_overhead_bound_bytes=256, dma_near_peak_bytes=2 * KIB,
    dma_full_efficiency_bytes=4 * KIB, dma_transpose_hbm_fraction=0.9, dma_transpose_sbuf_fraction=0.5,
)  # fmt: skip

TARGETS: dict[str, Target] = {
    "trn1": Target(
        name="trn1", nc_version=2, cores_per_chip=2, sbuf_bytes_per_partition=192 * KIB,
        tensor_ghz=2.8, vector_ghz=1.12, scalar_ghz=1.4, gpsimd_ghz=1.4,
        quoted_bf16_tflops=92.0, quoted_fp32_tflops=23.0, quoted_fp8_tflops=92.0,
        tensor_input_elems_per_cycle=256, tensor_fp8_input_elems_per_cycle=256,
        tensor_mx_speedup=0, matmul_moving_fmax=512,
        # NC-v2 VectorE/ScalarE: "128 lanes", no perf modes (§3.1)
        vector_elems_per_cycle_16bit=128, vector_elems_per_cycle_other=128,
        scalar_elems_per_cycle_16bit=128, scalar_elems_per_cycle_other=128,
        dma_engine_bytes_per_ns=17.0, dma_engine_bytes_per_ns_alt=27 * 2**30 / 1e9, dge_fixed_ns=None, dge_instances=0,
        quoted_dma_gb_per_s=272.0, hbm_chip_gb_per_s=820.0, hbm_bytes_per_chip=32 * KIB**3,
        **_COMMON,
    ),
    "trn2": Target(
        name="trn2", nc_version=3, cores_per_chip=8, sbuf_bytes_per_partition=224 * KIB,
        tensor_ghz=2.4, vector_ghz=0.96, scalar_ghz=1.2, gpsimd_ghz=1.2,
        quoted_bf16_tflops=79.0, quoted_fp32_tflops=20.0, quoted_fp8_tflops=158.0,
        tensor_input_elems_per_cycle=256, tensor_fp8_input_elems_per_cycle=512,
        tensor_mx_speedup=0, matmul_moving_fmax=512,
        vector_elems_per_cycle_16bit=512, vector_elems_per_cycle_other=256,
        scalar_elems_per_cycle_16bit=128, scalar_elems_per_cycle_other=128,
        dma_engine_bytes_per_ns=23.0, dma_engine_bytes_per_ns_alt=27.2, dge_fixed_ns=600.0, dge_instances=2,
        quoted_dma_gb_per_s=368.0, hbm_chip_gb_per_s=2900.0, hbm_bytes_per_chip=96 * KIB**3,
        **_COMMON,
    ),
    "trn3": Target(
        name="trn3", nc_version=4, cores_per_chip=8, sbuf_bytes_per_partition=256 * KIB,
        tensor_ghz=2.4, vector_ghz=1.2, scalar_ghz=1.2, gpsimd_ghz=1.2,
        quoted_bf16_tflops=79.0, quoted_fp32_tflops=20.0, quoted_fp8_tflops=79.0,
        tensor_input_elems_per_cycle=256, tensor_fp8_input_elems_per_cycle=256,
        tensor_mx_speedup=4, matmul_moving_fmax=4096,
        vector_elems_per_cycle_16bit=512, vector_elems_per_cycle_other=256,
        scalar_elems_per_cycle_16bit=256, scalar_elems_per_cycle_other=128,
        dma_engine_bytes_per_ns=33.0, dma_engine_bytes_per_ns_alt=38.4, dge_fixed_ns=None, dge_instances=0,
        quoted_dma_gb_per_s=528.0, hbm_chip_gb_per_s=4700.0, hbm_bytes_per_chip=144 * KIB**3,
        **_COMMON,
    ),
}

# The target a user-facing call runs on when it names none (nki.simulate, nki.benchmark, kernel(...), the CLI).
# Only the API layer reads it: everything below is handed the resolved Target.
DEFAULT_TARGET = "trn2"


def get_target(name: str | Target) -> Target:
    """The Target called ``name`` (a Target passes through); unknown names raise, listing the valid ones. Called
    once, where the user names a target; the object is then passed inward."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        raise NkiApiError(f"unknown target {name!r}; expected one of {', '.join(TARGETS)}") from None


def shared_fact(field: str):
    """The value of Target attribute ``field`` on every known target, for rules that hold before any target is chosen
    (the op table's result rules run while tracing). Raises if the targets disagree: such a fact must be read from
    the Target being compiled for instead."""
    values = {getattr(t, field) for t in TARGETS.values()}
    if len(values) != 1:
        raise ValueError(f"Target.{field} differs between targets ({sorted(values)}); read it from the Target")
    return values.pop()
