"""One op being lowered to JAX: operand reads, the op's mask, rounding on write and writes into operands.

The lowering is an interpreter run once, under ``jax.jit`` tracing: ``State.env`` maps each tensor to its current
(traced) value, ``State.ivars`` each loop index and program id to its (traced) int32 value. Nothing from the IR is
ever turned into source text.

Masks: the op computes over its whole iteration space and the mask selects afterwards. Outside the mask a fresh
result keeps its poison value and an operand being written keeps its old elements, as in the NumPy reference
(which computes on the mask's bounding box instead; reads that would leave their tensor are clipped here and
land only on lanes the mask discards).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax import forward, hbm_views, runtime, trim
from nki_dsl.backends.jax.analysis import KernelInfo
from nki_dsl.backends.jax.functions import BINARY
from nki_dsl.errors import NkiError
from nki_dsl.ir.nodes import Access, Imm, Op
from nki_dsl.ir.ops import OPS


@dataclass
class Lowered:
    """What a handler computed: the result value, and writes into operands as (operand name, value, accumulate
    function name or "none")."""

    value: object = None
    writes: list[tuple[str, object, str]] = field(default_factory=list)


@dataclass(frozen=True)
class View:
    """How a vectorised loop's iteration holds a tensor: only its block (``shape``), indexed by the tensor's own
    index plus ``adjust`` per dimension (which cancels the loop index and the block's start, see ``vectorise``)."""

    shape: tuple[int, ...]
    adjust: tuple  # one Affine per dimension

    def index(self, index: tuple) -> tuple:
        return tuple(e + a for e, a in zip(index, self.adjust))


@dataclass
class State:
    info: KernelInfo
    env: dict
    ivars: dict
    offsets: dict  # root tensor name -> per-dimension start of the slice this device holds (mesh runs)
    plans: dict  # (id(access), view) -> (AccessPlan, access), shared by every state of one lowering
    local_shapes: dict = field(default_factory=dict)  # root name -> shape of the slice this device holds
    zero_poison: bool = False  # the gradient twin: fresh float memory is 0.0, not NaN
    views: dict = field(default_factory=dict)  # root name -> View, inside vectorised loops
    tables: dict = field(default_factory=dict)  # index variable -> its value per iteration (a re-rolled run's)

    def child(self) -> State:
        return State(self.info, dict(self.env), dict(self.ivars), self.offsets, self.plans, self.local_shapes,
                     self.zero_poison, dict(self.views), dict(self.tables))  # fmt: skip

    def bounds(self, e):
        """Index expression ``e``'s values for ``forward``: ``[(least, largest)]``, or, when every variable in it is
        a table variable of the re-rolled run being traced, ``[(v, v)]`` per iteration (they take their values
        together: ``r_a - r_b`` is known iteration by iteration). KeyError for an unbound variable."""
        if e.terms and all(v in self.tables for v, _ in e.terms):
            steps = len(self.tables[e.terms[0][0]])
            values = [e.const + sum(c * self.tables[v][j] for v, c in e.terms) for j in range(steps)]
            return [(v, v) for v in values]
        return [e.bounds(self.info.ranges)]

    def index(self, access: Access) -> tuple:
        """The access's index into the tensor as this state holds it (its block, inside vectorised loops)."""
        view = self.views.get(self.info.root(access.tensor.name))
        return access.index if view is None else view.index(access.index)

    def fresh(self, name: str):
        """A poisoned array for tensor ``name`` (a sharded tensor: this device's slice of it)."""
        t = self.info.types[name]
        shape = self.local_shapes.get(name)
        if shape is not None:
            t = type(t)(shape, t.dtype, t.buffer, t.par_axis)
        return runtime.fresh(t, self.zero_poison)

    def plan(self, access: Access) -> acc.AccessPlan:
        view = self.views.get(self.info.root(access.tensor.name))
        # keyed by the access itself (IR nodes hash by identity): the key keeps it alive, so a throwaway access (a
        # stitched pair's operand read whole) cannot die and hand its id, and so its plan, to the next one
        key = (access, view)
        got = self.plans.get(key)
        if got is None:
            if view is None:
                got = acc.plan(access, self.info.ranges)
            else:
                got = acc.plan(access, self.info.ranges, view.index(access.index), view.shape)
            self.plans[key] = got
        return got

    def value(self, root: str):
        """The array held for tensor ``root``, with its pending writes applied (``forward``)."""
        value = self.env[root]
        if isinstance(value, forward.Pending):
            value = self.env[root] = forward.materialise(value)
        return value

    def array(self, name: str):
        """The held value of tensor ``name`` (an HBM view reads its root's storage in its own shape and dtype)."""
        root = self.info.root(name)
        if root not in self.env:
            raise NkiError(f"tensor {name} is read before anything defines it")
        value = self.value(root)
        if root != name:
            if root in self.views:  # vectorise never blocks a tensor read through a reshape view of it
                raise NkiError(f"internal: tensor {name} is read through a view of {root}, which is held as a block")
            view = self.info.types[name]
            value = hbm_views.reinterpret(value, view.dtype, view.shape)
        return value

    def set_array(self, name: str, value) -> None:
        root = self.info.root(name)
        if root != name:
            held = self.info.types[root]
            value = hbm_views.reinterpret(value, held.dtype, held.shape)
        self.env[root] = value

    def _static_window(self, access: Access, p: acc.AccessPlan, leaving_ok: bool):
        """The access's window starts when it can go through ``forward`` (a box on the tensor itself, not a
        reshape view, at a position known at trace time), else None."""
        name = access.tensor.name
        if self.info.root(name) != name or name not in self.env:
            return None
        starts = acc.static_starts(p, self.ivars, self.offsets.get(name))
        if starts is None or not (p.in_bounds or (leaving_ok and acc.window(p)[1])):
            return None
        return starts

    def _traced_window(self, access: Access, p: acc.AccessPlan):
        """For a box access inside its tensor at starts that depend on traced indices: the starts as Affine
        expressions (the key ``forward`` keeps its pending write under) and their traced values; else None."""
        name = access.tensor.name
        if not (p.box and p.in_bounds) or self.info.root(name) != name or name not in self.env:
            return None
        if self.offsets.get(name) is not None:  # a device's shard (mesh runs): plain dynamic windows
            return None
        return tuple(rest for _, rest in p.split), acc.starts(p, self.ivars)

    def read(self, access: Access):
        p = self.plan(access)
        name = access.tensor.name
        starts = self._static_window(access, p, leaving_ok=True)
        if starts is not None:
            w, self.env[name] = forward.read_window(self.env[name], starts, acc.window(p)[0], self.bounds)
            return acc.from_window(w, p)
        traced = self._traced_window(access, p)
        if traced is not None:
            key, starts = traced
            w, self.env[name] = forward.read_traced(self.env[name], key, starts, acc.window(p)[0], self.bounds)
            return acc.from_window(w, p)
        offsets = self.offsets.get(self.info.root(name))
        return acc.read(self.array(name), p, self.ivars, offsets)

    def write(self, access: Access, value, mask=None) -> None:
        if isinstance(mask, np.ndarray):  # a static mask that keeps a box: a write of the box, no select
            shape = tuple(access.shape)
            box = trim.rectangle(np.broadcast_to(mask, shape))
            if box is not None:
                if box:
                    value = jnp.broadcast_to(jnp.asarray(value), shape)[trim.slices(box, len(shape))]
                    access = trim.cut_access(access, box, self.info.rerolled)
                mask = None
        name = access.tensor.name
        p = self.plan(access)
        starts = self._static_window(access, p, leaving_ok=True) if p.box else None
        traced = self._traced_window(access, p) if starts is None else None
        if starts is not None or traced is not None:
            value = jnp.broadcast_to(jnp.asarray(value).astype(self.env[name].dtype), p.shape)
            if mask is not None:  # keep the old elements where the mask is off
                value = jnp.where(jnp.broadcast_to(mask, p.shape), value, self.read(access))
            sizes, contiguous = acc.window(p)
            ranges = self.bounds
            old = None
            if starts is not None:
                if not contiguous:  # strided (then inside the tensor): the elements between the written ones
                    old, self.env[name] = forward.read_window(self.env[name], starts, sizes, ranges)
                self.env[name] = forward.write_window(self.env[name], starts, acc.to_window(value, p, old))
                return
            key, starts = traced
            if not contiguous:
                old, self.env[name] = forward.read_traced(self.env[name], key, starts, sizes, ranges)
            self.env[name] = forward.write_traced(self.env[name], key, starts, acc.to_window(value, p, old), ranges)
            return
        offsets = self.offsets.get(self.info.root(name))
        new = acc.write(self.array(name), p, value, self.ivars, offsets, mask)
        self.set_array(name, new)


@dataclass
class MaskParts:
    """A mask evaluated over an iteration shape: ``guard`` (conditions on loop indices / program ids only),
    per-axis conditions ``single`` (1-D bool arrays), and conditions over several axes (``residual``)."""

    shape: tuple[int, ...]
    guard: object = True
    single: dict[int, object] = field(default_factory=dict)
    residual: object = None

    def _np(self):
        """NumPy for a mask computed at trace time (every part a NumPy value), else jax.numpy."""
        parts = [self.guard, *self.single.values()] + ([self.residual] if self.residual is not None else [])
        return np if all(isinstance(p, (bool, np.ndarray, np.bool_)) for p in parts) else jnp

    def full(self):
        xp = self._np()
        m = xp.broadcast_to(xp.asarray(self.guard), self.shape)
        for a, cond in self.single.items():
            view = [1] * len(self.shape)
            view[a] = self.shape[a]
            m = m & cond.reshape(view)
        if self.residual is not None:
            m = m & self.residual
        return m

    def rows(self):
        """``[P, 1]``: the partitions the op writes per-partition results for (the NumPy reference's bounding box
        along axis 0, empty when the box is empty along another axis)."""
        xp = self._np()
        m = xp.broadcast_to(xp.asarray(self.guard), (self.shape[0], 1))
        for a, cond in self.single.items():
            m = m & (cond.reshape(-1, 1) if a == 0 else xp.any(cond))
        return m


def _immediate(value):
    """An immediate as JAX takes it. JAX parses a Python int as an int32 (64-bit types are off), so one past int32
    that the verifier allows (up to uint32's all-ones, ``structure``) goes in as a uint32 scalar: with float tiles
    it promotes to their dtype, with unsigned ones it is their all-ones, as NumPy computes both."""
    if isinstance(value, int) and not isinstance(value, bool) and value > np.iinfo(np.int32).max:
        return np.uint32(value)
    return value


def evaluate_mask(mask, shape, ivars) -> MaskParts:
    """The mask's parts over ``shape``. A mask that uses no traced loop index or program id is computed in NumPy
    here: XLA gets constants (and ``batching`` stacks constants), not index arithmetic to fold."""
    parts = MaskParts(tuple(shape))
    rests = [acc.split(c) for c in mask.constraints]
    values = [acc.value_of(rest, ivars) for _, rest in rests]
    static = all(isinstance(r, int) for r in values)
    for (axes, _), r in zip(rests, values):
        if not axes:
            parts.guard = parts.guard & (np.asarray(r) >= 0 if static else jnp.asarray(r) >= 0)
        elif len(axes) == 1:
            ((a, k),) = axes.items()
            if a >= len(shape):
                raise NkiError(f"a mask names axis d{a} of an op with {len(shape)} axes")
            iota = np.arange(shape[a], dtype=np.int32) if static else lax.iota(jnp.int32, shape[a])
            cond = k * iota + r >= 0
            parts.single[a] = cond if a not in parts.single else parts.single[a] & cond
        else:
            if max(axes) >= len(shape):
                raise NkiError(f"a mask names an axis beyond the {len(shape)} axes of its op")
            grid = acc.axis_values_np(axes, tuple(shape)) if static else acc.axis_values(axes, tuple(shape))
            cond = grid + r >= 0
            parts.residual = cond if parts.residual is None else parts.residual & cond
    return parts


def _always_on(mask, shape, ivars) -> bool:
    """Does the mask hold at every position, whatever the traced indices? (Decided at trace time from the
    bounds of each constraint: the full tile of a ragged loop carries a mask that is all true, and dropping it
    spares XLA a select per op.)"""
    env = {f"d{k}": (0, max(n - 1, 0)) for k, n in enumerate(shape)}
    for name, v in ivars.items():
        if isinstance(v, int):
            env[name] = (v, v)
    for c in mask.constraints:
        try:
            lo, _ = c.bounds(env)
        except KeyError:  # a traced loop index or program id
            return False
        if lo < 0 or any(n == 0 for n in shape):
            return False
    return True


class OpContext:
    """``shape`` is the space the handler computes on and ``mask`` the mask over it: the whole iteration space
    (``full_shape``, ``full_mask``), or the box a static mask bounds (``box``, see ``trim``), where only the
    mask's conditions over several axes are left."""

    def __init__(self, state: State, op: Op):
        self.state = state
        self.op = op
        self.spec = OPS[op.name]
        self.shape = self.full_shape = self._iteration_shape()
        self.mask = self.full_mask = None
        self.box = None  # {iteration axis: (start, extent)} when the op computes on its mask's box
        if op.mask is not None and not _always_on(op.mask, self.shape, state.ivars):
            self.mask = self.full_mask = evaluate_mask(op.mask, self.shape, state.ivars)
            if trim.enabled() and self.mask._np() is np and trim.trimmable(op, self.spec.family):
                self._trim(trim.box_of(self.mask.single, self.mask.guard, self.shape))

    def _trim(self, box) -> None:
        if box is None:
            return
        self.box = box
        self.shape = tuple(box[a][1] if a in box else n for a, n in enumerate(self.full_shape))
        residual = self.mask.residual
        # inside the box every single-axis condition holds (each bounds an interval the box lies in)
        self.mask = None if residual is None else MaskParts(self.shape, residual=np.broadcast_to(
            residual, self.full_shape)[trim.slices(box, len(self.full_shape))])  # fmt: skip

    def _cut(self, name: str) -> dict:
        """Where the box cuts operand ``name`` (operand axis -> (start, extent)); empty without a box."""
        if not self.box:
            return {}
        axes = trim.axes(self.op, self.spec.family, name)
        return trim.operand_cut(self.box, self.full_shape, tuple(self.op.operands[name].shape), axes)

    def access(self, name: str):
        """Operand ``name`` as the handler sees it: cut to the box (``trim``) when the op has one."""
        v = self.op.operands[name]
        cut = self._cut(name) if isinstance(v, Access) else None
        return trim.cut_access(v, cut, self.state.info.rerolled) if cut else v

    def _iteration_shape(self) -> tuple[int, ...]:
        if self.op.result is not None:
            return tuple(self.op.result.type.shape)
        for o in self.spec.writes:
            v = self.op.operands.get(o.name)
            if isinstance(v, Access):
                return tuple(v.shape)
        return ()

    # -- reading ------------------------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.op.operands

    def is_imm(self, name: str) -> bool:
        return isinstance(self.op.operands[name], Imm)

    def read(self, name: str):
        """Operand ``name``: an immediate's value, or the tile (cut to the box when the op has one)."""
        v = self.op.operands[name]
        if isinstance(v, Imm):
            return _immediate(v.value)
        return self.state.read(self.access(name))

    def reduced_valid(self, name: str):
        """For a reduction under a ``reduce_mask`` (over operand ``name``'s axes): the boolean array of the
        operand's elements that take part; None without one."""
        mask = self.op.attrs.get("reduce_mask")
        if mask is None:
            return None
        return evaluate_mask(mask, tuple(self.op.operands[name].shape), self.state.ivars).full()

    def dtype(self, name: str) -> str:
        v = self.op.operands[name]
        return v.tensor.type.dtype if isinstance(v, Access) else "float32"

    @property
    def ivars(self):
        return self.state.ivars

    # -- writing ------------------------------------------------------------------------------------------------
    def write_result(self, value) -> None:
        t = self.op.result
        value = runtime.round_to(jnp.broadcast_to(value, self.shape), t.type.dtype)
        if self.mask is not None or self.box:
            poison = jnp.asarray(runtime.poison(t.type.dtype, self.state.zero_poison), value.dtype)
        if self.mask is not None:
            value = jnp.where(self.mask.full(), value, poison)
        if self.box:  # the box in place, poison around it
            value = lax.pad(value, poison, trim.pads(self.box, self.full_shape))
        self.state.set_array(t.name, value)

    def operand_mask(self, access: Access):
        """The op's mask over an operand it writes (right-aligned to the iteration axes, like broadcasting)."""
        if self.full_mask is None:
            return None
        m = self.full_mask.full()
        shape = tuple(access.shape)
        if m.shape == shape:
            return m
        offset = len(m.shape) - len(shape)
        for a in range(len(m.shape)):
            k = a - offset
            if k < 0 or shape[k] != m.shape[a]:  # an axis the operand does not share is not cut by the mask
                m = (np if isinstance(m, np.ndarray) else jnp).any(m, axis=a, keepdims=True)  # (static stays NumPy)
        m = m.reshape(m.shape[max(offset, 0):]) if offset > 0 else m
        return (np if isinstance(m, np.ndarray) else jnp).broadcast_to(m, shape)

    def write_operand(self, name: str, value, accumulate: str = "none", mask="op") -> None:
        """Write ``value`` (over the box, when the op has one) into operand ``name``, where the op's mask holds
        (or ``mask``, an array over what the handler computed)."""
        access = self.op.operands[name]
        t = access.tensor.type
        if accumulate != "none":
            value = BINARY[accumulate](self.read(name), value)
        value = runtime.round_to(value, t.dtype) if t.buffer.on_chip else runtime.to_hbm(value, t.dtype)
        cut = self._cut(name)
        if cut:  # the box in place; what lies around it is never written
            full = tuple(access.shape)
            boxed = tuple(cut[k][1] if k in cut else n for k, n in enumerate(full))
            widths = [p[:2] for p in trim.pads(cut, full)]
            value = jnp.pad(jnp.broadcast_to(value, boxed), widths)
            if not isinstance(mask, str):  # a handler's own mask is over the box: False around it
                inner = trim.inside(cut, full)
                if mask is not None:
                    xp = np if isinstance(mask, (np.ndarray, np.bool_, bool)) else jnp
                    inner = inner & xp.pad(xp.broadcast_to(mask, boxed), widths)
                mask = inner
        self.state.write(access, value, self.operand_mask(access) if isinstance(mask, str) else mask)

