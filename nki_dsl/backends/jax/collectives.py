"""JAX lowering of the sync ops and the LNC=2 launch that holds them (``ir/cores.py``).

A kernel with sync ops runs each core as a generator walking the IR on its own ``State`` (its on-chip tensors
and private HBM); ``ir.cores.run_cores`` runs the generators around their meetings. Shared HBM (the kernel's
arguments, ``nl.shared_hbm`` allocations, the random state) is handed from core to core at every switch: a core
publishes its values when it pauses and reads the other core's when it resumes, so a phase sees what the other
core wrote in earlier phases. A loop holding a sync op is unrolled at trace time (its trip count is static): a
``lax.fori_loop`` body cannot pause halfway for the peer. Other loops run as everywhere else.

``sendrecv`` resumes with the peer's ``src`` value and writes it into its ``dst``; the barrier with nothing.
"""

from __future__ import annotations

from nki_dsl.backends.jax.context import Lowered, OpContext, State
from nki_dsl.errors import NkiError
from nki_dsl.ir.cores import Meet, contains_sync, run_cores
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

    def walk(stmts, core: State):
        for stmt in stmts:
            if isinstance(stmt, Loop):
                if not contains_sync(stmt):
                    run_loop(stmt, core)
                    continue
                for k in range(stmt.trip_count):
                    core.ivars[stmt.var] = stmt.start + k * stmt.step
                    yield from walk(stmt.body, core)
            elif stmt.name in SYNC_OPS:
                meet = _meet(stmt, core)
                board.update({n: core.value(n) for n in shared if n in core.env})
                core.ivars[RECEIVED] = yield meet
                core.env.update(board)
                run_op(stmt, core)
            else:
                run_op(stmt, core)

    def program(pid: int):
        core = st.child()
        core.ivars["pid0"] = pid
        states.append(core)
        core.env.update(board)
        yield from walk(body, core)
        board.update({n: core.value(n) for n in shared if n in core.env})

    run_cores([program(pid) for pid in range(grid[0])])
    st.env.update(states[-1].env)
    st.env.update(board)
