"""A loaded kernel's entry point: ``softmax.softmax(x, backend="numpy", target="trn2")``.

Without ``backend=`` (here or at ``get_kernel``) a call runs where nki_dsl's own calls would
(``nki.default_backend``: ``nki.use_backend``, ``NKI_BACKEND``, JAX arrays in, else NumPy).

A call is matched against the published specialisations by the shapes and dtypes of its arrays (positional, in
order) and its constants (keywords; a constant listing values, ``strategy in ["auto", "flash"]``, matches any of
them; a keyword at the plan's default, the manifest's ``defaults``, is matched as one left out, and a constant the
plan cannot do without, ``requires``, must be given: ``keywords.py``); a specialisation's runtime scalars
(``epsilon``: any value, the manifest's default when left out; one with a null default is required, and a call
without it matches another specialisation) are passed to its IR after the arrays, as one-element arrays. The match's
IR is parsed and verified on first use and compiled once per (backend, target). A shape family (``N x 512:float32``
with ``N in 1..65536``) matches any call whose arrays fit it: the family's IR is parsed once, and instantiated and
verified once per concrete shape (``_instance``), with no trust needed. A family may view the caller's arrays (``B x
S x (3 x H x D)``: a reshape, with ``keywords`` giving dimensions and ``returns`` merging the outputs back,
``families.py``). A call above a family's range along dimensions its kernel is proved independent along (from the
IR, ``ShapeFamily.independence``) runs as instances over slices (``chunks.py``). ``route`` says which of these a
call takes without running it; of several holding a call it takes the one of the fewest launches, then the most
specific (``EntryPoint.route``), so the manifest's order decides only ties. With trust, a call that matches none
traces the published Python instead; without trust it is refused with the list of what exists and why each family
near the call does not hold it.
"""

from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import nki_dsl as nki
from hub_client import chunks, execute, families, keywords
from hub_client.errors import IRRejectedError, NoSpecialisationError, ScalarArgumentError
from hub_client.manifest import SpecRecord
from hub_client.package import FLOAT32_MAX, INT32_RANGE, describe_dim, shown


def _dtype_name(a) -> str:
    return np.dtype(a.dtype).name


def _matches(spec: SpecRecord, args: tuple, kwargs: dict) -> bool:
    if len(args) != len(spec.args):
        return False
    for a, s in zip(args, spec.args):
        if not hasattr(a, "shape") or tuple(a.shape) != s.shape or _dtype_name(a) != s.dtype:
            return False
    return _constants_match(spec, kwargs)


def _constants_match(spec: SpecRecord, kwargs: dict) -> bool:
    """Every keyword is a constant of the specialisation with its value (one of its values, for a constant that lists
    several), one of its runtime scalars or a keyword giving a dimension; and every required runtime scalar (no
    default) and required constant (``requires``: the plan refuses the call without it) is given."""
    def constant(k, v):
        want = spec.constants[k]
        return any(_same(v, w) for w in want) if isinstance(want, tuple | list) else _same(v, want)

    return all(k in spec.scalars or k in spec.keywords or (k in spec.constants and constant(k, v))
               for k, v in kwargs.items()) and all(  # fmt: skip
        n in kwargs for n, (_, default) in spec.scalars.items() if default is None
    ) and all(n in kwargs for n in spec.requires)


def _same(v, want) -> bool:
    if isinstance(want, tuple):  # a listed sequence (evict's engines): a call's tuple or list of the same strings
        return isinstance(v, tuple | list) and len(v) == len(want) and all(
            isinstance(x, str) and x == w for x, w in zip(v, want))  # fmt: skip
    try:
        return bool(v == want)
    except (TypeError, ValueError):  # an array's == is elementwise: not a constant's value
        return False


