"""What the rules that judge on-chip placement read: the kernel as the allocator will see it and the allocator's
answer about it. The caller of the verifier makes it (``passes/verifier.AllocatorView``: the lowering and the
allocator are passes, above this layer) and passes it in, so the rules ask the very code the compiler runs, and
the compiler then reuses that lowering (and these answers, when it allocates it) instead of computing them a
second time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target


class AllocatorView(Protocol):
    #: the kernel after ``lower-language`` (the kernel itself when it has nothing to lower, or when it does not
    #: lower: IR another rule refuses, such as a DMA without its attribute, is placed as it stands)
    kernel: Kernel
    #: why the kernel does not lower (the op, its line, the reason: ``passes/rewrite.NkiRewriteError``), or ``()``;
    #: the verifier reports it when no other rule refuses the kernel
    refusals: tuple[Diagnostic, ...]

    def sbuf(self) -> tuple:
        """``(misfit or None, the SBUF live ranges placed, their aligned bytes: fn(live) -> int)``:
        ``passes/allocate.one_copy_fit`` of ``kernel``'s SBUF tensors."""
        ...

    def psum(self) -> tuple:
        """The same for PSUM (sizes in whole banks)."""
        ...

    def fit_bound(self) -> int:
        """The allocator's work bound (``passes/allocate.MAX_FIT_WORK``), for the message when it is passed."""
        ...


#: ``lowering(kernel, target) -> AllocatorView``: what ``verify_kernel`` takes from its caller
Lowering = Callable[[Kernel, Target], AllocatorView]
