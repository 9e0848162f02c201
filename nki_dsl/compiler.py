"""``nki.compiler``: compiler hints from NKI. They are accepted so kernels run unchanged; the NumPy reference
has no scheduler or allocator to steer, so each is a documented no-op here."""

from __future__ import annotations

from nki_dsl.language import buffers


def _passthrough(fn=None, **_options):
    if fn is None:
        return lambda f: f
    return fn


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough
no_reorder = _passthrough


class _Allocator:
    """``ncc.sbuf.alloc(...)`` and friends: direct allocation is ignored; the buffer is auto-allocated."""

    def __init__(self, buffer: str):
        self.buffer = buffer

    def alloc(self, *args, **kwargs):
        return getattr(buffers, self.buffer)

    mod_alloc = auto_alloc = alloc


sbuf = _Allocator("sbuf")
psum = _Allocator("psum")