def _runtime_scalars(spec: SpecRecord, kwargs: dict, label: str) -> dict:
    """The specialisation's runtime scalars as its IR takes them (after the arrays, by name: the manifest's JSON keeps
    them in sorted order, which need not be the kernel's): one-element arrays holding the caller's values, or the
    published defaults. A value the dtype cannot hold (past int32, or not a finite float32) is refused, as the
    manifest's defaults are."""
    out = {}
    for name, (dtype, default) in spec.scalars.items():
        v = kwargs.get(name, default)
        ok = isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)
        if ok and dtype == "int32":
            ok = isinstance(v, numbers.Integral) and INT32_RANGE[0] <= int(v) <= INT32_RANGE[1]
        elif ok:  # (an int past float64's range is compared exactly: float() of it would raise OverflowError)
            ok = bool(abs(int(v)) <= FLOAT32_MAX) if isinstance(v, numbers.Integral) else bool(abs(float(v)) <=
                                                                                                FLOAT32_MAX)
        if not ok:
            kind = "real number float32 holds (finite, at most 3.4e38 in size)" if dtype == "float32" else "int32"
            hint = "; pass a Python number (float(value))" if getattr(v, "shape", None) == () else ""
            raise ScalarArgumentError(f"{label}: {name} must be a {kind} (passed to the kernel as {dtype}), got "
                                      f"{shown(v)}{hint}")  # fmt: skip
        out[name] = np.full((1,), v, dtype=dtype)
    return out


def _bound(kernel, args: tuple, scalars: dict, label: str) -> dict:
    """The IR's parameters bound: the arrays in order, then the runtime scalars by name. The IR is the authority: a
    manifest record whose args or scalars are not its parameters' (another shape, dtype or name, one too few) is
    refused here, naming the parameter (``execute.mismatch``)."""
    names = execute.param_names(kernel)
    bound = dict(zip(names, args)) | scalars
    if len(names) != len(args) + len(scalars) or set(names[len(args):]) != set(scalars):
        given = "".join(f", {n}" for n in scalars)
        why = f"the IR's parameters are {', '.join(names)}; given {len(args)} arrays{given}"
    else:
        why = execute.mismatch(kernel, bound)
    if why:
        raise IRRejectedError(f"{label}: {why}: the manifest's record does not describe its IR")
    return bound


def _shown_arg(a) -> str:
    return " x ".join(map(str, a.shape)) + f":{a.dtype}"


def _choice(launches: float, spec: SpecRecord, index: int) -> tuple:
    """How ``route`` ranks the specialisations holding a call (the least first): by the launches it takes (1, or
    the number of parts), then by how specific the specialisation is (its symbolic dimensions), then by the
    manifest's order."""
    return (launches, len(spec.dims), index)


def _parts(spec: SpecRecord, over: dict[str, int], proved: dict) -> float:
    """The instances a call runs as when the dimensions ``over`` are cut into parts of ``spec``'s ranges (each
    starting at a multiple of the proof's block, ``proved[name].block``; 1 when not known yet, which can only need
    fewer): ``inf`` when some cannot be cut (``chunks.run`` then says why)."""
    cut = {name: (n, *spec.dims[name]) for name, n in over.items()}
    blocks = {name: proved[name].block for name in over if name in proved}
    if chunks.too_many(cut, blocks) is not None:  # counted, not listed: a hostile size would list millions
        return math.prod(max(chunks.count(*cut[n], blocks.get(n, 1)), 1) for n in over)
    count = 1
    for name, (n, lo, hi, step) in cut.items():
        try:
            count *= len(chunks.sizes(n, lo, hi, step, blocks.get(name, 1)))
        except ValueError:
            return math.inf
    return count


MAX_INSTANCES = 32  # a family's concrete kernels (and their executables) kept per entry point
MAX_LISTED = 40  # specialisations (and near misses) a refusal lists: a manifest may hold thousands


def _more(n: int) -> str:
    return f"\n  ... and {n - MAX_LISTED} more" if n > MAX_LISTED else ""


@dataclass
class _Compiled:
    kernel: object  # nki.TracedKernel: parsed and verified IR
    executables: dict


