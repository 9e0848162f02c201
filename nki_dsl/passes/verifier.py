"""The verifier every caller goes through: ``nki_dsl.verify``'s rules, with the lowering its placing rules read
(``sbuf-capacity`` and ``psum-banks`` ask the allocator about the kernel after ``lower-language``,
``verify/allocator_view.py``).

The verifier layer imports no pass, so this module, in the passes layer, gives it the pipeline's own lowering and
allocator: ``verify_kernel``, ``check``, ``prove`` and ``prove_or_raise`` are ``nki_dsl.verify``'s with that
lowering passed in. Tracing (``trace/jit.py``), parsing (``api.py``), a family's instances (``family.py``), the
CLI, ``nki.phase_times`` and the pipeline's check after each pass (``check_output``) all call these, so they
give one answer.

The lowering a verification made is kept for the compiler (weakly, per kernel object and target, until
``run_pipeline`` takes it): the trace -> verify -> compile path lowers a kernel once. A verification always
lowers afresh (it judges the kernel as it is now); what the compiler takes is the lowering of the kernel that was
verified, as kernels are not changed once verified (the simulator's ``prepared`` cache relies on the same). It
is kept with the ``AllocatorView`` the placing rules read of it, whose live ranges and one-copy fits the
allocator then starts from (``pipeline.compile_for_target``): the compile of a verified kernel walks it once.

An op ``lower-language`` cannot lower (``rewrite.NkiRewriteError``) is a diagnostic of the verification (the
view's ``refusals``), so such a kernel is refused where it enters, with its op and line, not when compiled.
"""

from __future__ import annotations

import weakref
from collections import deque

from nki_dsl import verify
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.budget import DEFAULT_BUDGET, IRBudget
from nki_dsl.ir.nodes import Kernel, Op
from nki_dsl.passes import allocate
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.passes.rewrite import NkiRewriteError, Pass
from nki_dsl.targets import Target
from nki_dsl.verify import family

# kernel -> {(pass name, target): (the kernel after that pass, the AllocatorView the placing rules read of it)},
# until the pipeline takes it, the kernel is dropped, or MAX_KEPT later verifications have kept theirs: a kernel
# verified but compiled from its traced IR (the NumPy and JAX backends) does not hold a second copy of its IR for as
# long as a jit cache holds the kernel.
MAX_KEPT = 16
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NEWEST: deque = deque()  # weak references to the kernels of ``_KEPT``, oldest first


def _keep(kernel: Kernel, key: tuple, result: tuple) -> None:
    _KEPT.setdefault(kernel, {})[key] = result
    _NEWEST.append(weakref.ref(kernel))
    while len(_NEWEST) > MAX_KEPT:
        old = _NEWEST.popleft()()
        if old is not None and not any(r() is old for r in _NEWEST):
            _KEPT.pop(old, None)


class AllocatorView:
    """``verify/allocator_view.AllocatorView``: ``kernel`` as the allocator sees it, and its answers, computed
    when a rule first asks. The compiler reuses them when it allocates this very kernel object (``fit``)."""

    def __init__(self, kernel: Kernel, target: Target, refusals: tuple[Diagnostic, ...] = ()):
        self.kernel = kernel
        self.target = target
        self.refusals = refusals
        self._lives = None
        self._fits: dict[str, allocate.OneCopyFit] = {}

    def sbuf(self) -> tuple:
        f = self.fit("sbuf")
        return f.misfit, f.group, f.size

    def psum(self) -> tuple:
        f = self.fit("psum")
        return f.misfit, f.group, f.size

    def fit(self, buffer: str) -> allocate.OneCopyFit:
        """``allocate.one_copy_fit`` of ``kernel`` for ``buffer``, once (``allocate(kernel, target, fit=...)``)."""
        if buffer not in self._fits:
            if self._lives is None:  # one walk for both memories
                self._lives = allocate.live_ranges(self.kernel)
            self._fits[buffer] = allocate.one_copy_fit(self._lives, self.target, buffer)
        return self._fits[buffer]

    def fit_bound(self) -> int:
        return allocate.MAX_FIT_WORK


