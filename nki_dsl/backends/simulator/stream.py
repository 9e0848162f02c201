"""Unroll a kernel into the flat instruction stream the scheduler runs.

Everything that does not depend on loop values is computed once per op (an ``OpTemplate``: engine, opcode, dtype,
element counts, bytes, FLOPs, duration). Per instruction only the regions change; each op gets a small generated
function that turns the current loop indices and program ids into region boxes, so unrolling does integer
arithmetic only (no Affine objects in the loop).

A region is ``(key, box)``: ``key`` identifies one tensor copy (see ``TensorInfo.key``), ``box`` is a flat tuple of
half-open ranges per tensor dimension (``regions.py``). A tensor defined inside a loop body rotates through
``buffers`` copies (from the allocation pass, or ``DEFAULT_BUFFERS`` without one): its k-th definition is copy
``k % buffers``, so a producer can fill the next copy while a consumer reads the current one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import product

from nki_dsl import dtypes
from nki_dsl.backends.simulator import cost, engines
from nki_dsl.backends.simulator.regions import box_source, whole_box
from nki_dsl.ir.affine import var_kind
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Tensor
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import Target, get_target

# Rotating copies of a tensor defined in a loop when no allocation says otherwise: double buffering, the least
# that lets a load of iteration k+1 overlap compute on iteration k.
DEFAULT_BUFFERS = 2
_COPY_BITS = 16  # a key is tensor id << 16 | copy index


@dataclass
class TensorInfo:
    id: int
    tensor: Tensor
    root: Tensor  # the storage (an hbm.reshape view shares its source's)
    buffers: int
    in_loop: bool

    def key(self, copy: int) -> int:
        return self.id << _COPY_BITS | copy


@dataclass(eq=False)
class OpTemplate:
    """What the cost model and profile need of one op, computed once. ``duration_ns`` prices compute; DMA carries
    ``fixed_ns``/``payload_ns``/``dma_engines`` (§3.4) and ``duration_ns = fixed + payload``."""

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
    nbytes: int = 0
    hbm_bytes: int = 0
    chunk_bytes: float = 0.0
    dge: bool = False
    flops: float = 0.0
    tensor_flops: float = 0.0
    duration_ns: float = 0.0
    fixed_ns: float = 0.0
    payload_ns: float = 0.0
    dma_engines: int = 0
    reads: list = field(default_factory=list)  # Accesses read (for listings)
    writes: list = field(default_factory=list)  # Accesses written

    @property
    def loc(self):
        return self.op.loc

    @property
    def is_dma(self) -> bool:
        return self.engine == engines.DMA


@dataclass(frozen=True)
class Instruction:
    """One instruction: its template and the regions ``((key, box), ...)`` it reads and writes."""

    template: OpTemplate
    reads: tuple
    writes: tuple


class Stream:
    """The instruction stream of ``kernel`` on ``target``; iterate ``instructions()`` or ``raw()`` (tuples)."""

    def __init__(self, kernel: Kernel, target: str | Target = "trn2", allocation=None, grid=None):
        self.kernel = kernel
        self.target = get_target(target)
        self.allocation = allocation
        self.tensors: dict[str, TensorInfo] = {}
        self.slots: dict[str, int] = {}
        self.templates: list[OpTemplate] = []
        self._index_tensors()
        grid_shape = kernel.grid or (1,)
        for k in range(len(grid_shape)):
            self.slots[f"pid{k}"] = k
        self.instances = list(product(*(range(g) for g in grid_shape))) if grid is None else [tuple(grid)]
        self.program = self._compile(kernel.body)
        self.written_keys_tensors = {info.id for info in self.tensors.values() if self._is_written(info)}

    # -- tensors -------------------------------------------------------------------------------------------------
    def _index_tensors(self) -> None:
        for p in self.kernel.params:
            self._add(p, p, in_loop=False)
        self._written_roots: set[str] = set()
        for stmt, loops in self.kernel.walk():
            if not isinstance(stmt, Op):
                continue
            if stmt.result is not None:
                root = stmt.result
                if stmt.name == "hbm.reshape":
                    root = self.tensors[stmt.operands["x"].tensor.name].root
                self._add(stmt.result, root, in_loop=bool(loops))
                if stmt.name != "hbm.reshape":
                    self._written_roots.add(root.name)
            for o in OPS[stmt.name].writes:
                v = stmt.operands.get(o.name)
                if isinstance(v, Access):
                    self._written_roots.add(self.tensors[v.tensor.name].root.name)

    def _add(self, t: Tensor, root: Tensor, in_loop: bool) -> None:
        buffers = 1
        if root is t and in_loop:
            placement = self.allocation.placements.get(t.name) if self.allocation is not None else None
            buffers = placement.buffers if placement is not None else DEFAULT_BUFFERS
        root_info = self.tensors.get(root.name)
        tid = root_info.id if root_info is not None else len(self.tensors)
        self.tensors[t.name] = TensorInfo(tid, t, root, buffers if root_info is None else root_info.buffers, in_loop)

    def _is_written(self, info: TensorInfo) -> bool:
        return info.root.name in self._written_roots

    def untracked_reads(self) -> set[int]:
        """Tensor ids nothing writes (kernel inputs): reading them can never wait, so the scheduler skips them."""
        return {i.id for i in self.tensors.values() if not self._is_written(i)}

    # -- compiling the body ----------------------------------------------------------------------------------------
    def _compile(self, body: list) -> list:
        out = []
        k = 0
        while k < len(body):
            stmt = body[k]
            if isinstance(stmt, Loop):
                self.slots.setdefault(stmt.var, len(self.slots))
                out.append(("loop", self.slots[stmt.var], stmt.start, stmt.stop, stmt.step, self._compile(stmt.body)))
                k += 1
                continue
            accumulate = None
            nxt = body[k + 1] if k + 1 < len(body) else None
            if _fuses_with(stmt, nxt):
                # `acc += matmul(...)` accumulates in PSUM directly (§1.4); `t[...] = nl.load(...)` is one DMA
                # into t. The lower-language pass will emit these as single instructions.
                accumulate = nxt
                k += 1
            out.append(self._op_entry(stmt, accumulate))
            k += 1
        return out

    def _op_entry(self, op: Op, accumulate: Op | None):
        defines = self.tensors[op.result.name].id if op.result is not None and op.name != "hbm.reshape" else None
        which = engines.instruction(op)
        if which is None:
            return ("def", defines)
        template = build_template(op, which, self.target, accumulate)
        template.index = len(self.templates)
        self.templates.append(template)
        reads = _operand_reads(op, accumulate)
        writes = _operand_writes(op, accumulate)
        template.reads, template.writes = reads, writes
        fn = self._region_function(op, reads, writes)
        mask = _mask_function(op, self.slots, template, self.target) if op.mask is not None else None
        return ("op", defines, template, fn, mask)

    def _region_source(self, access: Access, clip: bool) -> str:
        info = self.tensors[access.tensor.name]
        if info.root is not access.tensor:  # a reshaped HBM view: the whole storage (conservative)
            box = repr(whole_box(info.root.type.shape))
        else:
            box = box_source(access, self.slots, clip)
        if info.buffers > 1:
            key = f"({info.id << _COPY_BITS} | (cnt[{info.id}] - 1) % {info.buffers})"
        else:
            key = str(info.key(0))
        return f"({key}, {box})"

    def _region_function(self, op: Op, reads: list, writes: list):
        clip = op.mask is not None
        r = ", ".join(self._region_source(a, clip) for a in reads)
        w = ", ".join(self._region_source(a, clip) for a in writes)
        src = f"lambda env, cnt: (({r}{',' if reads else ''}), ({w}{',' if writes else ''}))"
        return eval(src)  # generated from integers and slot numbers only

    # -- unrolling ----------------------------------------------------------------------------------------------
    def raw(self) -> Iterator[tuple]:
        """Yield ``(template, reads, writes)`` per instruction, every grid instance in order."""
        env = [0] * max(1, len(self.slots))
        cnt = [0] * (max((i.id for i in self.tensors.values()), default=0) + 1)
        for inst in self.instances:
            env[: len(inst)] = inst
            yield from _run(self.program, env, cnt)

    def instructions(self) -> Iterator[Instruction]:
        for t, r, w in self.raw():
            yield Instruction(t, r, w)

    def count(self) -> int:
        """Number of instructions without unrolling masks (an upper bound where masks drop instructions)."""
        return len(self.instances) * _count(self.program)


def _run(program, env, cnt):
    for entry in program:
        kind = entry[0]
        if kind == "op":
            _, defines, template, fn, mask = entry
            if defines is not None:
                cnt[defines] += 1
            if mask is not None:
                template = mask(env, template)
                if template is None:
                    continue
            reads, writes = fn(env, cnt)
            yield template, reads, writes
        elif kind == "loop":
            _, slot, start, stop, step, body = entry
            for v in range(start, stop, step):
                env[slot] = v
                yield from _run(body, env, cnt)
        elif entry[1] is not None:
            cnt[entry[1]] += 1


def _count(program) -> int:
    n = 0
    for entry in program:
        if entry[0] == "op":
            n += 1
        elif entry[0] == "loop":
            n += len(range(entry[2], entry[3], entry[4])) * _count(entry[5])
    return n


# -- operands -------------------------------------------------------------------------------------------------------
def _fuses_with(op: Op, nxt) -> bool:
    if not (isinstance(nxt, Op) and nxt.name == "assign" and op.result is not None and nxt.mask is None
            and isinstance(nxt.operands["src"], Access) and nxt.operands["src"].tensor is op.result
            and nxt.operands["src"].is_full):
        return False
    if op.name in ("nl.matmul", "nisa.nc_matmul"):
        return nxt.attrs.get("accumulate") == "add" and nxt.operands["dst"].tensor.type.buffer.value == "psum"
    return op.name in ("nl.load", "nl.load_transpose2d") and nxt.attrs.get("accumulate") == "none"  # fmt: skip


def _operand_reads(op: Op, accumulate: Op | None) -> list[Access]:
    spec = OPS[op.name]
    out = []
    for o in spec.operands:
        v = op.operands.get(o.name)
        if isinstance(v, Access) and (o.role in ("in", "inout") or (op.name == "assign" and
                                                                     op.attrs.get("accumulate") != "none")):
            out.append(v)
    if accumulate is not None and accumulate.attrs.get("accumulate") != "none":
        out.append(accumulate.operands["dst"])
    return out


def _operand_writes(op: Op, accumulate: Op | None) -> list[Access]:
    spec = OPS[op.name]
    out = [op.operands[o.name] for o in spec.writes if isinstance(op.operands.get(o.name), Access)]
    if accumulate is not None:
        out.append(accumulate.operands["dst"])
    elif op.result is not None:
        out.append(op.result.full_access())
    return out


# -- templates ------------------------------------------------------------------------------------------------------
def _free(shape) -> int:
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def _itemsize(dtype: str) -> int:
    return dtypes.get(dtype).itemsize


def _contiguous(a: Access) -> bool:
    """The innermost tensor dimension walks the innermost access axis with unit stride."""
    if not a.index:
        return True
    last = a.index[-1]
    axes = [(v, c) for v, c in last.terms if var_kind(v) == "axis"]
    return len(axes) == 1 and axes[0][1] == 1 and axes[0][0] == f"d{len(a.shape) - 1}"


def _hbm_run_bytes(a: Access) -> int:
    """Contiguous bytes per descriptor on the HBM side: the innermost run, one element if it is strided."""
    size = _itemsize(a.tensor.type.dtype)
    return size * a.shape[-1] if _contiguous(a) and a.shape else size


def build_template(op: Op, which: tuple[str, str], target: Target, accumulate: Op | None = None) -> OpTemplate:
    engine, opcode = which
    tiles = [(n, v) for n, v in op.operands.items() if isinstance(v, Access)]
    inputs = [v for n, v in tiles if OPS[op.name].operand(n).role != "out"]
    out_shape = op.result.type.shape if op.result is not None else next(
        (v.shape for n, v in tiles if OPS[op.name].operand(n).role != "in"), ())
    out_dtype = (op.result.type.dtype if op.result is not None else
                 next((v.tensor.type.dtype for n, v in tiles if OPS[op.name].operand(n).role != "in"), "float32"))
    all_accesses = [v for _, v in tiles]
    shapes = [v.shape for v in all_accesses] + ([out_shape] if out_shape else [])
    P = max((s[0] for s in shapes if s), default=1)
    N = max((_free(s) for s in shapes), default=1)
    dts = [v.tensor.type.dtype for v in all_accesses] + [out_dtype]
    t = OpTemplate(op=op, engine=engine, opcode=opcode, dtype=out_dtype, P=P, N=N)
    t.all_16bit = all(d in ("bfloat16", "float16") for d in dts)
    t.out_16bit = out_dtype in ("bfloat16", "float16")
    on_chip_inputs = [v for v in inputs if v.tensor.type.buffer.on_chip]
    t.any_psum = any(v.tensor.type.buffer.value == "psum" for v in on_chip_inputs)
    t.all_psum = bool(on_chip_inputs) and all(v.tensor.type.buffer.value == "psum" for v in on_chip_inputs)
    t.contiguous = all(_contiguous(v) for v in all_accesses)
    t.fn = str(op.attrs.get("op", op.attrs.get("op0", OPS[op.name].extra.get("fn", op.attrs.get("accumulate",
                                                                                             "none")))))
    t.fn1 = str(op.attrs.get("op1", "none"))
    t.reduces = op.attrs.get("reduce_op", "none") not in ("none", None) or opcode == "nisa.activation_reduce"
    value = op.operands.get("value", op.operands.get("src"))
    t.value = value.value if isinstance(value, Imm) else op.attrs.get("value")
    if opcode == "nisa.nc_matmul":
        _matmul_counts(op, t)
        t.flops = t.tensor_flops = 2.0 * t.P * t.n_stationary * t.n_moving
    elif opcode == "nisa.nc_transpose":
        src = inputs[0].shape
        t.P, t.N = src[0], _free(src)
    else:
        t.flops = float(P * N)
    if engine == engines.DMA:
        _dma_counts(op, t, inputs, out_shape, out_dtype, target)
    else:
        t.duration_ns = cost.compute_ns(target, t)
    return t


def _matmul_counts(op: Op, t: OpTemplate) -> None:
    if op.name == "nisa.nc_matmul":
        st, mv = op.operands["stationary"], op.operands["moving"]
    elif op.name == "nl.matmul":
        st, mv = op.operands["x"], op.operands["y"]
    else:  # a broadcast across partitions: ones[P_in, P_out] as stationary, the data as moving (§2.4)
        mv = op.operands["x"]
        t.P, t.n_stationary, t.n_moving, t.dtype = mv.shape[0], op.result.type.shape[0], _free(mv.shape), \
            mv.tensor.type.dtype
        return
    t.P, t.n_stationary, t.n_moving = st.shape[0], _free(st.shape), _free(mv.shape)
    t.dtype = st.tensor.type.dtype


def _dma_counts(op: Op, t: OpTemplate, inputs: list[Access], out_shape, out_dtype: str, target: Target) -> None:
    src = inputs[0]
    dst = op.operands.get("dst") if op.result is None else op.result.full_access()
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
    t.fixed_ns, t.payload_ns, t.dma_engines = cost.dma_ns(target, t.nbytes, t.P, t.chunk_bytes, t.dge)
    t.duration_ns = t.fixed_ns + t.payload_ns


# -- masks ----------------------------------------------------------------------------------------------------------
def _mask_function(op: Op, slots: dict[str, int], template: OpTemplate, target: Target):
    """Per instruction: the template shrunk to the mask's bounding box of the op's axes, or None when the mask
    switches the instruction off (a mask skips the instruction or makes its tile smaller, §1.3)."""
    shape = op.result.type.shape if op.result is not None else template.writes[0].shape if template.writes else ()
    single, per_env = [], []
    for c in op.mask.constraints:
        axes = [(int(v[1:]), k) for v, k in c.terms if var_kind(v) == "axis"]
        rest = [(slots[v], k) for v, k in c.terms if var_kind(v) != "axis"]
        if len(axes) == 1:
            single.append((axes[0][0], axes[0][1], rest, c.const))
        elif not axes:
            per_env.append((rest, c.const))
    cache: dict[tuple, OpTemplate] = {}

    def shrink(env, t):
        for rest, const in per_env:
            if sum(env[s] * k for s, k in rest) + const < 0:
                return None
        lo = [0] * len(shape)
        hi = list(shape)
        for a, k, rest, const in single:
            if a >= len(shape):
                continue
            r = sum(env[s] * k2 for s, k2 in rest) + const  # k * d_a + r >= 0
            if k > 0:
                lo[a] = max(lo[a], -(r // k))
            else:
                hi[a] = min(hi[a], r // -k + 1)
        ext = tuple(h - lo_ for lo_, h in zip(lo, hi))
        if any(e <= 0 for e in ext):
            return None
        if ext == tuple(shape):
            return t
        got = cache.get(ext)
        if got is None:
            got = cache[ext] = _scaled(t, shape, ext, target)
        return got

    return shrink


def _scaled(t: OpTemplate, shape, ext, target: Target) -> OpTemplate:
    fp = ext[0] / shape[0] if shape else 1.0
    ff = (_free(ext) / _free(shape)) if len(shape) > 1 else 1.0
    s = replace(t, P=max(1, round(t.P * fp)), N=max(1, round(t.N * ff)))
    s.index = t.index
    s.flops = t.flops * fp * ff
    s.tensor_flops = t.tensor_flops * fp * ff
    if t.is_dma:
        s.nbytes, s.hbm_bytes = round(t.nbytes * fp * ff), round(t.hbm_bytes * fp * ff)
        s.chunk_bytes = t.chunk_bytes * ff if t.chunk_bytes >= t.nbytes / max(1, t.P) else t.chunk_bytes
        s.fixed_ns, s.payload_ns, s.dma_engines = cost.dma_ns(target, s.nbytes, s.P, s.chunk_bytes, s.dge)
        s.duration_ns = s.fixed_ns + s.payload_ns
    else:
        s.n_moving = max(1, round(t.n_moving * ff)) if t.n_moving else 0
        s.duration_ns = cost.compute_ns(target, s)
    return s
