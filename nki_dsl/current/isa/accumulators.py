"""The engines' accumulator registers, which persist from one instruction to the next (reference/nki.md §2.7
"ScalarE" activation; "VectorE" tensor_scalar_reduce and the note after it): the Scalar and the Vector engine each
have 128 per-lane 32-bit registers that an instruction's ``reduce_cmd`` resets, continues or leaves alone.

**Representation.** The tracer keeps one implicit ``[128, 1]`` fp32 SBUF tensor per engine and kernel
(``%scalar_accumulator``, ``%vector_accumulator``). It is allocated at the top of the kernel the first time an
instruction uses that engine's registers, so it outlives every loop. Then:

- an instruction's register update is an ordinary op writing that tensor;
- ``reduce_res=`` is a read-out instruction that copies it: §2.7 says ``reduce_res`` "adds a read-out
  instruction (small overhead)", and §3.3 gives ScalarE's ``ActReadAccumulator`` as about 64 cycles. On
  ScalarE it is an ``activation(copy)`` marked ``reads_accumulator``, which the simulator prices at those 64
  ScalarE cycles whole (``Target.act_read_accumulator_cycles``: it reads the registers, not SBUF, so no static
  or access overhead is added, however closely it follows the instruction that set them). A VectorE read-out
  (and a negated one, ``reduce_res_negate``) is a ``tensor_copy`` / ``tensor_scalar`` priced as any ``[P, 1]``
  instruction of its engine: the reference gives no figure for reading the Vector registers.

So the IR stays explicit. The verifier, the passes, the simulator's dependences and every backend see plain
tensors. A loop that carries the registers is a loop that carries a tensor, which the specialiser makes
``sequential`` (``affine-dependence``). Under LNC=2 each core has its own copy, as it has its own SBUF.

The registers are per lane, and lane k is partition k: an instruction on partitions 32..63 uses registers 32..63.

**The commands** (§2.7):

- ``reset``: the registers get the reduction's identity (0 for add);
- ``idle``: they are left untouched;
- ``reduce``: they are combined with this instruction's reduction;
- ``reset_reduce``: they get this instruction's reduction;
- ``load_reduce``: they get ``reduce_init`` (``imm1`` for tensor_scalar_cumulative) combined with it. Only the
  instructions that take such a value accept it.

**Undefined registers are refused at trace time, never computed from.** Registers are undefined in three cases:

- **At kernel start** they hold what the previous kernel left. Continuing (``reduce``) or reading out
  (``reduce_res``) lanes that nothing in this kernel set is an error.
- **After ``idle`` on the Vector engine.** §2.7 says of the instructions sharing the Vector accumulators
  (exponential, range_select, select_reduce, tensor_scalar_reduce, tensor_scalar_cumulative) that "idle may
  still clobber them => reset_reduce after idle use". The conservative reading is chosen: after such an
  instruction *every* Vector lane is undefined until a ``reset``, ``reset_reduce`` or ``load_reduce`` sets it
  again. A continue or read-out before that is an error naming the idle instruction's line. The Scalar engine's
  ``idle`` leaves its registers untouched, as its documentation says.
- **In a loop traced once with a symbolic index.** The trace sees each loop body once. If the body continues
  registers that were set before the loop, and its last register command is such an ``idle``, the second
  iteration would continue clobbered registers. This is found when the loop has closed (at the next register
  command, or at the end of the trace: ``finish``) and refused naming the three lines.

A tile whose first partition depends on a loop index takes every lane it can take over the loop's range, for
this bookkeeping only; the IR indexes the accumulator with the tile's own partition expression.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from nki_dsl.current.isa.destination import dst_dtype, write
from nki_dsl.errors import NkiApiError, SourceLoc
from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.nodes import Access, Kernel, Loop
from nki_dsl.isa import vector_alu as legacy_alu
from nki_dsl.isa.arguments import number
from nki_dsl.language.creation import ndarray
from nki_dsl.trace.builder import Builder, caller_loc, current
from nki_dsl.trace.tensor import TileView, build_op, is_tile

ENGINE_NAMES = {"scalar": "Scalar", "vector": "Vector"}
SETS = ("reset", "reset_reduce", "load_reduce")  # commands that give the lanes a value without reading them
# The value each reduction starts from (§2.7 tensor_scalar_cumulative, tensor_scalar_reduce reset_reduce).
IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": float("-inf"), "minimum": float("inf")}


@dataclass(frozen=True)
class _Command:
    api: str
    cmd: str
    loc: SourceLoc

    def describe(self) -> str:
        return f"line {self.loc.line} ({self.api} with reduce_cmd={self.cmd})"


@dataclass
class _Registers:
    """One engine's registers while a kernel is traced."""

    engine: str
    tensor: object = None  # the accumulator tensor (an NkiTensor), allocated on first use
    valid: int = 0  # bit k: lane k holds a value this kernel gave it
    clobbered_by: _Command | None = None  # the idle instruction that left every lane undefined, if any
    # Per loop open at some command: the last command in its body that set (True) or clobbered (False) the
    # registers, and the first command in its body that read registers set before the loop.
    last_in: dict[Loop, tuple[bool, _Command]] = field(default_factory=dict)
    exposed: dict[Loop, _Command] = field(default_factory=dict)


