"""JAX lowering of the sync ops and the LNC=2 launch that holds them (``ir/cores.py``).

A kernel with sync ops runs each core as a generator walking the IR on its own ``State`` (its on-chip tensors
and private HBM); ``ir.cores.run_cores`` runs the generators around their meetings. Shared HBM (the kernel's
arguments, ``nl.shared_hbm`` allocations, the random state) is handed from core to core at every switch: a core
publishes its values when it pauses and reads the other core's when it resumes, so a phase sees what the other
core wrote in earlier phases. A loop holding a sync op is a meeting too: both cores run it as one
``lax.fori_loop`` whose iteration runs each core's iteration around their meetings (``fused``), so its trace does
not grow with its trip count. Other loops run as everywhere else.

``sendrecv`` resumes with the peer's ``src`` value and writes it into its ``dst``; the barrier with nothing.
"""

from __future__ import annotations

from jax import lax

from nki_dsl.backends.jax.context import Lowered, OpContext, State
from nki_dsl.errors import NkiError
from nki_dsl.ir.cores import LOOP, Meet, contains_sync, run_cores
from nki_dsl.ir.nodes import Loop, Op
from nki_dsl.ir.ops.collectives import CORE_BARRIER, SENDRECV, SYNC_OPS

RECEIVED = "_received"  # the ``State.ivars`` slot the peer's payload is handed over in (never an IR variable)


def sendrecv(ctx: OpContext) -> Lowered:
    return Lowered(writes=[("dst", ctx.state.ivars[RECEIVED], "none")])


def core_barrier(ctx: OpContext) -> Lowered:
    return Lowered()


COLLECTIVE_HANDLERS = {SENDRECV: sendrecv, CORE_BARRIER: core_barrier}


def _meet(op: Op, st: State) -> Meet:
    if op.name != SENDRECV:
        return Meet(op.name, op.loc)
    rank = {a: op.attrs[a].evaluate({"pid0": st.ivars["pid0"]}) for a in ("send_to_rank", "recv_from_rank")}
    src = OpContext(st, op).read("src")
    dst = op.operands["dst"]
    return Meet(op.name, op.loc, rank["send_to_rank"], rank["recv_from_rank"], op.attrs["pipe_id"], src,
                tuple(dst.shape), dst.tensor.type.dtype)  # fmt: skip


def run_cores_jax(body, st: State, shared: list[str], run_op, run_loop) -> None:
    """Run ``body`` on each core of the one-axis launch, the cores meeting at their sync ops; ``st`` ends with
    the shared tensors' final values and the last core's private ones. ``run_op(op, state)`` and
    ``run_loop(loop, state)`` are the backend's."""
    grid = st.info.kernel.grid
    if len(grid) != 1:
        raise NkiError(f"sync ops need a one-axis launch (kernel[2]), not grid {list(grid)}")
    board = {n: st.value(n) for n in shared if n in st.env}
    states = []

    def publish(core: State) -> None:
        board.update({n: core.value(n) for n in shared if n in core.env})

    def walk(stmts, core: State):
        for stmt in stmts:
            if isinstance(stmt, Loop):
                if not contains_sync(stmt):
                    run_loop(stmt, core)
                    continue
                publish(core)
                yield Meet(LOOP, stmt.loc, payload=(stmt, core))  # both cores run it as one loop (``fused``)
                core.env.update(board)
            elif stmt.name in SYNC_OPS:
                meet = _meet(stmt, core)
                publish(core)
                core.ivars[RECEIVED] = yield meet
                core.env.update(board)
                run_op(stmt, core)
            else:
                run_op(stmt, core)

    def program(core: State, stmts):
        core.env.update(board)
        yield from walk(stmts, core)
        publish(core)

    def fused(meets):
        """A loop holding sync ops, reached by both cores: one ``lax.fori_loop`` whose iteration runs the cores'
        iterations around their meetings, carrying what each core writes (a fori_loop body cannot pause for a
        peer outside it). Its phases are the unrolled loop's, split once more at the loop's entry, which only a
        kernel racing on shared HBM could tell apart (rule core-race refuses those)."""
        loop, cores = meets[0].payload[0], [m.payload[1] for m in meets]
        for core in cores:
            core.env.update(board)
        info = st.info
        names = sorted((n for n in info.written[loop] if n in cores[0].env or n in info.read_after[loop]),
                       key=repr)  # fmt: skip
        k = len(names)
        init = tuple(c.value(n) if n in c.env else c.fresh(n) for c in cores for n in names)
        outside = dict(board)

        def step_fn(i, carry):
            inner = []
            for j, core in enumerate(cores):
                s = core.child()
                s.env.update(zip(names, carry[j * k:(j + 1) * k]))
                s.ivars[loop.var] = loop.start + i * loop.step
                inner.append(s)
            board.clear()
            board.update({n: inner[0].value(n) for n in shared if n in inner[0].env})
            run_cores([program(s, loop.body) for s in inner], joint=fused)
            for s in inner:  # both cores leave the iteration with the same shared HBM
                s.env.update(board)
            return tuple(s.value(n) for s in inner for n in names)

        out = lax.fori_loop(0, loop.trip_count, step_fn, init) if loop.trip_count > 0 else init
        board.clear()
        board.update(outside)  # (the iteration's values are its trace's; the loop's results replace them)
        for j, core in enumerate(cores):
            core.env.update(zip(names, out[j * k:(j + 1) * k]))
        publish(cores[-1])
        return [None] * len(cores)

    for pid in range(grid[0]):
        core = st.child()
        core.ivars["pid0"] = pid
        states.append(core)
    run_cores([program(core, body) for core in states], joint=fused)
    st.env.update(states[-1].env)
    st.env.update(board)
