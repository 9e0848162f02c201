"""``TracedKernel``: a traced (or parsed) and verified concrete kernel, what ``nki.trace`` and ``nki.parse_ir`` return
and what a shape family's instances are (``family.py``)."""

from __future__ import annotations

from nki_dsl import backends, dtypes
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target


class TracedKernel:
    """A traced, verified kernel: ``str()`` is its IR text, ``.ir`` the IR itself."""

    def __init__(self, ir: Kernel):
        self.ir = ir

    @property
    def text(self) -> str:
        from nki_dsl.ir.printer import print_kernel  # deferred: `import nki_dsl` does not load the printer

        return print_kernel(self.ir)

    @property
    def param_names(self) -> list[str]:
        """The kernel's tensor parameters, in order: the names ``compile(...).run`` takes its arrays by."""
        return [p.name for p in self.ir.params]

    @property
    def param_types(self) -> list[tuple[str, tuple[int, ...], str]]:
        """Each parameter's ``(name, shape, NumPy dtype name of the arrays it takes)``, in order: what
        ``compile(...).run`` must be given (the backends index the arrays as the IR says; a caller binding arrays
        from elsewhere, a Hub manifest, checks them against these). The NumPy name, not the NKI one: a
        ``float8_e4m3`` parameter takes ``float8_e4m3fn`` arrays, a ``bool_`` one ``bool`` arrays."""
        return [(p.name, tuple(p.type.shape), dtypes.get(p.type.dtype).user_dtype.name) for p in self.ir.params]

    def compile(self, backend: str | None = None, target: str | Target = DEFAULT_TARGET):
        """An executable of this (verified) kernel on ``backend`` (default: ``nki.default_backend()``, which sees
        no arrays yet): ``.run({param name: array})`` returns the outputs; the simulator's also keeps the run's
        ``.profile``. For IR that has no Python behind it (e.g. parsed from a Hub bundle)."""
        return backends.load(backends.resolve(backend)).compile_kernel(self.ir, get_target(target))

    def profile(self, target: str | Target = DEFAULT_TARGET, steady: bool = True):
        """The modelled Profile of this kernel on ``target``'s engine simulator, timing only (shapes and dtypes
        are all it needs). Simulated on every call, unlike ``nki.benchmark``, which keeps one Profile per
        specialisation: for measuring the simulator itself. ``steady=False`` schedules every instruction one by
        one instead of advancing loops whose schedule repeats by arithmetic (the same figures, up to rounding)."""
        return backends.load("simulator").profile(self.ir, get_target(target), steady=steady)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<TracedKernel {self.ir.name}>"