def lowering(kernel: Kernel, target: Target) -> AllocatorView:
    """The allocator's view of ``kernel`` after ``lower-language``, kept with the lowering for ``run_pipeline``;
    a kernel with nothing to lower is its own (not kept: the entry would hold its weak key alive)."""
    return view_of(kernel, target, keep=True)


def view_of(kernel: Kernel, target: Target, keep: bool) -> AllocatorView:
    """``lowering``; with ``keep`` false nothing is kept (the pipeline's check of a pass's output)."""
    if not any(isinstance(s, Op) and s.name in LOWER_LANGUAGE.rules for s, _ in kernel.walk()):
        return AllocatorView(kernel, target)
    try:
        lowered = LOWER_LANGUAGE(kernel, target)
    except NkiRewriteError as e:
        # An op the pass cannot lower. The verifier reports it when no other rule refuses the kernel (IR another
        # rule refuses, such as a DMA without its attribute, often does not lower either: that rule's message says
        # why); the placing rules judge the tensors the kernel has as it stands.
        return AllocatorView(kernel, target, tuple(e.diagnostics))
    view = AllocatorView(lowered, target)
    if keep:
        _keep(kernel, (LOWER_LANGUAGE.name, target), (lowered, view))
    return view


def take_kept(kernel: Kernel, p: Pass, target: Target) -> tuple[Kernel, AllocatorView] | None:
    """The result of pass ``p`` on ``kernel`` that verifying ``kernel`` for ``target`` made, with the view the
    placing rules read of it, if any (once)."""
    kept = _KEPT.get(kernel)
    return None if kept is None else kept.pop((p.name, target), None)


def verify_kernel(kernel: Kernel, target: Target, budget: IRBudget | None = None,
                  times: dict[str, float] | None = None) -> list[Diagnostic]:  # fmt: skip
    """Every diagnostic, in source-line order (``nki_dsl.verify.verify_kernel``)."""
    return verify.verify_kernel(kernel, target, budget, times, lowering=lowering)


def check(kernel: Kernel, target: Target, budget: IRBudget | None = None) -> Kernel:
    """Raise ``NkiVerificationError`` listing every broken rule; return the kernel when it is valid."""
    return verify.check(kernel, target, budget, lowering=lowering)


def check_output(kernel: Kernel, target: Target, view: AllocatorView | None) -> AllocatorView | None:
    """``check`` of a pass's output (``run_pipeline`` with ``check_each_pass``), keeping nothing. ``view``, the
    placing rules' view of this kernel made by the first verification (its kept lowering), answers them again:
    their answers are a function of the kernel object they were computed on, which is this one. Returns the view
    of ``kernel`` itself the placing rules read, or None when that was a lowering of it (a pass list that does not
    lower), so the allocator takes its answers only for the kernel they are about."""
    seen: list[AllocatorView] = []

    def placing(k: Kernel, t: Target) -> AllocatorView:
        seen.append(view if view is not None and view.kernel is k and view.target == t else view_of(k, t, False))
        return seen[-1]

    verify.check(kernel, target, lowering=placing)
    return seen[0] if seen and seen[0].kernel is kernel else None


def prove(kernel: Kernel, target: Target, budget: IRBudget | None = None) -> list[Diagnostic]:
    """A shape family's proof over its whole range (``verify/family.prove``)."""
    return family.prove(kernel, target, budget, lowering=lowering)


def prove_or_raise(kernel: Kernel, target: Target, budget: IRBudget | None = DEFAULT_BUDGET) -> Kernel:
    """``prove``, raising ``NkiVerificationError`` with every diagnostic (``verify/family.prove_or_raise``)."""
    return family.prove_or_raise(kernel, target, budget, lowering=lowering)
