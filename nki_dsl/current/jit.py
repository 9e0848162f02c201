"""``nki.jit`` of the current API: a kernel specialised with Python loop semantics (``specialize.py``) for the
target of the call, launched as ``kernel(...)`` or ``kernel[lnc](...)`` with lnc 1 or 2 (reference/nki.md §1.5,
§2.7 "nki.jit").

Options (§2.7 "nki.jit"): ``mode=`` is accepted and ignored (deprecated in 0.3.0; kernels run on this project's
backends whatever the framework); ``debug_kernel``, ``show_compiler_tb`` and ``experimental_flags`` are accepted
(they steer AWS's compiler only); any other option is warned about, never silently dropped.

The target of a launch is ``NEURON_PLATFORM_TARGET_OVERRIDE`` (trn1|inf2|gen2, trn2|gen3, trn3|gen4), else the
kernel's ``platform_target=``, else trn2. NKI 0.3.0+ rejects ``platform_target=``, but code written for earlier
releases (HF ``kernels``' Neuron example among it) passes it, so it is honoured with a DeprecationWarning rather
than refused. ``NKI_SIMULATOR=1`` runs every launch that names no backend on the engine simulator (as NKI's
switch does), which returns the same outputs as the NumPy reference.
"""

from __future__ import annotations

import os
import warnings

from nki_dsl import backends
from nki_dsl.current.specialize import Decisions, trace_specialized
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.builder import is_tracing
from nki_dsl.trace.call_errors import api_call_error
from nki_dsl.trace.jit import JitKernel, Launch

KNOWN_OPTIONS = {"mode", "debug_kernel", "show_compiler_tb", "experimental_flags", "additional_compile_opt",
                 "platform_target"}  # fmt: skip
# NEURON_PLATFORM_TARGET_OVERRIDE spellings (reference/nki.md §2.7 "nki.jit": trn1|inf2|gen2, trn2|gen3, trn3|gen4).
PLATFORM_NAMES = {"trn1": "trn1", "inf2": "inf2", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2", "trn3": "trn3",
                  "gen4": "trn3"}  # fmt: skip
TARGET_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"


def _platform_name(value, what: str) -> str:
    name = str(value).strip().lower()
    if name not in PLATFORM_NAMES:
        raise NkiApiError(f"{what}={value!r} is not one of {', '.join(PLATFORM_NAMES)}")
    return PLATFORM_NAMES[name]


def platform_target(kernel=None) -> str:
    """The target named by ``NEURON_PLATFORM_TARGET_OVERRIDE`` (read once per launch, at the API boundary), else
    the kernel's ``platform_target=`` option, else the project's default target."""
    value = os.environ.get(TARGET_ENV, "").strip()
    if value:
        return _platform_name(value, TARGET_ENV)
    option = getattr(kernel, "options", {}).get("platform_target") if kernel is not None else None
    return _platform_name(option, "platform_target") if option is not None else DEFAULT_TARGET


def default_backend(backend: str | None, arrays=()) -> str:
    """``NKI_SIMULATOR=1`` (NKI's own switch) sends launches that did not name a backend to the engine simulator;
    otherwise they run on the project's default backend (``backends.resolve``)."""
    if backend is None and os.environ.get("NKI_SIMULATOR", "") == "1":
        return "simulator"
    return backends.resolve(backend, arrays)


class CurrentKernel(JitKernel):
    """A kernel written in the current API."""

    def _trace(self, bound, grid: tuple[int, ...], target: Target) -> tuple[Kernel, dict]:
        # Which loops need unrolling is learnt per loop statement and kept for the kernel's next specialisations.
        decisions = self.__dict__.setdefault("_decisions", Decisions())
        self.trace_count += 1
        try:
            kernel, facts = trace_specialized(self.fn, bound, grid, target, decisions)
        except TypeError as e:  # a kernel line called an nl/nisa function with arguments it does not take
            error = api_call_error(e)
            if error is None:
                raise
            raise error from None
        kernel.lnc = grid[0] if grid else 1  # kernel[2]: two cores at once, not an SPMD grid (ir/nodes.Kernel.lnc)
        return kernel, facts

    def __getitem__(self, lnc) -> CurrentLaunch:
        return CurrentLaunch(self, lnc_grid(lnc))

    def __call__(self, *args, **kwargs):
        if is_tracing():
            return self.inline(args, kwargs)
        return CurrentLaunch(self, ())(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<nki.jit kernel {self.fn.__name__} (current API)>"


def lnc_grid(lnc) -> tuple[int, ...]:
    """``kernel[lnc]``: one int, 1 or 2 logical NeuronCores (§1.5: "The bracket syntax must contain only one
    number"). LNC=1 is the plain launch."""
    if isinstance(lnc, tuple):
        raise NkiApiError(f"kernel[{', '.join(map(str, lnc))}]: the current API launches with one number, the LNC "
                          f"degree (kernel[2]); SPMD grids are legacy (neuronxcc.nki)")  # fmt: skip
    if isinstance(lnc, bool) or not isinstance(lnc, int) or lnc not in (1, 2):
        raise NkiApiError(f"kernel[{lnc!r}]: the LNC degree is 1 or 2")
    return () if lnc == 1 else (lnc,)


class CurrentLaunch(Launch):
    """A current-API kernel bound to its LNC degree; runs for the platform target, on the default backend unless
    the call names one."""

    def __call__(self, *args, backend: str | None = None, **kwargs):
        if is_tracing():
            return super().__call__(*args, backend=backend, **kwargs)
        target = get_target(platform_target(self.jit))
        kernel, arrays, key = self.jit.specialize(self.grid, args, kwargs, target)
        return self.jit.executable(kernel, key, default_backend(backend, arrays.values())).run(arrays)

    def __getitem__(self, grid):
        raise NkiApiError("the LNC degree is given once: kernel[2](...)")


def jit(fn=None, **options):
    """``@nki.jit`` / ``@nki.jit(**options)``: a current-API kernel (see the module docstring for options)."""
    if "platform_target" in options:
        _platform_name(options["platform_target"], "platform_target")
        warnings.warn(f"nki.jit(platform_target=...) is rejected by NKI 0.3.0 and later (set {TARGET_ENV}); "
                      f"nki_dsl honours it as the kernel's target", DeprecationWarning, stacklevel=2)  # fmt: skip
    unknown = sorted(set(options) - KNOWN_OPTIONS)
    if unknown:
        warnings.warn(f"nki.jit: option(s) {', '.join(unknown)} are not used by nki_dsl and are ignored",
                      stacklevel=2)  # fmt: skip
    if fn is None:
        return lambda f: CurrentKernel(f, **options)
    return CurrentKernel(fn, **options)
