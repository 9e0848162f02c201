"""The kernel as one JAX function: the IR interpreted under tracing.

``build(kernel)`` returns ``fn(*params) -> (outputs, written params)`` over JAX arrays; ``jax.jit`` of it is one XLA
program: SPMD grid, loops and every op. A loop (and the launch grid, a loop per grid axis) carries the tensors it
writes that exist before it or are read after it; tensors made and used inside one iteration stay local to it.
A loop of one iteration is inlined with its index a constant, so its accesses slice statically; a loop whose
iterations provably touch disjoint blocks of what they write runs as one batched computation (``vectorise``);
any other loop is a ``lax.fori_loop``. (Unrolling short loops instead was measured on the tiled matmul's 4-trip
K loop: the same run time and compile time as the fori_loop, so nothing is unrolled.)

``GridSplit`` (mesh runs): a grid axis's programs are spread over devices; this device runs ``local`` of them,
starting at program ``base``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

from nki_dsl.backends.jax import batching, reroll, runtime, runtime_loops, vectorise
from nki_dsl.backends.jax.analysis import RNG, KernelInfo, analyse, is_shared_alloc, written_by
from nki_dsl.backends.jax.collectives import COLLECTIVE_HANDLERS, run_cores_jax
from nki_dsl.backends.jax.context import OpContext, State
from nki_dsl.backends.jax.lower_isa import ISA_HANDLERS
from nki_dsl.backends.jax.lower_language import FAMILY_HANDLERS
from nki_dsl.errors import NkiError
from nki_dsl.ir.cores import has_sync_ops
from nki_dsl.ir.nodes import Kernel, Loop, Op
from nki_dsl.ir.ops import OPS


def _handlers() -> dict:
    table = {}
    for name, spec in OPS.items():
        handler = ISA_HANDLERS.get(name) or COLLECTIVE_HANDLERS.get(name) or FAMILY_HANDLERS.get(spec.family)
        if handler is not None:
            table[name] = handler
    return table


HANDLERS = _handlers()


@dataclass(frozen=True)
class GridSplit:
    base: object  # the first program id along its grid axis this device runs (traced: device index * local)
    local: int  # how many programs along that axis it runs


def run_op(op: Op, st: State) -> None:
    handler = HANDLERS.get(op.name)
    if handler is None:
        raise NkiError(f"the JAX backend has no lowering for {op.name!r}", op.loc)
    ctx = OpContext(st, op)
    lowered = handler(ctx)
    if op.result is not None and lowered.value is not None:
        ctx.write_result(lowered.value)
    for name, value, accumulate in lowered.writes:
        ctx.write_operand(name, value, accumulate)


def _rerolled(body, info: KernelInfo) -> list:
    key = tuple(body)  # the statements themselves (hashed by identity; a list may be a fresh copy)
    plan = info.rerolled.get(key)
    if plan is None:
        plan = info.rerolled[key] = reroll.plan(body, info, info.refs)
    return plan


def _planned(body, st: State) -> list:
    """``body`` with its re-rolled runs (``reroll``: a Python loop's isomorphic tiles, one loop body traced once)
    and, among the rest, its batched runs (``batching``: independent ops of interleaved chains, one op per
    stage)."""
    rolled = _rerolled(body, st.info)
    if not batching.enabled():
        return rolled
    # the plan depends on how the state holds tensors (vectorised loops' blocks) and on the static loop indices
    key = ("batch", tuple(body), repr(sorted(st.views.items())),
           tuple(sorted((k, v) for k, v in st.ivars.items() if isinstance(v, int))))  # fmt: skip
    plan = st.info.rerolled.get(key)
    if plan is None:
        plan = st.info.rerolled[key] = batching.plan(rolled, st)
    return plan


def run_body(body, st: State) -> None:
    for stmt in _planned(body, st):
        if isinstance(stmt, batching.Batched):
            batching.run(stmt, st, run_op)
        elif isinstance(stmt, reroll.Rerolled):
            reroll.run(stmt, st, run_op, lambda op: written_by(op, st.info))
        elif isinstance(stmt, Loop) and stmt.runtime:
            runtime_loops.run(stmt, st, run_body)
        elif isinstance(stmt, Loop):
            _run_loop(stmt.var, stmt.start, stmt.step, stmt.trip_count, st.info.written[stmt],
                      st.info.read_after[stmt], stmt.body, st)  # fmt: skip
        else:
            run_op(stmt, st)


def _run_stmt_loop(stmt: Loop, st: State) -> None:
    run_body([stmt], st)  # (a runtime loop or a counted one, as run_body dispatches them)


def _run_loop(var, start, step, trips, written, read_after, stmts, st: State, base=0, body=None) -> None:
    """The loop over ``stmts`` (``body(state)`` runs one iteration, by default ``stmts``): inlined (one
    iteration), vectorised (independent iterations, ``vectorise``) or a ``lax.fori_loop``."""
    if trips <= 0:
        return
    if body is None:
        body = lambda inner: run_body(stmts, inner)  # noqa: E731
    if trips == 1 and isinstance(base, int):
        st.ivars[var] = base + start
        body(st)
        return
    carried = sorted((n for n in written if n in st.env or n in read_after), key=repr)
    blocks = None
    if isinstance(base, int):  # (a mesh device's share of a grid axis starts at a traced program id)
        blocks = vectorise.plan(stmts, var, base + start, step, trips, st, written, carried)
    if blocks is not None:
        vectorise.run(blocks, var, base + start, step, trips, carried, body, st)
        return
    init = tuple(st.value(n) if n in st.env else st.fresh(n) for n in carried)

    def step_fn(i, carry):
        inner = st.child()
        inner.env.update(zip(carried, carry))
        inner.ivars[var] = base + start + i * step
        body(inner)
        return tuple(inner.value(n) for n in carried)

    out = lax.fori_loop(0, trips, step_fn, init)
    st.env.update(zip(carried, out))


def run_kernel(info: KernelInfo, arrays: tuple, splits: dict[int, GridSplit] | None = None, offsets=None,
               local_shapes=None, zero_poison: bool = False) -> tuple:
    """The kernel on held arrays: ``(outputs, written params)``. Mesh runs pass ``splits`` (grid axis -> this
    device's share), ``offsets`` and ``local_shapes`` (root tensor -> where its slice starts / the slice's shape)."""
    k = info.kernel
    splits = splits or {}
    st = State(info, {}, {}, offsets or {}, {}, local_shapes or {}, zero_poison)
    for p, a in zip(k.params, arrays):
        st.env[p.name] = a
    st.env[RNG] = jax.random.key(0)  # reset at every launch, as nl.random_seed's generator is
    if not k.grid:
        st.ivars["pid0"] = 0  # one program (see analyse)
    hoisted = [op for op in k.body if isinstance(op, Op) and is_shared_alloc(op)]
    for op in hoisted:
        run_op(op, st)
    body = [s for s in k.body if not (isinstance(s, Op) and s in hoisted)]
    grid = k.grid or ()
    end = info.outputs | set(info.written_params)
    if grid and has_sync_ops(k):  # the cores meet at sync ops: each runs as a coroutine (collectives.py)
        if splits:
            raise NkiError("a kernel whose cores meet at sync ops (nisa.sendrecv, nisa.core_barrier) runs on one "
                           "device; its launch cannot be spread over a mesh")  # fmt: skip
        shared = [p.name for p in k.params] + [op.result.name for op in hoisted] + [RNG]
        run_cores_jax(body, st, shared, run_op, _run_stmt_loop)
        outs = tuple(st.array(t.name) for t in k.outputs)
        return outs, tuple(st.value(n) for n in info.written_params)

    def level(g):
        if g == len(grid):
            return lambda inner: run_body(body, inner)
        trips, base = grid[g], 0
        if g in splits:
            trips, base = splits[g].local, splits[g].base
        inner_body = level(g + 1)
        # every grid axis loops over the whole body: its accesses are the ones vectorise looks at
        return lambda s: _run_loop(f"pid{g}", 0, 1, trips, info.all_written, end, body, s, base, inner_body)

    level(0)(st)
    outs = tuple(st.array(t.name) for t in k.outputs)
    written = tuple(st.value(n) for n in info.written_params)
    return outs, written


def differentiable(run):
    """``run(arrays, zero_poison)`` as a JAX function whose derivatives are those of its gradient twin.

    The values are the kernel's (fresh memory NaN). Derivatives come from the twin with fresh float memory 0.0: it
    computes the same values wherever they are defined, but its masked-out lanes hold finite numbers, so the zero
    cotangents a mask gives them stay zero (with NaN there, 0 * NaN would poison every gradient the lanes touch,
    e.g. through a matmul's contraction). A custom JVP serves forward and reverse mode (JAX transposes it)."""
    import jax

    @jax.custom_jvp
    def fn(*arrays):
        return run(arrays, False)

    @fn.defjvp
    def fn_jvp(primals, tangents):
        _, out_tangents = jax.jvp(lambda *a: run(a, True), primals, tangents)
        return run(primals, False), out_tangents

    return fn


def build(kernel: Kernel):
    """``fn(*param arrays) -> (outputs, written params)``, to be traced by ``jax.jit``."""
    info = analyse(kernel)
    return info, differentiable(lambda arrays, zero: run_kernel(info, arrays, zero_poison=zero))


def to_held(array, tensor_type):
    """A kernel argument as the backend holds its HBM tensor (in its storage dtype)."""
    want = runtime.storage_dtype(tensor_type.dtype)
    if isinstance(array, jax.Array) and array.dtype == want:  # (tracers too) as held: no conversion dispatched
        return array
    x = jnp.asarray(array)
    return x if x.dtype == want else x.astype(want)