# The kernel being traced (its builder is gone when the trace returns and ``finish`` runs) -> its engines' registers.
_traces: weakref.WeakKeyDictionary[Kernel, dict[str, _Registers]] = weakref.WeakKeyDictionary()


def _registers(builder: Builder, engine: str) -> _Registers:
    per_engine = _traces.setdefault(builder.kernel, {})
    if engine not in per_engine:
        per_engine[engine] = _Registers(engine)
    return per_engine[engine]


def use(api: str, engine: str, data, cmd: str, reads_out: bool) -> TileView:
    """Record that the instruction at the caller's line applies ``cmd`` to the registers of ``engine`` for the
    lanes of ``data``'s partitions, and reads them out afterwards when ``reads_out``. Refuses a command or read-out
    that would see undefined registers. Returns the accumulator's view of those lanes (``[P, 1]`` fp32)."""
    builder = current(api)
    regs = _registers(builder, engine)
    _close_loops(regs, builder.loops)
    here = _Command(api, cmd, caller_loc())
    start, p, lanes = _lanes(api, data, builder)
    if cmd == "reduce":
        _require(regs, lanes, here, builder, "continues")
    if cmd in SETS or cmd == "reduce":
        regs.valid |= lanes
        regs.clobbered_by = None
        _record(regs, builder, True, here)
    elif engine == "vector":  # idle (§2.7: "idle may still clobber them")
        regs.valid, regs.clobbered_by = 0, here
        _record(regs, builder, False, here)
    if reads_out:
        _require(regs, lanes, here, builder, "reads out (reduce_res=)")
    tensor = _tensor(regs, builder)
    index = (start + Affine.var("d0"), Affine.var("d1"))
    return TileView(Access(tensor.access().tensor, index, (p, 1)))


def read_out(api: str, engine: str, registers: TileView, reduce_res, negate: bool = False) -> None:
    """``reduce_res = registers`` (negated with ``negate``), one instruction on the engine holding them."""
    dtype = dst_dtype(api, reduce_res)
    if negate:
        tile = legacy_alu.tensor_scalar(registers, "multiply", -1.0, dtype=dtype, engine=engine)
    elif engine == "scalar":  # ActReadAccumulator; ScalarE of NC-v2 has no tensor_copy (§2.7 tensor_copy)
        tile = build_op("nisa.activation", {"data": registers, "scale": number(1.0)},
                        {"op": "copy", "reduce_op": "none", "reduce_cmd": "idle", "reads_accumulator": True},
                        dtype=dtype)  # fmt: skip
    else:
        tile = legacy_alu.tensor_copy(registers, dtype=dtype, engine=engine)
    write(api, reduce_res, tile)


def combine(api: str, registers: TileView, row, op: str) -> None:
    """``registers = op(registers, row)``: a ``reduce`` into the registers by an instruction whose legacy form
    writes its reduction elsewhere (one Vector instruction more than the hardware's)."""
    write(api, registers, legacy_alu.tensor_tensor(registers, row, op, dtype="float32"))


def load(api: str, registers: TileView, value) -> None:
    """``registers = value`` (a number or a ``[P, 1]`` tile): ``load_reduce``'s starting point."""
    if is_tile(value):
        write(api, registers, legacy_alu.tensor_copy(value, dtype="float32"))
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise NkiApiError(f"the initial value must be a number or a [P, 1] tile, got {type(value).__name__}",
                          caller_loc(), api)  # fmt: skip
    write(api, registers, legacy_alu.memset(tuple(registers.shape), float(value), "float32"))


def finish(kernel: Kernel) -> None:
    """At the end of the trace of ``kernel``: the checks of the loops still pending (all are closed now)."""
    for regs in _traces.pop(kernel, {}).values():
        _close_loops(regs, ())


# -- bookkeeping ---------------------------------------------------------------------------------------------------


