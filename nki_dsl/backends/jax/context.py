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
from jax import lax

from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax import runtime
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


@dataclass
class State:
    info: KernelInfo
    env: dict
    ivars: dict
    offsets: dict  # root tensor name -> per-dimension start of the slice this device holds (mesh runs)
    plans: dict  # id(access) -> AccessPlan, shared by every state of one lowering
    local_shapes: dict = field(default_factory=dict)  # root name -> shape of the slice this device holds
    zero_poison: bool = False  # the gradient twin: fresh float memory is 0.0, not NaN

    def child(self) -> State:
        return State(self.info, dict(self.env), dict(self.ivars), self.offsets, self.plans, self.local_shapes,
                     self.zero_poison)  # fmt: skip

    def fresh(self, name: str):
        """A poisoned array for tensor ``name`` (a sharded tensor: this device's slice of it)."""
        t = self.info.types[name]
        shape = self.local_shapes.get(name)
        if shape is not None:
            t = type(t)(shape, t.dtype, t.buffer, t.par_axis)
        return runtime.fresh(t, self.zero_poison)

    def plan(self, access: Access) -> acc.AccessPlan:
        p = self.plans.get(id(access))
        if p is None:
            p = self.plans[id(access)] = acc.plan(access, self.info.ranges)
        return p

    def array(self, name: str):
        """The held value of tensor ``name`` (a reshape view reads its root's storage in its own shape)."""
        root = self.info.root(name)
        if root not in self.env:
            raise NkiError(f"tensor {name} is read before anything defines it")
        value = self.env[root]
        if root != name:
            value = value.reshape(self.info.types[name].shape)
        return value

    def set_array(self, name: str, value) -> None:
        root = self.info.root(name)
        if root != name:
            value = value.reshape(self.info.types[root].shape)
        self.env[root] = value

    def read(self, access: Access):
        offsets = self.offsets.get(self.info.root(access.tensor.name))
        return acc.read(self.array(access.tensor.name), self.plan(access), self.ivars, offsets)

    def write(self, access: Access, value, mask=None) -> None:
        name = access.tensor.name
        offsets = self.offsets.get(self.info.root(name))
        new = acc.write(self.array(name), self.plan(access), value, self.ivars, offsets, mask)
        self.set_array(name, new)


@dataclass
class MaskParts:
    """A mask evaluated over an iteration shape: ``guard`` (conditions on loop indices / program ids only),
    per-axis conditions ``single`` (1-D bool arrays), and conditions over several axes (``residual``)."""

    shape: tuple[int, ...]
    guard: object = True
    single: dict[int, object] = field(default_factory=dict)
    residual: object = None

    def full(self):
        m = jnp.broadcast_to(jnp.asarray(self.guard), self.shape)
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
        m = jnp.broadcast_to(jnp.asarray(self.guard), (self.shape[0], 1))
        for a, cond in self.single.items():
            m = m & (cond.reshape(-1, 1) if a == 0 else jnp.any(cond))
        return m


def evaluate_mask(mask, shape, ivars) -> MaskParts:
    parts = MaskParts(tuple(shape))
    for c in mask.constraints:
        axes, rest = acc.split(c)
        r = acc.value_of(rest, ivars)
        if not axes:
            parts.guard = parts.guard & (jnp.asarray(r) >= 0)
        elif len(axes) == 1:
            ((a, k),) = axes.items()
            if a >= len(shape):
                raise NkiError(f"a mask names axis d{a} of an op with {len(shape)} axes")
            cond = k * lax.iota(jnp.int32, shape[a]) + r >= 0
            parts.single[a] = cond if a not in parts.single else parts.single[a] & cond
        else:
            if max(axes) >= len(shape):
                raise NkiError(f"a mask names an axis beyond the {len(shape)} axes of its op")
            cond = acc.axis_values(axes, tuple(shape)) + r >= 0
            parts.residual = cond if parts.residual is None else parts.residual & cond
    return parts


class OpContext:
    def __init__(self, state: State, op: Op):
        self.state = state
        self.op = op
        self.spec = OPS[op.name]
        self.shape = self._iteration_shape()
        self.mask = evaluate_mask(op.mask, self.shape, state.ivars) if op.mask is not None else None

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
        v = self.op.operands[name]
        if isinstance(v, Imm):
            return v.value
        return self.state.read(v)

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
        value = runtime.round_to(jnp.broadcast_to(value, t.type.shape), t.type.dtype)
        if self.mask is not None:
            poison = jnp.asarray(runtime.poison(t.type.dtype, self.state.zero_poison), value.dtype)
            value = jnp.where(self.mask.full(), value, poison)
        self.state.set_array(t.name, value)

    def operand_mask(self, access: Access):
        """The op's mask over an operand it writes (right-aligned to the iteration axes, like broadcasting)."""
        if self.mask is None:
            return None
        m = self.mask.full()
        shape = tuple(access.shape)
        if m.shape == shape:
            return m
        offset = len(m.shape) - len(shape)
        for a in range(len(m.shape)):
            k = a - offset
            if k < 0 or shape[k] != m.shape[a]:  # an axis the operand does not share is not cut by the mask
                m = jnp.any(m, axis=a, keepdims=True)
        m = m.reshape(m.shape[max(offset, 0):]) if offset > 0 else m
        return jnp.broadcast_to(m, shape)

    def write_operand(self, name: str, value, accumulate: str = "none", mask="op") -> None:
        access = self.op.operands[name]
        t = access.tensor.type
        if accumulate != "none":
            value = BINARY[accumulate](self.state.read(access), value)
        value = runtime.round_to(value, t.dtype) if t.buffer.on_chip else runtime.to_hbm(value, t.dtype)
        self.state.write(access, value, self.operand_mask(access) if mask == "op" else mask)

