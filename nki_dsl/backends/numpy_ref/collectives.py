"""NumPy lowering of the sync ops (``nisa.sendrecv``, ``nisa.core_barrier``; ``ir/ops/collectives.py``). A kernel
holding them is generated as one generator per core (``Emitter.emit``), run by ``ir.cores.run_cores``; each sync
op becomes a ``yield`` of its ``Meet``: ``sendrecv`` resumes with the peer's ``src``, which it writes into its
``dst``; the barrier resumes with nothing. The op's name, source line, ``dst`` shape and dtype are constants of
the generated module, never source text."""

from __future__ import annotations

from nki_dsl.backends.numpy_ref.access_code import affine_code
from nki_dsl.backends.numpy_ref.emitter import Lowered, OpContext
from nki_dsl.ir.ops.collectives import CORE_BARRIER, SENDRECV
from nki_dsl.ir.source_safe import py_int


def sendrecv(ctx: OpContext) -> Lowered:
    op = ctx.op
    dst = op.operands["dst"]
    got = ctx.e.tmp()
    fixed = ", ".join(ctx.e.const(v) for v in (op.name, op.loc))
    ranks = ", ".join(affine_code(op.attrs[a]) for a in ("send_to_rank", "recv_from_rank"))
    ctx.e.line(f"{got} = yield Meet({fixed}, {ranks}, {py_int(op.attrs['pipe_id'])}, "
               f"np.array({ctx.read('src', axes=None)}, copy=True), {ctx.e.const(tuple(dst.shape))}, "
               f"{ctx.e.const(dst.tensor.type.dtype)})")  # fmt: skip
    return Lowered(writes=[("dst", got, "none")])


def core_barrier(ctx: OpContext) -> Lowered:
    ctx.e.line(f"yield Meet({ctx.e.const(ctx.op.name)}, {ctx.e.const(ctx.op.loc)})")
    return Lowered()


COLLECTIVE_HANDLERS = {SENDRECV: sendrecv, CORE_BARRIER: core_barrier}
