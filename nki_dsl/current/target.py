"""The target a current-API kernel is being specialised for, readable from kernel code through
``nisa.get_nc_version()`` (kernels branch on it in Python: ``if nisa.get_nc_version() >= nisa.nc_version.gen3``).

It is set by the kernel's trace (``jit.CurrentKernel.trace``) for the target the call asked for, so one kernel
specialises differently per target and each specialisation is cached under its target."""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

from nki_dsl.targets import DEFAULT_TARGET, get_target

_target: contextvars.ContextVar[str] = contextvars.ContextVar("nki_current_target", default=DEFAULT_TARGET)

@contextmanager
def tracing_for(target: str):
    token = _target.set(get_target(target).name)
    try:
        yield
    finally:
        _target.reset(token)


def current_target() -> str:
    return _target.get()


def generation() -> int:
    """The NeuronCore generation (reference/nki.md §2.7 "get_nc_version": 2 Trn1/Inf2, 3 Trn2, 4 Trn3)."""
    return get_target(current_target()).nc_version
