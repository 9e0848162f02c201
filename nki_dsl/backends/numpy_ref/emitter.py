"""IR -> Python source calling NumPy: the reference backend's code generator.

The generated function takes the kernel's HBM arrays, loops over the SPMD grid, and runs the body with loops as
Python ``for`` loops. Each op is lowered by the handler registered for its name (``lowering.HANDLERS``); this
module owns what is common to all ops: naming, accesses, masks, rounding on write and writes into operands.

Masks: an op under a mask runs on the bounding box its single-axis conditions allow (computed at run time from
loop indices, so reads never leave their tensor); conditions over several axes then select inside the box.
Elements outside the mask are left untouched (a fresh result tile keeps its poison value there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from nki_dsl.backends.numpy_ref.access_code import AccessCode, access_code, affine_code
from nki_dsl.backends.numpy_ref.functions import BINARY_TEMPLATES
from nki_dsl.errors import NkiError
from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.cores import has_sync_ops
from nki_dsl.ir.hbm_views import view_source
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.source_safe import NkiCodegenError, py_int, py_ints, py_tensor, py_var
from nki_dsl.ir.types import Buffer


@dataclass
class Lowered:
    """What a handler computed: the result value (a source expression), and writes into operands as
    ``(operand name, value expression, accumulate fn or "none")``. ``fresh`` says the value is a new array (not
    a view of another tensor), so it can become the result without a copy."""

    value: str | None = None
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    fresh: bool = True


# The generated function's name: fixed, so the kernel's name (IR text) never reaches the source.
KERNEL_FN = "_kernel"


def tensor_var(name: str) -> str:
    return py_tensor(name)


def number_literal(value) -> str:
    """Source for a Python number; ``repr`` of an infinite or NaN float (``inf``) is not a valid expression."""
    if isinstance(value, bool | np.bool_):
        return repr(bool(value))
    if isinstance(value, int | np.integer):
        return repr(int(value))
    if isinstance(value, float | np.floating):
        value = float(value)
        return repr(value) if np.isfinite(value) else f"np.float32({str(value)!r})"
    raise NkiCodegenError(f"{value!r} is not a number and cannot be written into generated code")


class Emitter:
    def __init__(self, kernel: Kernel, handlers):
        self.kernel = kernel
        self.handlers = handlers
        self.lines: list[str] = []
        self.depth = 0
        self.namespace: dict[str, object] = {}
        self._const_ids: dict[int, str] = {}
        self._tmp = 0
        self.mutated = _mutated_storage(kernel)
        self.runtime_loops: list[Loop] = []  # numbered in program order for TripLog (runtime_loops.py)

    # -- module-level helpers ----------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def const(self, value) -> str:
        """Register a compile-time value in the generated module's namespace."""
        key = id(value)
        if key not in self._const_ids:
            name = f"_c{len(self._const_ids)}"
            self._const_ids[key] = name
            self.namespace[name] = value
        return self._const_ids[key]

    def tmp(self) -> str:
        self._tmp += 1
        return f"_v{self._tmp}"

    # -- the kernel --------------------------------------------------------------------------------------------
    def emit(self) -> str:
        k = self.kernel
        params = [tensor_var(p.name) for p in k.params]
        if len(set(params)) != len(params):
            raise NkiCodegenError("two kernel parameters have the same name")
        self.line(f"def {KERNEL_FN}({', '.join(params)}):")
        self.depth += 1
        self.line("rng = RandomState()")
        hoisted = [op for op in k.body if isinstance(op, Op) and _is_shared_alloc(op)]
        for op in hoisted:
            self.emit_op(op)
        body = [s for s in k.body if not (isinstance(s, Op) and s in hoisted)]
        outs = ", ".join(tensor_var(t.name) for t in k.outputs)
        outs = f"({outs}{',' if len(k.outputs) == 1 else ''})"
        if k.grid and has_sync_ops(k):
            self._emit_cores(body, params + [tensor_var(op.result.name) for op in hoisted], outs)
            return "\n".join(self.lines) + "\n"
        grid = k.grid or (1,)
        for axis, n in enumerate(grid):
            self.line(f"for pid{axis} in range({py_int(n)}):")
            self.depth += 1
        self.emit_body(body)
        self.depth -= len(grid)
        self.line(f"return {outs}")
        return "\n".join(self.lines) + "\n"

    def _emit_cores(self, body, shared: list[str], outs: str) -> None:
        """A kernel with sync ops (``nisa.sendrecv``, ``nisa.core_barrier``): the body is a generator per core,
        pausing at each sync op, and ``run_cores`` runs the cores' generators around their meetings
        (``ir/cores.py``). The kernel's HBM arguments and shared allocations are passed to each core."""
        if len(self.kernel.grid) != 1:
            raise NkiCodegenError(f"sync ops need a one-axis launch (kernel[2]), not grid {list(self.kernel.grid)}")
        names = "".join(f", {n}" for n in shared)
        self.line(f"def _core(pid0{names}):")
        self.depth += 1
        self.emit_body(body)
        self.line(f"return {outs}")
        self.line("yield  # (a generator even if no sync op is reached)")
        self.depth -= 1
        self.line(f"return run_cores([_core(_pid{names}) for _pid in range({py_int(self.kernel.grid[0])})])")

    def emit_body(self, body) -> None:
        if not body:
            self.line("pass")
        for stmt in body:
            if isinstance(stmt, Loop) and stmt.runtime:
                self.emit_runtime_loop(stmt)
            elif isinstance(stmt, Loop):
                bounds = ", ".join(py_int(b) for b in (stmt.start, stmt.stop, stmt.step))
                kind = {"affine": "affine", "sequential": "sequential"}.get(stmt.kind, "loop")  # a fixed word
                self.line(f"for {py_var(stmt.var, 'loop')} in range({bounds}):  # {kind}")
                self.depth += 1
                self.emit_body(stmt.body)
                self.depth -= 1
            else:
                self.emit_op(stmt)

    def emit_runtime_loop(self, lp: Loop) -> None:
        """A dynamic loop runs to its register's value (read once, checked by ``TripLog.stop``); a while loop
        re-reads its register before each iteration, at most its declared bound of them; a scalar_offset loop runs
        once with its index the register's value (``TripLog``)."""
        k = len(self.runtime_loops)
        self.runtime_loops.append(lp)
        a = lp.reads
        reg = access_code(tensor_var(a.tensor.name), a.index, tuple(str(s) for s in a.shape), self.const).read
        grid = self.kernel.grid or (1,)
        pids = "(" + "".join(f"{py_var(f'pid{g}')}, " for g in range(len(grid))) + ")"
        var = py_var(lp.var, "loop")
        if lp.kind == "scalar_offset":
            self.line(f"for {var} in (_rl.offset({py_int(k)}, {reg}, {pids}),):  # scalar_offset")
            self.depth += 1
            self.emit_body(lp.body)
            self.depth -= 1
            return
        if lp.kind == "dynamic":
            stop = f"_rl.stop({py_int(k)}, {reg}, {pids})"
            self.line(f"for {var} in range({py_int(lp.start)}, {stop}, {py_int(lp.step)}):  # dynamic")
            self.depth += 1
            self.emit_body(lp.body)
            self.depth -= 1
            return
        self.line(f"for {var} in range(0, {py_int(lp.stop)}, 1):  # while")
        self.depth += 1
        self.line(f"if not _rl.running({py_int(k)}, {reg}, {var}, {pids}):")
        self.line("    break")
        self.emit_body(lp.body)
        self.depth -= 1
        self.line("else:")
        self.line(f"    _rl.exhausted({py_int(k)}, {reg}, {pids})")

    def emit_op(self, op: Op) -> None:
        handler = self.handlers.get(op.name)
        if handler is None:
            raise NkiCodegenError(f"the NumPy backend has no lowering for {op.name!r}", op.loc)
        # Comments carry no IR text: the op name is a key of the handler table, the line a checked int.
        self.line(f"# line {py_int(op.loc.line)}: {op.name if _ASCII_OP.fullmatch(op.name) else 'op'}")
        ctx = OpContext(self, op)
        ctx.open_mask()
        lowered = handler(ctx)
        if op.result is not None and lowered.value is not None:
            ctx.write_result(lowered.value, lowered.fresh)
        for name, value, accumulate in lowered.writes:
            ctx.write_operand(name, value, accumulate)
        ctx.close_mask()


