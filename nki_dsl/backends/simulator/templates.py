"""What the cost model and the profile need of one engine instruction of lowered IR, computed once per op: an
``OpTemplate`` (engine, opcode, dtype, element counts, bytes, FLOPs, duration).

An instruction whose result an ``assign`` names (``passes.engines.fused_writes``) writes the assign's destination
directly; with ``accumulate=add`` it also reads it (the Tensor engine accumulating into a PSUM bank), so
``acc += matmul`` is one ``nc_matmul`` instruction.

Masked ops (a mask skips the instruction or makes its tile smaller, reference/nki.md §1.3) get a ``MaskShrink``:
given the per-instruction values of the mask's loop-dependent parts it returns the template scaled to the mask's
bounding box, or None when the mask switches the instruction off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from nki_dsl import dtypes
from nki_dsl.backends.simulator import cost
from nki_dsl.backends.simulator.units import DMA
from nki_dsl.ir.affine import var_kind
from nki_dsl.ir.indirect import hbm_operand, widened
from nki_dsl.ir.nodes import Access, Imm, Op
from nki_dsl.ir.ops import OPS, reduce_mask_operand
from nki_dsl.ir.source_safe import py_int, py_var
from nki_dsl.targets import Target

# NC-v2 engine pairs that cannot access a buffer in parallel (§3.3; the compiler serialises them; lifted on NC-v3):
# port 0: Vector and GpSimd on SBUF; port 1: Vector and Scalar on PSUM.
SBUF_PORT, PSUM_PORT = 0, 1
_CONTENDED = {(SBUF_PORT, "vector"), (SBUF_PORT, "gpsimd"), (PSUM_PORT, "vector"), (PSUM_PORT, "scalar")}


@dataclass(eq=False)
class OpTemplate:
    """``duration_ns`` prices compute; DMA carries ``fixed_ns``/``payload_ns``/``dma_engines`` (§3.4) and
    ``duration_ns = fixed + payload``. ``ports``: the NC-v2 shared buffer ports the instruction holds."""

    op: Op
    engine: str
    opcode: str
    dtype: str
    P: int
    N: int
    n_stationary: int = 0
    n_moving: int = 0
    fn: str = "none"
    fn1: str = "none"
    value: float | None = None
    reduces: bool = False
    all_16bit: bool = False
    out_16bit: bool = False
    any_psum: bool = False
    all_psum: bool = False
    contiguous: bool = True
    stride_factor: float = 1.0
    dependent: bool = False
    fp8_operands: bool = False  # nc_matmul with FP8 stationary and moving tiles (§3.1 dense FP8 peak)
    # nc_matmul with perf_mode=double_row: [K, 2, M] x [K, 2, N], contraction K x 2 (§1.2, §2.7); the only mode
    # that streams FP8 at the dense-FP8 rate (``cost._matmul``)
    double_row: bool = False
    mx_operands: bool = False  # nc_matmul_mx (§3.1 MXFP8/MXFP4 rate)
    # nc_matmul modes that halve the FP32 cost (§3.2): is_transpose on NC-v3+ ("2x speedup in FP32 transpose"),
    # and an all-zeros-and-ones operand (is_stationary_onezero / is_moving_onezero, "2x ... if float32")
    fp32_fast: bool = False
    # nc_matmul: LoadStationary time (§3.2 "fast LoadStationary": up to 4x faster than a MultiplyMoving of the same
    # free size). It runs in the background during the previous matmul; the scheduler adds what it cannot hide.
    load_stationary_ns: float = 0.0
    # The same instruction when it reads what the previous instruction on its engine wrote (Vector / Scalar only,
    # ``cost.overhead_cycles``): the stream picks it per executed instruction, since in a loop the previous
    # instruction of an iteration's first one is the previous iteration's last.
    if_dependent: OpTemplate | None = None
    nbytes: int = 0
    hbm_bytes: int = 0
    chunk_bytes: float = 0.0
    dge: bool = False
    transpose_fraction: float = 1.0
    flops: float = 0.0
    tensor_flops: float = 0.0
    duration_ns: float = 0.0
    # How ``duration_ns`` splits (the Profile's busy-time breakdown): ``useful_ns`` is the work itself (elements at
    # the engine's rate, a DMA's bytes at peak), the rest fixed overheads (MIN_II floor, MM_INIT_LATENCY, static
    # and access overheads, GPSIMD_START; a DMA's fixed cost and descriptor costs).
    useful_ns: float = 0.0
    fixed_ns: float = 0.0
    payload_ns: float = 0.0  # DMA: the busiest DMA engine's time on the transfer (descriptors + bytes)
    dma_engines: int = 0
    dma_engine_total_ns: float = 0.0  # DMA: work summed over the 16 engines (what the shared pool books)
    dma_descriptors: int = 0
    ports: tuple = ()
    index: int = 0
    reads: list = field(default_factory=list)  # Accesses read (for listings)
    writes: list = field(default_factory=list)  # Accesses written

    @property
    def loc(self):
        return self.op.loc

    @property
    def is_dma(self) -> bool:
        return self.engine == DMA


# -- operands -------------------------------------------------------------------------------------------------------
def operand_reads(op: Op, write: Op | None) -> list[Access]:
    """Accesses ``op`` reads; with a fused accumulating ``write`` also its destination."""
    out = [v for o in OPS[op.name].operands if o.role.reads
           and isinstance(v := op.operands.get(o.name), Access)]  # fmt: skip
    if write is not None and write.attrs.get("accumulate", "none") != "none":
        out.append(write.operands["dst"])
    return out


def operand_writes(op: Op, write: Op | None) -> list[Access]:
    """Accesses ``op`` writes: its out operands, and its result (or, fused, the assign's destination)."""
    out = [v for o in OPS[op.name].writes if isinstance(v := op.operands.get(o.name), Access)]
    if write is not None:
        out.append(write.operands["dst"])
    elif op.result is not None:
        out.append(op.result.full_access())
    return out


# -- templates ------------------------------------------------------------------------------------------------------
def _free(shape) -> int:
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def _partition_axis(a: Access) -> int:
    """Which axis of the access spans partitions: the access axis that indexes the tensor's partition dimension;
    failing that (no single axis there), a block tensor (``nl.par_dim``) keeps its partition axis after its leading
    block axes, integer-indexed block axes dropping out of the access's shape. (The first rule matters for an
    access that indexes a block with an integer and adds an axis elsewhere, e.g. [128, 2, 64] into a
    ``(tiles, par_dim(128), 128)`` tensor: same rank, partition axis 0.)"""
    ty = a.tensor.type
    if not ty.buffer.on_chip:
        return 0
    if len(a.index) > ty.par_axis:
        axes = {int(v[1:]) for v, _ in a.index[ty.par_axis].terms if var_kind(v) == "axis"}
        if len(axes) == 1:
            return axes.pop()
    return max(0, ty.par_axis - (len(ty.shape) - len(a.shape)))


def _p_and_n(a: Access) -> tuple[int, int]:
    """Partitions and elements per partition of an access (block axes count as free elements per partition)."""
    if not a.shape:
        return 1, 1
    axis = _partition_axis(a)
    return a.shape[axis], math.prod(a.shape) // a.shape[axis]


def _itemsize(dtype: str) -> int:
    return dtypes.get(dtype).itemsize


def _contiguous(a: Access) -> bool:
    """The innermost tensor dimension walks the innermost access axis with unit stride."""
    if not a.index:
        return True
    last = a.index[-1]
    axes = [(v, c) for v, c in last.terms if var_kind(v) == "axis"]
    return len(axes) == 1 and axes[0][1] == 1 and axes[0][0] == f"d{len(a.shape) - 1}"


def minor_stride_bytes(a: Access) -> int:
    """Byte step of an on-chip access along its innermost access axis of extent > 1 (0 when it has none): the
    element stride the engine's SBUF/PSUM interface sees (§3.3)."""
    ty = a.tensor.type
    axes = [k for k in range(len(a.shape)) if a.shape[k] > 1 and k != 0]
    if not axes:
        return 0
    axis = f"d{axes[-1]}"
    free = [k for k in range(len(ty.shape)) if k != ty.par_axis]
    item = _itemsize(ty.dtype)
    step = 0
    for k in free:
        step += a.index[k].coef(axis) * item * math.prod(ty.shape[j] for j in free if j > k)
    return step


def _hbm_run_bytes(a: Access) -> int:
    """Contiguous bytes per descriptor on the HBM side: the innermost run, one element if it is strided."""
    size = _itemsize(a.tensor.type.dtype)
    return size * a.shape[-1] if _contiguous(a) and a.shape else size


def build_template(op: Op, engine: str, target: Target, write: Op | None = None) -> OpTemplate:
    """The template of instruction ``op`` on ``engine``; ``write`` is the assign it is fused with. Its
    ``if_dependent`` twin prices it reading the output of the previous instruction on its engine."""
    reads, writes = operand_reads(op, write), operand_writes(op, write)
    spec = OPS[op.name]
    inputs = [v for n, v in op.operands.items() if isinstance(v, Access) and spec.operand(n).role.reads]
    out_dtype = op.result.type.dtype if op.result is not None else (
        writes[0].tensor.type.dtype if writes else "float32")
    accesses = reads + writes
    sizes = [_p_and_n(v) for v in accesses]
    if op.result is not None:
        sizes.append(_p_and_n(op.result.full_access()))
    P = max((p for p, _ in sizes), default=1)
    N = max((n for _, n in sizes), default=1)
    dts = [v.tensor.type.dtype for v in accesses] + [out_dtype]
    t = OpTemplate(op=op, engine=engine, opcode=op.name, dtype=out_dtype, P=P, N=N, reads=reads, writes=writes)
    t.all_16bit = all(d in cost.SIXTEEN_BIT for d in dts)
    t.out_16bit = out_dtype in cost.SIXTEEN_BIT
    on_chip_inputs = [v for v in inputs if v.tensor.type.buffer.on_chip]
    t.any_psum = any(v.tensor.type.buffer.value == "psum" for v in on_chip_inputs)
    t.all_psum = bool(on_chip_inputs) and all(v.tensor.type.buffer.value == "psum" for v in on_chip_inputs)
    t.contiguous = all(_contiguous(v) for v in accesses)
    on_chip = [v for v in accesses if v.tensor.type.buffer.on_chip]
    t.stride_factor = max((cost.stride_factor(target, minor_stride_bytes(v)) for v in on_chip), default=1.0)
    t.fn = str(op.attrs.get("op", op.attrs.get("op0", spec.fn or "none")))
    t.fn1 = str(op.attrs.get("op1", "none"))
    t.reduces = op.attrs.get("reduce_op", "none") not in ("none", None) or op.name == "nisa.activation_reduce"
    value = op.operands.get("value", op.operands.get("src"))
    t.value = value.value if isinstance(value, Imm) else op.attrs.get("value")
    if op.name == "nisa.nc_matmul":
        st, mv = op.operands["stationary"], op.operands["moving"]
        t.P, t.n_stationary, t.n_moving, t.dtype = st.shape[0], _free(st.shape), _free(mv.shape), st.tensor.type.dtype
        t.fp8_operands = st.tensor.type.dtype in cost.FP8 and mv.tensor.type.dtype in cost.FP8
        t.double_row = op.attrs.get("perf_mode") == "double_row"
        # [K, M] x [K, N]: 2KMN; double row [K, 2, M] x [K, 2, N] contracts over 2K into [M, N]: 4KMN (the free
        # sizes count the two rows on both sides, once too many)
        t.flops = t.tensor_flops = 2.0 * t.P * t.n_stationary * t.n_moving / (2 if t.double_row else 1)
        t.fp32_fast = bool(op.attrs.get("is_stationary_onezero") or op.attrs.get("is_moving_onezero")
                           or (op.attrs.get("is_transpose") and target.nc_version >= 3))  # fmt: skip
    elif op.name == "nisa.nc_matmul_mx":
        st, mv = op.operands["stationary"], op.operands["moving"]
        t.P, t.n_stationary, t.n_moving = st.shape[0], _free(st.shape), _free(mv.shape)
        t.flops = t.tensor_flops = 2.0 * 4 * t.P * t.n_stationary * t.n_moving  # 4 values per packed element
        t.mx_operands = True
    elif op.name == "nisa.nc_transpose":
        src = inputs[0].shape
        t.P, t.N = src[0], _free(src)
    else:
        t.flops = float(P * N)
    if target.nc_version == 2:
        buffers = {v.tensor.type.buffer.value for v in on_chip}
        t.ports = tuple(port for port, name in ((SBUF_PORT, "sbuf"), (PSUM_PORT, "psum"))
                        if name in buffers and (port, engine) in _CONTENDED)  # fmt: skip
    if engine == DMA:
        _dma_counts(op, t, inputs, writes, target)
        _widen_indirect(op, t)
    else:
        _price_compute(t, target)
        _twin(t, target)
    return t


def _widen_indirect(op: Op, t: OpTemplate) -> None:
    """An indirect DMA (ir/indirect.py) is priced as the DMA of its tile (one descriptor per partition's row, the
    rows being contiguous runs as in a plain load or store), but for dependences it may touch any row of its
    indexed dimension: its HBM access in ``reads``/``writes`` spans the whole dimension. With ``oob_mode=skip``
    the partitions whose row is out of range move nothing, but which ones is data the schedule cannot depend on
    (timing-only runs have none), and the reference gives no figure for a dropped transfer: the reading here is
    that the software DGE builds and checks every partition's descriptor either way and the transfer is priced
    whole (an upper bound), the same as with ``oob_mode=error``."""
    side = hbm_operand(op)
    if side is None:
        return
    hbm = op.operands[side]
    wide = widened(op, side, hbm)
    t.reads = [wide if a is hbm else a for a in t.reads]
    t.writes = [wide if a is hbm else a for a in t.writes]


def _price_compute(t: OpTemplate, target: Target) -> None:
    t.duration_ns = cost.compute_ns(target, t)
    t.useful_ns = min(t.duration_ns, cost.useful_ns(target, t))
    if t.opcode in ("nisa.nc_matmul", "nisa.nc_matmul_mx"):  # both load a stationary tile first (§3.2)
        t.load_stationary_ns = cost.load_stationary_ns(target, t)


def _twin(t: OpTemplate, target: Target) -> None:
    """Attach ``t.if_dependent`` on the engines that pay a static overhead for dependent instructions."""
    t.if_dependent = None
    if t.engine in cost.STATIC_OVERHEAD_ENGINES:
        d = t.if_dependent = replace(t, dependent=True, if_dependent=None)
        _price_compute(d, target)


def _dma_counts(op: Op, t: OpTemplate, inputs: list[Access], writes: list[Access], target: Target) -> None:
    src, dst = inputs[0], writes[-1]
    elements = math.prod(src.shape)
    t.nbytes = elements * max(_itemsize(src.tensor.type.dtype), _itemsize(dst.tensor.type.dtype))
    sides = (src, dst)
    t.hbm_bytes = sum(elements * _itemsize(a.tensor.type.dtype) for a in sides if not a.tensor.type.buffer.on_chip)
    on_chip = [a for a in sides if a.tensor.type.buffer.on_chip]
    t.P = (on_chip[0] if on_chip else dst).shape[0] if (on_chip or dst.shape) else 1
    t.N = elements // max(1, t.P)
    per_partition = t.nbytes / max(1, t.P)
    hbm_runs = [_hbm_run_bytes(a) for a in sides if not a.tensor.type.buffer.on_chip]
    t.chunk_bytes = min([per_partition, *hbm_runs])
    t.dge = op.attrs.get("dge_mode") == "hwdge"
    if op.name == "nisa.dma_transpose":
        t.transpose_fraction = cost.transpose_fraction(target, src.tensor.type.buffer.on_chip)
    _price_dma(t, target)


def _price_dma(t: OpTemplate, target: Target) -> None:
    c = cost.dma_cost(target, t.nbytes, t.P, t.chunk_bytes, t.dge, t.transpose_fraction)
    t.fixed_ns, t.payload_ns, t.dma_engines = c.fixed_ns, c.engine_ns, c.engines
    t.dma_engine_total_ns, t.useful_ns, t.dma_descriptors = c.engine_total_ns, c.useful_ns, c.descriptors
    t.duration_ns = t.fixed_ns + t.payload_ns


# -- masks ----------------------------------------------------------------------------------------------------------
class MaskShrink:
    """``shrink(values)`` for masked op ``template``: ``values`` are the loop-dependent parts (``rest``) of the
    mask's constraints, in ``constraint_sources`` order, evaluated by the generated unroller."""

    def __init__(self, op: Op, template: OpTemplate, target: Target):
        self.template, self.target = template, target
        self.shape = op.result.type.shape if op.result is not None else (
            template.writes[0].shape if template.writes else ())  # fmt: skip
        mask = op.mask
        if "reduce_mask" in op.attrs:  # a reduction reads only the box its reduce_mask keeps of its input (as the
            # NumPy backend does); that mask holds the op mask's constraints too, written over the input's axes
            mask, self.shape = op.attrs["reduce_mask"], op.operands[reduce_mask_operand(OPS[op.name])].shape
        self.single, self.per_env, self.rests = [], [], []
        for c in mask.constraints:
            axes = [(int(v[1:]), k) for v, k in c.terms if var_kind(v) == "axis"]
            rest = [(v, k) for v, k in c.terms if var_kind(v) != "axis"]
            if len(axes) == 1 and axes[0][0] < len(self.shape):
                self.single.append((len(self.rests), axes[0][0], axes[0][1]))
            elif not axes:
                self.per_env.append(len(self.rests))
            else:
                continue  # several axes in one constraint: not narrowed (conservative, the full tile)
            terms = [py_var(v) if k == 1 else f"{py_int(k)}*{py_var(v)}" for v, k in rest] + [py_int(c.const)]
            self.rests.append(" + ".join(terms))
        self.cache: dict[tuple, OpTemplate] = {}

    def __call__(self, values) -> OpTemplate | None:
        for k in self.per_env:
            if values[k] < 0:
                return None
        shape = self.shape
        lo = [0] * len(shape)
        hi = list(shape)
        for k, a, c in self.single:  # c * d_a + r >= 0
            r = values[k]
            if c > 0:
                lo[a] = max(lo[a], -(r // c))
            else:
                hi[a] = min(hi[a], r // -c + 1)
        ext = tuple(h - lo_ for lo_, h in zip(lo, hi))
        if any(e <= 0 for e in ext):
            return None
        if ext == tuple(shape):
            return self.template
        got = self.cache.get(ext)
        if got is None:
            got = self.cache[ext] = _scaled(self.template, shape, ext, self.target)
        return got


def _scaled(t: OpTemplate, shape, ext, target: Target) -> OpTemplate:
    fp = ext[0] / shape[0] if shape else 1.0
    ff = (_free(ext) / _free(shape)) if len(shape) > 1 else 1.0
    s = replace(t, P=max(1, round(t.P * fp)), N=max(1, round(t.N * ff)))
    s.flops = t.flops * fp * ff
    s.tensor_flops = t.tensor_flops * fp * ff
    if t.is_dma:
        s.nbytes, s.hbm_bytes = round(t.nbytes * fp * ff), round(t.hbm_bytes * fp * ff)
        s.chunk_bytes = t.chunk_bytes * ff if t.chunk_bytes >= t.nbytes / max(1, t.P) else t.chunk_bytes
        _price_dma(s, target)
    else:
        s.n_moving = max(1, round(t.n_moving * ff)) if t.n_moving else 0
        _price_compute(s, target)
        _twin(s, target)
    return s
