"""``nki.compiler`` (``import neuronxcc.nki.compiler as ncc``): direct allocation and compiler hints.

* ``ncc.sbuf`` / ``ncc.psum``: direct allocation, ``buffer=ncc.sbuf.mod_alloc(base_addr=...)`` (modules
  ``sbuf.py`` / ``psum.py``; the mechanism is ``nki_dsl/language/direct_allocation.py``). Honoured by the
  allocator and checked by the verifier.
* Decorators ``skip_middle_end_transformations``, ``enable_stack_allocator``, ``force_auto_alloc``, ``no_reorder``:
  they steer NKI's scheduler and allocator passes, which have no counterpart here (the reference computes values;
  the simulator schedules what the kernel says), so each returns the kernel unchanged. ``force_auto_alloc``
  (NKI's debugging switch that ignores direct allocation) is the exception that would change placements; it is
  accepted and placements stay direct.
"""

from __future__ import annotations

from nki_dsl.compiler import psum, sbuf


def _passthrough(fn=None, **_options):
    if fn is None:
        return lambda f: f
    return fn


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough
no_reorder = _passthrough

__all__ = ["sbuf", "psum", "skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc",
           "no_reorder"]