_ASCII_OP = re.compile(r"[A-Za-z0-9_.]+")


def _mutated_storage(kernel: Kernel) -> set[str]:
    """Names of tensors some op writes into after creating them (out/inout operands), with the HBM views
    that share their storage. A result that would be a view of none of these can skip its defensive copy."""
    roots: dict[str, str] = {}
    written: set[str] = set()
    for stmt, _ in kernel.walk():
        if not isinstance(stmt, Op):
            continue
        viewed = view_source(stmt)  # hbm.reshape / hbm.view: the result shares its source's storage
        if viewed is not None:
            roots[stmt.result.name] = roots.get(viewed.name, viewed.name)
        for o in OPS[stmt.name].writes:
            v = stmt.operands.get(o.name)
            if isinstance(v, Access):
                written.add(roots.get(v.tensor.name, v.tensor.name))
    return written | {view for view, root in roots.items() if root in written}


def _is_shared_alloc(op: Op) -> bool:
    return op.name == "alloc" and op.result is not None and op.result.type.buffer == Buffer.SHARED_HBM


def _is_axis(v: str) -> bool:
    try:
        return var_kind(v) == "axis"
    except ValueError:
        return False


class OpContext:
    """One op being lowered: operand reads restricted to the mask's box, and the writes back."""

    def __init__(self, emitter: Emitter, op: Op):
        self.e = emitter
        self.op = op
        self.shape = self._iteration_shape()
        self.box: dict[int, tuple[str, str, str]] = {}  # axis -> (lo, hi, extent) source names
        self.residual: str | None = None
        self._opened = 0

    # -- iteration space and masks ------------------------------------------------------------------------------
    def _iteration_shape(self) -> tuple[int, ...]:
        if self.op.result is not None:
            return self.op.result.type.shape
        for v in self.op.operands.values():
            if isinstance(v, Access) and self.op_spec_writes(v):
                return v.shape
        return ()

    def op_spec_writes(self, access: Access) -> bool:
        spec = OPS[self.op.name]
        return any(self.op.operands.get(o.name) is access for o in spec.writes)

    def open_mask(self) -> None:
        mask = self.op.mask
        if mask is None:
            return
        guards, multi = [], []
        bounds: dict[int, tuple[list[str], list[str]]] = {}
        for c in mask.constraints:
            axes = {var_number(v): k for v, k in c.terms if _is_axis(v)}
            rest = Affine(tuple((v, k) for v, k in c.terms if not _is_axis(v)), c.const)
            if not axes:
                guards.append(f"({affine_code(rest)}) >= 0")
            elif len(axes) == 1:
                (a, k), = axes.items()
                lo, hi = bounds.setdefault(a, ([], []))
                if k > 0:
                    lo.append(f"-(({affine_code(rest)}) // {k})")
                else:
                    hi.append(f"({affine_code(rest)}) // {-k} + 1")
            else:
                multi.append(c)
        for a, (lo, hi) in sorted(bounds.items()):
            lo_name, hi_name, n_name = f"_lo{a}", f"_hi{a}", f"_n{a}"
            size = py_int(self.shape[a])
            self.e.line(f"{lo_name} = max(0, {', '.join(lo)})" if lo else f"{lo_name} = 0")
            self.e.line(f"{hi_name} = min({size}, {', '.join(hi)})" if hi else f"{hi_name} = {size}")
            self.e.line(f"{n_name} = {hi_name} - {lo_name}")
            guards.append(f"{n_name} > 0")
            self.box[a] = (lo_name, hi_name, n_name)
        if multi:
            self.residual = " & ".join(self._constraint_array(c) for c in multi)
            for a in {var_number(v) for c in multi for v, _ in c.terms if _is_axis(v)}:
                if a not in self.box:
                    self.box[a] = ("0", str(self.shape[a]), str(self.shape[a]))
        if guards:
            self.e.line(f"if {' and '.join(guards)}:")
            self.e.depth += 1
            self._opened = 1

    def close_mask(self) -> None:
        self.e.depth -= self._opened
        if self._opened and self.op.result is not None:
            # The result exists even when the mask switches the whole op off (later unmasked ops may read it).
            self.e.line("else:")
            self.e.depth += 1
            self._emit_alloc()
            self.e.depth -= 1

    def _constraint_array(self, c: Affine) -> str:
        ndim = len(self.shape)
        terms = []
        for v, k in c.terms:
            if _is_axis(v):
                a = var_number(v)
                lo, hi, _ = self.box.get(a, ("0", str(self.shape[a]), None))
                view = tuple(-1 if j == a else 1 for j in range(ndim))
                terms.append(f"{py_int(k)} * np.arange({lo}, {hi}).reshape({view})")
            else:
                terms.append(f"{py_int(k)} * {py_var(v)}")
        terms.append(py_int(c.const))
        return f"(({' + '.join(terms)}) >= 0)"

    # -- reading operands ---------------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.op.operands

    def read(self, name: str, axes: str | dict[int, int] | None = "aligned") -> str:
        """Source for operand ``name``: a literal for immediates, an array expression for tiles.

        ``axes`` says how the operand's axes correspond to the op's iteration axes, so a mask's box can cut it:
        ``"aligned"`` (right-aligned, as NumPy broadcasting), a dict ``{iteration axis: operand axis}``, or None
        when there is no correspondence (such an op cannot take a mask over tile axes)."""
        v = self.op.operands[name]
        if isinstance(v, Imm):
            return number_literal(v.value)
        return self.code(v, axes).read

    def code(self, access: Access, axes: str | dict[int, int] | None = "aligned") -> AccessCode:
        index, shape = access.index, tuple(str(s) for s in access.shape)
        if self.box:
            if axes is None:
                raise NkiError(
                    f"a mask over tile axes is not supported on {self.op.name} by the NumPy backend", self.op.loc
                )
            index, shape = self._restrict(access, axes)
        if access.is_full and not self.box:
            return AccessCode(tensor_var(access.tensor.name), None, (), shape, whole=True)
        clip = self.residual is not None and _may_leave(access.tensor.type.shape, index, shape)
        return access_code(tensor_var(access.tensor.name), index, shape, self.e.const, clip=clip)

    def _restrict(self, access: Access, axes: str | dict[int, int]):
        """Shift the access's axes that correspond to boxed iteration axes to the box."""
        if axes == "aligned":
            offset = len(self.shape) - len(access.shape)
            axes = {a: a - offset for a in range(len(self.shape)) if a - offset >= 0}
        env, shape = {}, [str(s) for s in access.shape]
        for a, (lo, _, n) in self.box.items():
            k = axes.get(a)
            if k is not None and 0 <= k < len(access.shape) and access.shape[k] == self.shape[a]:
                env[f"d{k}"] = Affine.var(f"d{k}") + Affine.var(lo)
                shape[k] = n
        index = tuple(e.substitute(env) for e in access.index)
        return index, tuple(shape)

    def reduced_read(self, name: str, axes: str | dict[int, int]) -> tuple[str, str | None, list[str]]:
        """Operand ``name`` of a reduction as ``read(name, axes)`` gives it, further cut along its reduced axes to
        the bounding box of the op's ``reduce_mask`` single-axis conditions (so the read stays in its tensor).
        Returns the read, the source of a boolean array over it that is False where the mask's conditions over
        several axes exclude an element (None when there are none), and each operand axis's box start (source)."""
        access: Access = self.op.operands[name]
        mask = self.op.attrs.get("reduce_mask")
        if mask is None:
            return self.read(name, axes), None, ["0"] * len(access.shape)
        if axes == "aligned":
            offset = len(self.shape) - len(access.shape)
            axes = {a: a - offset for a in range(len(self.shape)) if a - offset >= 0}
        box: dict[int, tuple[str, str, str]] = {}  # operand axis -> (lo, hi, extent), the op mask's box first
        for a, names in self.box.items():
            k = axes.get(a)
            if k is not None and 0 <= k < len(access.shape) and access.shape[k] == self.shape[a]:
                box[k] = names
        bounds: dict[int, tuple[list[str], list[str]]] = {}
        multi = []
        for c in mask.constraints:
            on = {var_number(v): k for v, k in c.terms if _is_axis(v)}
            if len(on) > 1:
                multi.append(c)
            elif len(on) == 1 and next(iter(on)) not in box:  # kept-axis and axis-free conditions: op.mask's box
                (k, coef), = on.items()
                rest = affine_code(Affine(tuple((v, x) for v, x in c.terms if not _is_axis(v)), c.const))
                lo, hi = bounds.setdefault(k, ([], []))
                (lo if coef > 0 else hi).append(f"-(({rest}) // {coef})" if coef > 0 else f"({rest}) // {-coef} + 1")
        for k, (lo, hi) in sorted(bounds.items()):
            names = (f"_rlo{k}", f"_rhi{k}", f"_rn{k}")
            self.e.line(f"{names[0]} = max(0, {', '.join(lo)})" if lo else f"{names[0]} = 0")
            top = f"min({py_int(access.shape[k])}, {', '.join(hi)})" if hi else py_int(access.shape[k])
            self.e.line(f"{names[1]} = max({names[0]}, {top})")
            self.e.line(f"{names[2]} = {names[1]} - {names[0]}")
            box[k] = names
        env = {f"d{k}": Affine.var(f"d{k}") + Affine.var(lo) for k, (lo, _, _) in box.items() if lo != "0"}
        index = tuple(e.substitute(env) for e in access.index)
        shape = tuple(box[k][2] if k in box else str(s) for k, s in enumerate(access.shape))
        read = access_code(tensor_var(access.tensor.name), index, shape, self.e.const).read
        valid = None
        if multi:
            ndim = len(access.shape)
            parts = []
            for c in multi:
                terms = []
                for v, coef in c.terms:
                    if _is_axis(v):
                        k = var_number(v)
                        lo, hi, _ = box.get(k, ("0", str(access.shape[k]), None))
                        view = tuple(-1 if j == k else 1 for j in range(ndim))
                        terms.append(f"{py_int(coef)} * np.arange({lo}, {hi}).reshape({view})")
                    else:
                        terms.append(f"{py_int(coef)} * {py_var(v)}")
                terms.append(py_int(c.const))
                parts.append(f"(({' + '.join(terms)}) >= 0)")
            valid = " & ".join(parts)
        starts = [box[k][0] if k in box else "0" for k in range(len(access.shape))]
        return read, valid, starts

    def dtype(self, name: str) -> str:
        v = self.op.operands[name]
        return v.tensor.type.dtype if isinstance(v, Access) else "float32"

    @property
    def result_dtype(self) -> str:
        return self.op.result.type.dtype

    def box_shape(self) -> str:
        """The iteration shape as source (box extents where masked)."""
        dims = [self.box[a][2] if a in self.box else str(s) for a, s in enumerate(self.shape)]
        return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"

    def box_slices(self) -> str:
        return ", ".join(f"{self.box[a][0]}:{self.box[a][1]}" if a in self.box else ":" for a in range(len(self.shape)))

    # -- writing ------------------------------------------------------------------------------------------------
    def write_result(self, value: str, fresh: bool) -> None:
        t = self.op.result
        var = tensor_var(t.name)
        dt = t.type.dtype
        rounded = f"ROUND[{dt!r}]({value})"
        region = f"{var}[{self.box_slices()}]"
        if self.residual:  # np.where copies: the result never aliases an operand
            self._emit_alloc()
            self.e.line(f"{region} = np.where({self.residual}, {rounded}, {region})")
            return
        if not fresh and dt == "float32" and self._may_alias_mutated():
            rounded = f"np.array({value}, dtype=np.float32)"
        if not self.box:
            self.e.line(f"{var} = {rounded}")
            return
        # When the box covers the whole tile at run time (every full tile of a ragged loop), the value is the
        # result: no poison fill, no copy into place.
        full = " and ".join(f"{n} == {self.shape[a]}" for a, (_, _, n) in sorted(self.box.items()))
        self.e.line(f"_value = {rounded}")
        self.e.line(f"if {full}:")
        self.e.line(f"    {var} = _value")
        self.e.line("else:")
        self.e.depth += 1
        self._emit_alloc()
        self.e.line(f"{region} = _value")
        self.e.depth -= 1

    def _emit_alloc(self) -> None:
        t = self.op.result
        self.e.line(f"{tensor_var(t.name)} = alloc_on_chip({py_ints(t.type.shape)}, {t.type.dtype!r})")

    def _may_alias_mutated(self) -> bool:
        """Could this op's result, if it were a view of its operands, see or cause an in-place write?"""
        names = {self.op.result.name} | {v.tensor.name for v in self.op.operands.values() if isinstance(v, Access)}
        return bool(names & self.e.mutated)

    def write_operand(self, name: str, value: str, accumulate: str) -> None:
        access = self.op.operands[name]
        code = self.code(access)
        t = access.tensor.type
        in_place = t.buffer.on_chip and t.dtype == "float32" and code.perm is None and not code.missing
        if accumulate == "add" and in_place and not self.residual:
            # fp32 accumulation (PSUM, or an fp32 SBUF tile) needs no rounding: add in place.
            self.e.line(f"{code.target} += {value}")
            return
        if accumulate != "none":
            value = BINARY_TEMPLATES[accumulate].format(code.read, value)
        if t.buffer.on_chip:
            value = f"ROUND[{t.dtype!r}]({value})"
        else:
            value = f"to_hbm({value}, {t.dtype!r})"
        if self.residual and code.indices is not None:  # only the kept elements: clipped ones may collide
            self.e.line(code.write_kept(value, self.residual, tensor_var(access.tensor.name)))
            return
        if self.residual:
            value = f"np.where({self.residual}, {value}, {code.read})"
        self.e.line(code.write(value))


def _may_leave(dims: tuple[int, ...], index: tuple[Affine, ...], shape: tuple[str, ...]) -> bool:
    """Whether an access under a mask over several axes may reach outside its tensor for some masked-off element:
    the verifier bounds only the kept ones. False only when every index spans a known range inside its dimension
    (constant offsets and extents); a loop index or a run-time extent counts as possibly outside."""
    for e, size in zip(index, dims):
        lo = hi = e.const
        for v, c in e.terms:
            if v == "0":  # the start of a box the mask leaves whole (OpContext.open_mask)
                continue
            if not _is_axis(v) or not str(shape[var_number(v)]).isdigit():
                return True
            span = c * (int(shape[var_number(v)]) - 1)
            lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
        if lo < 0 or hi >= size:
            return True
    return False