def _lanes(api: str, data, builder: Builder) -> tuple[Affine, int, int]:
    """The partition expression of ``data``'s first partition, its partition count and the bit mask of the lanes
    it may take."""
    if not is_tile(data):
        raise NkiApiError(f"the data operand must be a tile, got {type(data).__name__}", caller_loc(), api)
    access = data.access()
    p, count = int(access.shape[0]), _lane_count(builder)
    start = access.index[0] - Affine.var("d0")
    if access.index[0].coef("d0") != 1 or "d0" in start.vars():
        start = Affine()  # not a partition range (the instruction's own checks refuse it)
    if start.is_const:
        lo = hi = start.const
    else:
        ranges = {lp.var: (min(lp.start, lp.last), max(lp.start, lp.last)) for lp in builder.loops}
        grid = builder.kernel.grid
        for v in start.vars() - ranges.keys():  # a program id, or a variable with no range known here
            pid = var_kind(v) == "pid" and var_number(v) < len(grid)
            ranges[v] = (0, grid[var_number(v)] - 1) if pid else (0, count)
        lo, hi = start.bounds(ranges)
    lo, hi = max(0, lo), min(count, hi + p)
    return start, p, ((1 << max(0, hi - lo)) - 1) << lo


def _require(regs: _Registers, lanes: int, here: _Command, builder: Builder, what: str) -> None:
    name = ENGINE_NAMES[regs.engine]
    if regs.clobbered_by is not None:
        raise NkiApiError(f"reduce_cmd={here.cmd} {what} the {name} engine's accumulator registers, but "
                          f"{regs.clobbered_by.describe()} may have clobbered them: idle leaves the Vector "
                          f"accumulators undefined (reference/nki.md §2.7: reset_reduce after idle use); set them "
                          f"again with reduce_cmd=reset_reduce (or reset, load_reduce) first", here.loc,
                          here.api)  # fmt: skip
    missing = lanes & ~regs.valid
    if missing:
        lo = (missing & -missing).bit_length() - 1
        hi = missing.bit_length() - 1
        hint = (" (idle leaves them as they are: pass reduce_cmd=nisa.reduce_cmd.reset_reduce to read out this "
                "instruction's own reduction)" if here.cmd == "idle" else "")
        raise NkiApiError(f"reduce_cmd={here.cmd} {what} the {name} engine's accumulator registers, lanes "
                          f"{lo}..{hi} of which no instruction of this kernel has set (they hold what ran before); "
                          f"set them with reduce_cmd=reset_reduce (or reset, load_reduce) first{hint}", here.loc,
                          here.api)  # fmt: skip
    for loop in builder.loops:
        if loop not in regs.last_in and loop not in regs.exposed:
            regs.exposed[loop] = here  # reads what was set before the loop (in the first iteration)


def _record(regs: _Registers, builder: Builder, sets: bool, here: _Command) -> None:
    for loop in builder.loops:
        regs.last_in[loop] = (sets, here)


def _close_loops(regs: _Registers, open_loops) -> None:
    """Check the loops that have closed since the last register command (those not in ``open_loops``): a body
    that reads the registers set before the loop and leaves them clobbered hands its second iteration undefined
    registers."""
    open_loops = set(open_loops)
    for loop in [lp for lp in {**regs.last_in, **regs.exposed} if lp not in open_loops]:
        last, reader = regs.last_in.pop(loop, None), regs.exposed.pop(loop, None)
        if reader is None or last is None or last[0] or _iterations(loop) < 2:
            continue
        name = ENGINE_NAMES[regs.engine]
        raise NkiApiError(f"reduce_cmd={reader.cmd} continues the {name} engine's accumulator registers from the "
                          f"previous iteration of the loop at line {loop.loc.line}, but {last[1].describe()} "
                          f"clobbers them at the end of every iteration: idle leaves the Vector accumulators "
                          f"undefined (reference/nki.md §2.7: reset_reduce after idle use); set them again after "
                          f"it, or start each iteration with reduce_cmd=reset_reduce", reader.loc,
                          reader.api)  # fmt: skip


def _iterations(loop: Loop) -> int:
    return 2 if loop.runtime else loop.trip_count


def _lane_count(builder: Builder) -> int:
    """One register per lane, one lane per partition (§2.7 ScalarE activation: "128 per-lane 32-bit registers";
    §3.1 one partition per lane)."""
    return builder.target_fact("partitions")


def _tensor(regs: _Registers, builder: Builder):
    """The engine's accumulator tensor, allocated at the top of the kernel (it must outlive every loop)."""
    if regs.tensor is None:
        tensor = ndarray((_lane_count(builder), 1), "float32", name=f"{regs.engine}_accumulator")
        region = builder.loops[-1].body if builder.loops else builder.kernel.body
        alloc = region.pop()  # the alloc just emitted where the instruction is
        if alloc.result is not tensor.access().tensor:
            raise AssertionError(f"the accumulator's alloc is not the last op of its region: {alloc}")
        builder.kernel.body.insert(0, alloc)
        regs.tensor = tensor
    return regs.tensor
