"""What a current-API instruction returns: an ``NkiInstruction`` (reference/nki.md §2.7 "Common rules": every op
"returns an NkiInstruction (.depends_on(*producers) = semaphore edge)"), so kernels that order instructions by
hand (``b = nisa.activation(...); b.depends_on(a)``) run unmodified.

How far the edge is honoured: values follow program order on every backend (the NumPy reference and JAX run the
instructions in the order the kernel wrote them, which every ``depends_on`` edge agrees with: a producer is
always an instruction issued earlier), but the simulator's modelled schedule orders instructions by their data
only and does not add the semaphore edge, which the first use in a kernel says once (as ``nl.no_reorder`` does).
"""

from __future__ import annotations

import functools
import warnings
import weakref

from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.call_errors import binding_error

# the builders (traces) that already warned; weak, since a dead builder's id() is reused by a later one
_WARNED: weakref.WeakSet = weakref.WeakSet()


class NkiInstruction:
    """An issued instruction (its API name and kernel line)."""

    __slots__ = ("api", "loc")

    def __init__(self, api: str, loc):
        self.api = api
        self.loc = loc

    def depends_on(self, *producers: NkiInstruction) -> None:
        """This instruction waits for ``producers`` (instructions issued before it)."""
        api = f"{self.api}(...).depends_on"
        bad = next((p for p in producers if not isinstance(p, NkiInstruction)), None)
        if bad is not None:
            raise NkiApiError(f"depends_on takes instructions (what nisa calls return), got {type(bad).__name__}",
                              caller_loc(), api)  # fmt: skip
        builder = current(api)
        if producers and builder not in _WARNED:
            _WARNED.add(builder)
            warnings.warn(f"{caller_loc()}: {api}: values follow program order on every backend, but the "
                          f"simulator's modelled schedule does not add the semaphore edge", stacklevel=2)  # fmt: skip

    def __repr__(self) -> str:
        return f"<NkiInstruction {self.api} at {self.loc}>"


def returning_instruction(fn):
    """``fn`` (an instruction writing its ``dst``, returning None) returning its ``NkiInstruction``. A call with
    arguments ``fn`` does not take is refused at the kernel line, as for any ``nisa`` function
    (trace/call_errors.py)."""
    api = f"nisa.{fn.__name__}"

    @functools.wraps(fn)
    def instruction(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except TypeError:
            error = binding_error(fn, api, args, kwargs)  # arguments fn does not take: the kernel line's mistake
            if error is None:
                raise
            raise error from None
        return NkiInstruction(api, caller_loc()) if result is None else result

    return instruction
