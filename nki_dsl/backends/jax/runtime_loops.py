"""Runtime loops (``ir/runtime_loops.py``) on JAX: a dynamic loop is a ``lax.fori_loop`` whose trip count is
computed from the register's value when the program runs (XLA makes it a while loop); a while loop is a
``lax.while_loop`` whose condition re-reads the register from the carried state before each iteration; a
scalar_offset loop runs its body in place with its index the register's (traced) value.

Reverse-mode derivatives (``jax.grad``): JAX cannot transpose a loop whose trip count is traced, so the gradient
twin (``program.differentiable``, ``State.zero_poison``) runs dynamic and while loops over their declared bound
with each iteration past the run's last one a no-op (``lax.cond``): the same values, at the cost of the bound's
iterations (the kernel's own values still come from the run-length loop).

The declared bound is checked by a host callback, as indirect DMA rows are (``indirect.py``): a dynamic loop's
stop past it, or a while loop's condition still non-zero after its declared number of iterations, raises
``NkiRuntimeError`` (re-raised by ``Executable.call``). The loop itself never runs past the bound either way (the
trip count is clipped, the while condition tests the iteration count), so a caller's ``jax.jit`` that does not
wait for the callback still gets a bounded loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl.backends.jax import indirect
from nki_dsl.ir.nodes import Kernel, Loop
from nki_dsl.ir.runtime_loops import bound_error


def has_runtime_loops(kernel: Kernel) -> bool:
    return any(isinstance(s, Loop) and s.runtime for s, _ in kernel.walk())


def _scalar(st, lp: Loop):
    return jnp.asarray(st.read(lp.reads)).reshape(-1)[0].astype(jnp.int32)


def _check(lp: Loop):
    def check(value, past) -> None:
        if bool(np.asarray(past)):
            indirect.raise_recorded(bound_error(lp.kind, lp.var, int(np.asarray(value)), lp.start, lp.stop, lp.loc))

    return check


def run(lp: Loop, st, run_body) -> None:
    if lp.kind == "scalar_offset":  # the body once, its index the register's value (clipped into the range)
        value = _scalar(st, lp)
        outside = (value < lp.start) | (value >= lp.stop) | ((value - lp.start) % lp.step != 0)
        if not st.zero_poison:
            jax.debug.callback(_check(lp), value, outside)
        st.ivars[lp.var] = jnp.clip(value, lp.start, lp.last)
        run_body(lp.body, st)
        return
    info = st.info
    written, read_after = info.written[lp], info.read_after[lp]
    register = info.root(lp.reads.tensor.name)
    # a while loop's condition reads the register after every iteration: carried whether or not read after
    carried = sorted((n for n in written if n in st.env or n in read_after or (lp.kind == "while" and n == register)),
                     key=repr)  # fmt: skip
    init = tuple(st.value(n) if n in st.env else st.fresh(n) for n in carried)

    def inner_state(carry, i):
        inner = st.child()
        inner.env.update(zip(carried, carry))
        inner.ivars[lp.var] = lp.start + i * lp.step
        return inner

    def one(i):  # an iteration, as a function of the carried values
        def go(carry):
            inner = inner_state(carry, i)
            run_body(lp.body, inner)
            return tuple(inner.value(n) for n in carried)

        return go

    if lp.kind == "dynamic":
        value = _scalar(st, lp)
        stop = jnp.minimum(value, lp.stop)
        trips = jnp.maximum(0, (stop - lp.start + lp.step - 1) // lp.step)
        if st.zero_poison:  # the gradient twin: static bounds, iterations past the run's a no-op
            out = lax.fori_loop(0, lp.trip_count, lambda i, c: lax.cond(i < trips, one(i), lambda c: c, c), init)
        else:
            jax.debug.callback(_check(lp), value, value > lp.stop)
            out = lax.fori_loop(0, trips, lambda i, c: one(i)(c), init)
    elif st.zero_poison:
        def step_fn(i, state):
            running, carry = state
            running = running & (_scalar(inner_state(carry, i), lp) != 0)
            return running, lax.cond(running, one(i), lambda c: c, carry)

        _, out = lax.fori_loop(0, lp.stop, step_fn, (jnp.bool_(True), init))
    else:
        def cond(c):
            i, carry = c
            return (i < lp.stop) & (_scalar(inner_state(carry, i), lp) != 0)

        def body(c):
            i, carry = c
            return i + 1, one(i)(carry)

        i, out = lax.while_loop(cond, body, (jnp.int32(0), init))
        last = _scalar(inner_state(out, i), lp)
        jax.debug.callback(_check(lp), last, (i >= lp.stop) & (last != 0))
    st.env.update(zip(carried, out))
