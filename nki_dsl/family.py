"""``ShapeFamily``: a kernel traced (or parsed) for a family of shapes, and its concrete instances.

``nki.trace(kernel, nki.spec(("N", 512), "float32", dims={"N": (1, 65536)}))`` traces once with ``N`` symbolic
(``trace/symbolic.py``) and proves the family for every ``N`` in the range (``verify/family.py``);
``nki.parse_family(text)`` reads one from IR text (untrusted: its form is checked, and every instance is verified
before it runs). ``family.instantiate(x)`` binds the symbols from the arrays' shapes, checks their ranges, makes
the concrete IR (``ir/instantiate.py``) and verifies it within the budget: a ``TracedKernel`` like any other,
cached per concrete shape and target.
"""

from __future__ import annotations

from collections import OrderedDict

from nki_dsl.errors import Diagnostic, NkiShapeFamilyError, NkiVerificationError
from nki_dsl.ir.budget import IRBudget
from nki_dsl.ir.instantiate import instantiate
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.symbols import SymbolError, bind, check_bound, evaluate
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.traced import TracedKernel

# Concrete instances kept per family (least recently used dropped first): a caller cycling through many shapes pays
# instantiation and verification again rather than holding every kernel it ever ran.
MAX_INSTANCES = 32


class ShapeFamily:
    """A verified-in-form shape family: ``str()`` is its IR text, ``.ir`` the IR, ``.dims`` the declared ranges."""

    def __init__(self, ir: Kernel, budget: IRBudget | None = None):
        self.ir = ir
        self.budget = IRBudget() if budget is None else budget
        self._instances: OrderedDict[tuple, TracedKernel] = OrderedDict()  # least recently used first
        self._independence = None

    @property
    def text(self) -> str:
        from nki_dsl.ir.printer import print_kernel  # deferred: `import nki_dsl` does not load the printer

        return print_kernel(self.ir)

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.ir.params]

    @property
    def dims(self) -> dict[str, tuple[int, ...]]:
        """Each declared dimension's inclusive range, by the name the publisher gave it, as ``nki.spec`` takes it:
        ``{"N": (1, 65536)}``, and ``(lo, hi, step)`` for a range of multiples: ``{"M": (128, 65536, 128)}``."""
        return {s.label: (s.lo, s.hi) + ((s.step,) if s.step != 1 else ()) for s in self.ir.symbols.values()
                if s.is_base}  # fmt: skip

    @property
    def param_shapes(self) -> list[tuple]:
        """Each parameter's shape, symbols by name: ``[("N", 512)]``."""
        return [tuple(s[1:] if isinstance(s, str) else s for s in p.type.shape) for p in self.ir.params]

    @property
    def independence(self):
        """``(proved, refused)``: the dimensions the kernel is provably independent along (by name: per parameter and
        output, the axis it sits on) and why each other one is not (``verify/independent.py``); read from the IR, so
        a loader may run a call above a range as instances over slices of the proved ones."""
        if self._independence is None:
            from nki_dsl.verify.independent import independence  # deferred: `import nki_dsl` does not load the verifier

            self._independence = independence(self.ir)
        return self._independence

    def bind(self, *shapes) -> dict[str, int]:
        """The value of every declared dimension from the parameters' shapes (arrays or shape tuples, in parameter
        order); ``NkiShapeFamilyError`` names the dimension that does not fit."""
        if len(shapes) != len(self.ir.params):
            raise NkiShapeFamilyError(f"{self.ir.name}: takes {len(self.ir.params)} arrays, got {len(shapes)}")
        shapes = [tuple(int(n) for n in getattr(s, "shape", s)) for s in shapes]
        base: dict[str, int] = {}
        try:
            for p, shape in zip(self.ir.params, shapes):
                for name, v in bind(self.ir.symbols, p.type.shape, shape, f"parameter %{p.name}").items():
                    if base.setdefault(name, v) != v:
                        raise SymbolError(f"dimension {name[1:]} is {base[name]} in one array and {v} in another")
            values = evaluate(self.ir.symbols, base)
            for p, shape in zip(self.ir.params, shapes):
                check_bound(values, p.type.shape, shape, f"parameter %{p.name}")
        except SymbolError as e:
            raise NkiShapeFamilyError(f"{self.ir.name}: {e} (the family: {self.describe()})") from None
        return {n[1:]: v for n, v in base.items()}

    def describe(self) -> str:
        params = ", ".join(f"{'x'.join(map(str, s))}" for s in self.param_shapes)
        dims = ", ".join(s.describe() for s in self.ir.symbols.values() if s.is_base)
        return f"({params}) with {dims}"

    def instantiate(self, *shapes, target: str | Target = DEFAULT_TARGET):
        """The verified concrete kernel (a ``TracedKernel``) for arrays (or shapes) of these shapes, made and
        verified once per concrete shape and target; the budget applies to the concrete IR."""
        from nki_dsl.passes.verifier import check  # deferred: `import nki_dsl` does not load the verifier

        values = self.bind(*shapes)
        target = get_target(target)
        key = (tuple(sorted(values.items())), target)
        traced = self._instances.get(key)
        if traced is not None:
            self._instances.move_to_end(key)
        else:
            concrete = instantiate(self.ir, {f"${n}": v for n, v in values.items()})
            try:
                check(concrete, target, budget=self.budget)
            except NkiVerificationError as e:
                raise NkiVerificationError([_at(d, values) for d in e.diagnostics]) from None
            traced = self._instances[key] = TracedKernel(concrete)
            if len(self._instances) > MAX_INSTANCES:
                self._instances.popitem(last=False)
        return traced

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<ShapeFamily {self.ir.name} {self.describe()}>"


def _at(diag: Diagnostic, values: dict[str, int]) -> Diagnostic:
    where = ", ".join(f"{n} = {v}" for n, v in values.items())
    return Diagnostic(diag.loc, diag.op, diag.rule, f"at {where}: {diag.message}")