class EntryPoint:
    def __init__(self, name: str, repo_label: str, snapshot: Path, specs: tuple[SpecRecord, ...], plan=None,
                 default_backend: str | None = None, parameters: tuple[str, ...] = (),
                 defaults: dict | None = None):  # fmt: skip
        self.name = name
        self._label = repo_label
        self._snapshot = snapshot
        self.specialisations = specs
        self._plan = plan  # the published Python's plan function, only when the caller trusts the repo
        self._default_backend = default_backend  # get_kernel(backend=...); None: nki_dsl's default at each call
        self._parameters = parameters  # the plan's positional parameter names (manifest), () if not recorded
        self._defaults = defaults or {}  # the plan's keyword defaults (manifest): a keyword given at one is left out
        self._parsed: dict[tuple, _Compiled] = {}  # (spec id, target) or, for a family, (spec id, shape, target)
        self._families: dict[str, object] = {}  # spec id -> its parsed nki.ShapeFamily
        self._traced: dict[int, _Compiled] = {}  # nki.jit caches traced IR per shape, so its id is a stable key
        self.__doc__ = f"{name} from {repo_label}; specialisations: " + "; ".join(s.id for s in specs)

    def __repr__(self) -> str:
        return f"<kernel entry point {self._label}:{self.name} ({len(self.specialisations)} specialisations)>"

    def _ir(self, spec: SpecRecord, target: nki.Target) -> _Compiled:
        key = (spec.id, target)
        if key not in self._parsed:
            text = self._text(spec)
            try:
                ir = execute.parse_verified(text, target)
            except Exception as e:  # nki_dsl's parse/verification errors carry the verifier's message
                raise IRRejectedError(f"{self._label}: {spec.ir} was refused: {e}") from None
            self._parsed[key] = _Compiled(ir, {})
        return self._parsed[key]

    def _family(self, spec: SpecRecord):
        """The family's parsed IR (its form checked), parsed once."""
        family = self._families.get(spec.id)
        if family is None:
            family = self._families[spec.id] = execute.parse_family(self._text(spec))
        return family

    def _text(self, spec: SpecRecord) -> str:
        """The IR file's text: UTF-8 whatever the locale, and a file that is not is refused like any bad IR."""
        try:
            return (self._snapshot / spec.ir).read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise IRRejectedError(f"{self._label}: {spec.ir} was refused: not UTF-8 text ({e.reason} at byte "
                                  f"{e.start})") from None  # fmt: skip

    def _instance(self, spec: SpecRecord, values: dict, args: tuple, target: nki.Target) -> _Compiled:
        """A family's concrete kernel for this call's shape: bound, range-checked, instantiated and verified (within
        the untrusted-IR budget) once per concrete shape and target."""
        key = (spec.id, tuple(sorted(values.items())), target)
        if key not in self._parsed:
            try:
                ir = self._family(spec).instantiate(*args, target=target)
            except nki.NkiError as e:  # parse, form, binding and verification errors of nki_dsl
                where = ", ".join(f"{n} = {v}" for n, v in values.items())
                raise IRRejectedError(f"{self._label}: {spec.ir} at {where} was refused: {e}") from None
            self._parsed[key] = _Compiled(ir, {})
            family_keys = [k for k in self._parsed if len(k) == 3 and k[0] == spec.id]
            for old in family_keys[:-MAX_INSTANCES]:  # dicts keep insertion order: the oldest shapes go first
                del self._parsed[old]
        return self._parsed[key]

    def _run(self, compiled: _Compiled, arrays: dict, backend: str | None, target: nki.Target):
        # resolved here, after the IR was parsed and verified: a refused bundle is refused on every backend
        backend = execute.default_backend(arrays.values()) if backend is None else backend
        exe = compiled.executables.get((backend, target))
        if exe is None:
            exe = compiled.executables[(backend, target)] = execute.compile_ir(compiled.kernel, backend, target)
        return exe.run(arrays)

    def _missing(self, args, kwargs, near: list[str] = ()) -> NoSpecialisationError:
        got = ", ".join(
            f"{'x'.join(map(str, a.shape))}:{_dtype_name(a)}" if hasattr(a, "shape") else shown(a) for a in args
        )
        got += "".join(f", {keywords.cut_name(k)}={shown(v, keywords.SHOWN)}" for k, v in kwargs.items())
        have = "\n".join(
            f"  {self.name}({', '.join(map(str, s.args))}"
            + "".join(f", {k} in {list(v)!r}" if isinstance(v, tuple | list) else f", {k}={v!r}"
                      for k, v in s.constants.items())
            + "".join(f", {k}: {t} (any value, " + ("required)" if d is None else f"default {d!r})")
                      for k, (t, d) in s.scalars.items())
            + "".join(f", {k}={n}" for k, n in s.keywords.items()) + ")"
            + "".join(f" with {describe_dim(n, *d)}" for n, d in s.dims.items())
            for s in self.specialisations[:MAX_LISTED]
        )  # fmt: skip
        have += _more(len(self.specialisations))
        why = "".join(f"\n{n}" for n in near[:MAX_LISTED]) + _more(len(near))
        return NoSpecialisationError(
            f"{self._label}: no published specialisation of {self.name} for ({got}).{why}\nPublished:\n{have}\n"
            f"Without trust only these verified IR specialisations run. To run any shape with the kernel's published "
            f"Python, opt in: get_kernel(..., trust_remote_code=True) or trust_remote_code=[repo_id]."
        )

    def _by_name(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The call's arrays (its leading positional values with a shape) and everything else by name: values
        passed by position after the arrays (``rmsnorm(x, g, 1e-5)``) take the plan's parameter names at their
        positions, as Python binds them, so they match a specialisation's constants and runtime scalars."""
        n = next((i for i, a in enumerate(args) if not hasattr(a, "shape")), len(args))
        if n == len(args) or not self._parameters:
            return args, keywords.given(kwargs, self._defaults)
        if len(args) > len(self._parameters):
            raise TypeError(f"{self._label}:{self.name} takes at most {len(self._parameters)} positional arguments "
                            f"({', '.join(self._parameters)}), got {len(args)}")  # fmt: skip
        named = dict(zip(self._parameters[n:], args[n:]))
        twice = sorted(set(named) & set(kwargs))
        if twice:
            raise TypeError(f"{self._label}:{self.name} got multiple values for argument {twice[0]!r}")
        return args[:n], keywords.given(named | kwargs, self._defaults)

    def __call__(self, *args, backend: str | None = None, target: str | nki.Target = "trn2", **kwargs):
        backend = backend or self._default_backend
        args, kwargs = self._by_name(args, kwargs)
        target = nki.get_target(target)  # resolved once: every cache below is keyed by the Target
        how, spec, detail = self.route(*args, **kwargs)
        label = f"{self._label}:{self.name}"
        if how == "python":
            return self._run_python(args, kwargs, backend, target)
        scalars = _runtime_scalars(spec, kwargs, label)
        if how == "ir":
            compiled = self._ir(spec, target)
            return self._run(compiled, _bound(compiled.kernel, args, scalars, f"{label} ({spec.ir})"), backend, target)

        def one(arrays, values):
            compiled = self._instance(spec, values, arrays + tuple(scalars.values()), target)  # (scalars: all [1])
            bound = _bound(compiled.kernel, arrays, scalars, f"{label} ({spec.ir})")
            return self._run(compiled, bound, backend, target)

        values, over, proved = detail
        arrays = families.to_kernel(spec, args, values)
        if how == "family":
            return families.to_caller(spec, one(arrays, values), values, label)

        def part(arrays):
            values, why = families.bind_kernel(spec, arrays)
            if values is None:  # chunks.sizes keeps every part in range: a bug, not a caller's error
                raise AssertionError(f"{label}: a part of the call does not fit {spec.id}: {why}")
            return one(arrays, values)

        out = chunks.run(part, arrays, {n: (v, *spec.dims[n]) for n, v in over.items()}, proved, label)
        return families.to_caller(spec, out, values, label)

    def route(self, *args, **kwargs) -> tuple[str, SpecRecord | None, object]:
        """How a call runs, without running it: ``("ir", spec, None)`` (a published shape), ``("family", spec,
        (values, {}, {}))`` (an instance of a family), ``("parts", spec, (values, over, proved))`` (instances over
        slices of the dimensions ``over`` above the family's ranges, which the kernel is proved independent along),
        ``("python", None, None)`` (the trusted package's Python); with none of them, ``NoSpecialisationError``
        listing what exists and why each family near the call does not hold it.

        Of several specialisations holding a call, the one chosen does not depend on the manifest's order but for
        ties (``_choice``): one launch before several (a concrete shape or a family instance before instances over
        slices), then the fewest launches, then the most specific (the fewest symbolic dimensions: a concrete
        shape, then a family over the batch of one model's shape, whose schedule was chosen for that shape, before
        one over every dimension), and only then the publisher's order."""
        args, kwargs = self._by_name(args, kwargs)
        near, held = [], []
        for i, spec in enumerate(self.specialisations):
            if spec.is_family:
                values, why = families.bind(spec, args, kwargs) if _constants_match(spec, kwargs) else (None, None)
                if values is not None:
                    held.append((_choice(1, spec, i), spec, values))
                near += [f"  {spec.id}: {why}"] if why else []
            elif _matches(spec, args, kwargs):
                return "ir", spec, None  # (nothing ranks before a concrete shape: one launch, no symbol)
        if held:
            _, spec, values = min(held, key=lambda h: h[0])
            return "family", spec, (values, {}, {})
        parts = self._in_parts(args, kwargs, near)
        if parts is not None:
            return parts
        if self._plan is None:
            near[:0] = keywords.unpublished(self.specialisations, kwargs, self._parameters, self._defaults, _same)
            near[:0] = keywords.not_given(self.specialisations, kwargs, lambda s: self._holds(s, args, kwargs))
            raise self._missing(args, kwargs, near)
        return "python", None, None

    @staticmethod
    def _holds(spec: SpecRecord, args: tuple, kwargs: dict) -> bool:
        """Whether ``spec`` holds the call as one launch (a concrete shape, or a family's instance)."""
        if not spec.is_family:
            return _matches(spec, args, kwargs)
        return _constants_match(spec, kwargs) and families.bind(spec, args, kwargs)[0] is not None

    def _in_parts(self, args: tuple, kwargs: dict, near: list[str]):
        """``route``'s ``("parts", ...)`` when a family holds the call but for dimensions above its range that its
        kernel is provably independent along (``ShapeFamily.independence``, from the IR): the call runs as instances
        over slices (``chunks.py``), of the family needing the fewest (``_choice``). None otherwise, with why each
        such family could not in ``near``. A family's IR is parsed and its independence proved only while it could
        still need fewer parts than the best found (its count without the proof's blocks is a lower bound)."""
        candidates = []
        for i, spec in enumerate(self.specialisations):
            over = families.above(spec, args, kwargs) if spec.is_family and _constants_match(spec, kwargs) else None
            if over is not None:
                candidates.append((_choice(_parts(spec, over, {}), spec, i), i, spec, over))
        best = None
        for bound, i, spec, over in sorted(candidates, key=lambda c: c[0]):
            if best is not None and best[0] <= bound:
                break
            if bound[0] > chunks.MAX_PARTS:  # refused before the IR is parsed or a part exists
                near.append(self._too_many(spec, over, {}))
                continue
            try:
                proved, refused = self._family(spec).independence
            except nki.NkiError as e:
                raise IRRejectedError(f"{self._label}: {spec.ir} was refused: {e}") from None
            blocked = next((n for n in over if n not in proved), None)
            if blocked is not None:
                lo, hi, _ = spec.dims[blocked]
                why = refused.get(blocked, "not a dimension of its IR")
                near.append(f"  {spec.id}: {blocked} = {over[blocked]} is above {lo}..{hi} and cannot run in parts: "
                            f"the kernel is not independent along {blocked} ({why}); call with {blocked} <= "
                            f"{hi}")  # fmt: skip
                continue
            choice = _choice(_parts(spec, over, proved), spec, i)
            if choice[0] > chunks.MAX_PARTS:  # the proof's blocks (smaller parts) pushed it over
                near.append(self._too_many(spec, over, proved))
                continue
            if best is None or choice < best[0]:
                best = (choice, ("parts", spec, (families.values_of(spec, args, kwargs)[0], over, proved)))
        return None if best is None else best[1]

    def _too_many(self, spec: SpecRecord, over: dict[str, int], proved: dict) -> str:
        """A ``near`` line for a family that would run the call as more than ``chunks.MAX_PARTS`` instances, naming
        the arguments each dimension cut is an axis of (the caller's arrays may be broadcast views of any size)."""
        cut = {name: (n, *spec.dims[name]) for name, n in over.items()}
        why = chunks.too_many(cut, {n: proved[n].block for n in over if n in proved})
        where = "; ".join(f"{name} is axis {a.shape.index(name)} of argument {i}{self._param(i)} ({_shown_arg(a)})"
                          for name in over for i, a in enumerate(spec.args) if name in a.shape)  # fmt: skip
        return f"  {spec.id}: {why}; {where}: call with fewer"

    def _param(self, i: int) -> str:
        return f" {self._parameters[i]}" if i < len(self._parameters) else ""

    def _run_python(self, args, kwargs, backend, target):
        launch, kargs, kkw = self._plan(*args, **kwargs)
        traced = nki.trace(launch, *kargs, target=target, **kkw)
        fn = getattr(getattr(launch, "jit", launch), "fn", None)
        bound = inspect.signature(fn).bind(*kargs, **kkw) if fn else None
        named = bound.arguments if bound else dict(zip(execute.param_names(traced), kargs))
        arrays = {n: v for n, v in named.items() if hasattr(v, "shape") and hasattr(v, "dtype")}
        compiled = self._traced.setdefault(id(traced.ir), _Compiled(traced, {}))
        return self._run(compiled, arrays, backend, target)
