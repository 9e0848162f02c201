"""The verifier every caller goes through: ``nki_dsl.verify``'s rules, with the lowering its placing rules read
(``sbuf-capacity`` and ``psum-banks`` ask the allocator about the kernel after ``lower-language``,
``verify/allocator_view.py``).

The verifier layer imports no pass, so this module, in the passes layer, gives it the pipeline's own lowering and
allocator: ``verify_kernel``, ``check``, ``prove`` and ``prove_or_raise`` are ``nki_dsl.verify``'s with that
lowering passed in. Tracing (``trace/jit.py``), parsing (``api.py``), a family's instances (``family.py``), the
CLI, ``nki.phase_times`` and the pipeline's check after each pass all call these, so they give one answer.

The lowering a verification made is kept for the compiler (weakly, per kernel object and target, until
``run_pipeline`` takes it): the trace -> verify -> compile path lowers a kernel once. A verification always
lowers afresh (it judges the kernel as it is now); what the compiler takes is the lowering of the kernel that was
verified, as kernels are not changed once verified (the simulator's ``prepared`` cache relies on the same).
"""

from __future__ import annotations

import contextlib
import weakref
from collections import deque

from nki_dsl import verify
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.budget import DEFAULT_BUDGET, IRBudget
from nki_dsl.ir.nodes import Kernel, Op
from nki_dsl.passes import allocate
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.passes.rewrite import Pass
from nki_dsl.targets import Target
from nki_dsl.verify import family

# kernel -> {(pass name, target): the kernel after that pass}, until the pipeline takes it, the kernel is dropped,
# or MAX_KEPT later verifications have kept theirs: a kernel verified but compiled from its traced IR (the NumPy and
# JAX backends) does not hold a second copy of its IR for as long as a jit cache holds the kernel.
MAX_KEPT = 16
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NEWEST: deque = deque()  # weak references to the kernels of ``_KEPT``, oldest first


def _keep(kernel: Kernel, key: tuple, result: Kernel) -> None:
    _KEPT.setdefault(kernel, {})[key] = result
    _NEWEST.append(weakref.ref(kernel))
    while len(_NEWEST) > MAX_KEPT:
        old = _NEWEST.popleft()()
        if old is not None and not any(r() is old for r in _NEWEST):
            _KEPT.pop(old, None)


class AllocatorView:
    """``verify/allocator_view.AllocatorView``: ``kernel`` as the allocator sees it, and its answers, computed
    when a rule first asks."""

    def __init__(self, kernel: Kernel, target: Target):
        self.kernel = kernel
        self.target = target
        self._lives = None
        self._answers: dict[str, tuple] = {}

    def sbuf(self) -> tuple:
        return self._answer("sbuf")

    def psum(self) -> tuple:
        return self._answer("psum")

    def _answer(self, buffer: str) -> tuple:
        if buffer not in self._answers:
            if self._lives is None:  # one walk for both memories
                self._lives = allocate.live_ranges(self.kernel)
            self._answers[buffer] = allocate.misfit_of(self._lives, self.target, buffer)
        return self._answers[buffer]

    def fit_bound(self) -> int:
        return allocate.MAX_FIT_WORK


def lowering(kernel: Kernel, target: Target) -> AllocatorView:
    """The allocator's view of ``kernel`` after ``lower-language`` (kept for ``run_pipeline``); a kernel with
    nothing to lower is its own."""
    lowered = kernel
    if any(isinstance(s, Op) and s.name in LOWER_LANGUAGE.rules for s, _ in kernel.walk()):
        # IR another rule refuses (a DMA without its attribute) may not lower: that rule reports it, and the
        # tensors the kernel has as it stands are placed
        with contextlib.suppress(Exception):
            lowered = LOWER_LANGUAGE(kernel, target)
            _keep(kernel, (LOWER_LANGUAGE.name, target), lowered)
    return AllocatorView(lowered, target)


def take_kept(kernel: Kernel, p: Pass, target: Target) -> Kernel | None:
    """The result of pass ``p`` on ``kernel`` that verifying ``kernel`` for ``target`` made, if any (once)."""
    kept = _KEPT.get(kernel)
    return None if kept is None else kept.pop((p.name, target), None)


def verify_kernel(kernel: Kernel, target: Target, budget: IRBudget | None = None,
                  times: dict[str, float] | None = None) -> list[Diagnostic]:  # fmt: skip
    """Every diagnostic, in source-line order (``nki_dsl.verify.verify_kernel``)."""
    return verify.verify_kernel(kernel, target, budget, times, lowering=lowering)


def check(kernel: Kernel, target: Target, budget: IRBudget | None = None) -> Kernel:
    """Raise ``NkiVerificationError`` listing every broken rule; return the kernel when it is valid."""
    return verify.check(kernel, target, budget, lowering=lowering)


def prove(kernel: Kernel, target: Target, budget: IRBudget | None = None) -> list[Diagnostic]:
    """A shape family's proof over its whole range (``verify/family.prove``)."""
    return family.prove(kernel, target, budget, lowering=lowering)


def prove_or_raise(kernel: Kernel, target: Target, budget: IRBudget | None = DEFAULT_BUDGET) -> Kernel:
    """``prove``, raising ``NkiVerificationError`` with every diagnostic (``verify/family.prove_or_raise``)."""
    return family.prove_or_raise(kernel, target, budget, lowering=lowering)
