"""Runtime loops of the current API (reference/nki.md §2.7 "Control flow"): ``dynamic_range`` and ``fori_loop``
emit their body once, as a loop the hardware runs (never unrolled, whatever the body does with Python state:
such state "changes once, at trace"). Their index is a register: it can index tensors (it is a symbolic loop
index here) but not decide Python control flow.

Bounds must be Python ints: trip counts held in registers (``nisa.register_*``) are not modelled, and neither is
``while_loop``, whose condition is a register the body computes; both are refused with a message saying so.

How a runtime trip count is to be represented when registers are modelled (decided, not implemented):

* a register is a ``[1, 1]`` int32 SBUF tensor: the value ``register_load`` reads and what ``.ap(scalar_offset=)``
  already accepts in its place (reference/nki.md §2.7 "Access patterns": "1x1 SBUF or register");
* a runtime loop is a ``Loop`` of kind ``dynamic`` whose stop is an operand (an access of such a tensor), read
  once at loop entry, plus a static ``max_trip`` the kernel states (``fori_loop(0, n, body, max_trip=...)``
  would be this project's extension): the verifier's bounds and dependence rules and the allocator need a
  finite range, which NKI's compiler gets from the register's allocation instead;
* the NumPy reference emits ``range(start, int(reg[0, 0]), step)``; the JAX backend a ``lax.while_loop`` over
  the same body; ``while_loop`` is the same loop with the condition register re-read after each iteration;
* the simulator prices the body once (its steady-state iteration cost, as for static loops) and multiplies by
  the trip count it reads from the register at simulation time: it already runs the NumPy reference for a
  kernel's outputs, so the reference records each dynamic loop's trip count per entry and the cost model takes
  those counts instead of a static one."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import Affine
from nki_dsl.language.iterators import _bounds
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue


def _register_bounds(api: str, args) -> tuple[int, int, int]:
    for a in args:
        if not isinstance(a, int) and hasattr(a, "access"):
            raise NkiApiError(f"{api}: bounds held in registers or tensors are not modelled; pass Python ints",
                              caller_loc(), api)  # fmt: skip
    return _bounds(api, args)


def dynamic_range(*args):
    """A runtime loop over ``range(start, stop, step)``: the body is traced once."""
    api = "nl.dynamic_range"
    builder = current(api)
    start, stop, step = _register_bounds(api, args)
    if stop <= start:
        return
    loop = builder.open_loop("sequential", start, stop, step, caller_loc())
    try:
        yield IndexValue(Affine.var(loop.var))
    finally:
        builder.close_loop(loop)


def fori_loop(lower, upper, body_fun, step=1):
    """``for i in dynamic_range(lower, upper, step): body_fun(i)``; ``body_fun`` returns nothing."""
    if not callable(body_fun):
        raise NkiApiError(f"nl.fori_loop: body_fun must be a function, got {type(body_fun).__name__}", caller_loc())
    for i in dynamic_range(lower, upper, step):
        if body_fun(i) is not None:
            raise NkiApiError("nl.fori_loop: body_fun returns nothing (loop state lives in SBUF/HBM tensors)",
                              caller_loc())  # fmt: skip


def while_loop(init, body_fun):
    raise NkiApiError("nl.while_loop runs until a register the body computes is zero; registers are not modelled "
                      "by nki_dsl, so the trip count is unknown at trace time: use nl.fori_loop with a bound",
                      caller_loc(), "nl.while_loop")  # fmt: skip
