"""A kernel package on disk (``kernels/<name>/``): its ``kernel.toml`` read once into typed records.

The package is the publisher's own code, so reading it may import it (``bundle`` does, to trace); nothing here
touches the network.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hub_client.errors import BundleError
from hub_client.paths import check_bundle_path

NAME = re.compile(r"^[a-z][-a-z0-9_]*[a-z0-9]\Z")  # the HF kernels name rule, plus '_' for Python packages
VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")


SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")  # a shape family's dimension name (nki_dsl's rule)
MAX_DIM = 1 << 40  # nki_dsl's bound on declared ranges (ir/symbols.py MAX_SYMBOL_VALUE)


def shown(value: object, limit: int = 100) -> str:
    """``repr(value)`` for a message, cut at ``limit`` characters: a hostile manifest's values are not echoed whole."""
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"
    if isinstance(value, int) and value.bit_length() > 3 * limit:  # (past 4,300 digits repr raises ValueError)
        return f"an int of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _cut(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


MAX_RANK = 8  # axes of one argument, after its groups are split (nki_dsl's tensors have fewer)


def parse_shape(text: str) -> tuple[tuple[int | str, ...], tuple[int, ...]]:
    """``"B x S x (3 x H x D)"`` -> ``(("B", "S", 3, "H", "D"), (1, 1, 3))``: the kernel's axes, and how many of them
    each of the caller's axes holds (a parenthesised group is one axis of the caller's array, the product of its
    members, row-major: the kernel sees the array reshaped). ``()`` groups when there are no parentheses."""
    spaced = re.search(r"\sx\s", text)
    parts = re.split(r"\s+x\s+", text.strip()) if spaced else text.split("x")
    shape, groups, open_at = [], [], None
    for p in parts:
        opens, closes = p.startswith("("), p.endswith(")")
        p = p[1 if opens else 0:len(p) - (1 if closes else 0)]
        if (opens and open_at is not None) or (closes and open_at is None and not opens) or "(" in p or ")" in p:
            raise ValueError("unbalanced parentheses")
        if opens:
            open_at = len(shape)
        shape.append(p if SYMBOL.match(p) else int(p))
        if closes:
            groups.append(len(shape) - open_at)
            open_at = None
        elif open_at is None:
            groups.append(1)
    if open_at is not None or len(shape) > MAX_RANK:
        raise ValueError("unbalanced parentheses or too many axes")
    return tuple(shape), tuple(groups) if any(g != 1 for g in groups) else ()


def format_shape(shape: tuple, groups: tuple[int, ...]) -> str:
    sep = " x " if any(isinstance(s, str) for s in shape) or groups else "x"
    if not groups:
        return sep.join(map(str, shape))
    out, k = [], 0
    for g in groups:
        members = " x ".join(map(str, shape[k:k + g]))
        out.append(f"({members})" if g > 1 else members)
        k += g
    return " x ".join(out)


def shape_at(shape: tuple, values: dict[str, int], groups: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``shape`` (ints and dimension names) at the dimensions' ``values``; with ``groups`` (``parse_shape``'s), each
    group's axes merged into one, their product: the shape the caller's array has."""
    sizes = [values[x] if isinstance(x, str) else x for x in shape]
    if not groups:
        return tuple(sizes)
    out, k = [], 0
    for g in groups:
        out.append(math.prod(sizes[k:k + g]))
        k += g
    return tuple(out)


@dataclass(frozen=True)
class ArgSpec:
    shape: tuple[int | str, ...]  # the kernel's axes; a str is a shape family's symbolic dimension ("N")
    dtype: str  # a NumPy dtype name: float32, float16, bfloat16, ...
    # per axis of the caller's array, how many of the kernel's axes it holds ("B x S x (3 x H x D)": (1, 1, 3)); ()
    # when each is one
    groups: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> ArgSpec:
        """``"128x512:float32"``; a scalar-free 1-D shape is ``"512:float32"``; a shape family names its symbolic
        dimensions, ``"N x 512:float32"`` (``"Nx512:float32"`` too, when no name contains an ``x``), and may group
        the kernel's axes the caller's array merges: ``"B x S x (3 x H x D):bfloat16"``."""
        shape_text, sep, dtype = text.partition(":") if isinstance(text, str) else ("", "", "")
        try:
            shape, groups = parse_shape(shape_text)
            dtype = np.dtype(dtype).name if dtype != "bfloat16" else dtype
        except (TypeError, ValueError):
            raise BundleError(f"argument spec {shown(text)}: expected SHAPE:DTYPE such as 128x512:float32, "
                              f"N x 512:float32 or B x (H x D):float32") from None  # fmt: skip
        if not sep or any(isinstance(s, int) and s <= 0 for s in shape):
            raise BundleError(f"argument spec {shown(text)}: expected SHAPE:DTYPE with positive sizes")
        return cls(shape, dtype, groups)

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(s for s in self.shape if isinstance(s, str))

    @property
    def call_axes(self) -> tuple[tuple[int | str, ...], ...]:
        """The kernel's axes each axis of the caller's array holds."""
        out, k = [], 0
        for g in self.groups or (1,) * len(self.shape):
            out.append(self.shape[k:k + g])
            k += g
        return tuple(out)

    def __str__(self) -> str:
        return f"{format_shape(self.shape, self.groups)}:{self.dtype}"


def describe_dim(name: str, lo: int, hi: int, step: int = 1) -> str:
    """``N in 1..65536``; ``M in 128..65536 step 128`` for a range of multiples."""
    return f"{name} in {lo}..{hi}" + (f" step {step}" if step != 1 else "")


def parse_dims(raw: object, args: tuple[ArgSpec, ...], where: str) -> tuple[tuple[str, int, int, int], ...]:
    """A family's ``dims = { N = "1..65536" }`` (or ``[1, 65536]``): every symbolic dimension of ``args`` gets an
    inclusive range, and nothing else does, as ``(name, lo, hi, step)``. A launcher that takes whole tiles only
    declares the multiples of the tile: ``M = "128..65536 step 128"`` (or ``[128, 65536, 128]``), ``lo`` and
    ``hi`` multiples of the step."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BundleError(f"{where}: dims must be a table such as {{ N = \"1..65536\" }}")
    used = {s for a in args for s in a.symbols}
    if set(raw) != used:
        missing, extra = sorted(used - set(raw)), sorted(set(raw) - used)
        raise BundleError(f"{where}: dims must give a range to exactly the symbolic dimensions of args"
                          + (f"; missing {_cut(', '.join(missing))}" if missing else "")
                          + (f"; {_cut(', '.join(map(str, extra)))} not in args" if extra else ""))  # fmt: skip
    out = []
    for name, value in sorted(raw.items()):
        m = (re.fullmatch(r"\s*([0-9]{1,13})\s*\.\.\s*([0-9]{1,13})\s*(?:step\s+([0-9]{1,13})\s*)?", value)
             if isinstance(value, str) else None)  # fmt: skip
        if m:
            lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        elif isinstance(value, list) and len(value) in (2, 3) and all(type(v) is int for v in value):
            lo, hi, step = (*value, 1)[:3]
        else:
            raise BundleError(f"{where}: dims.{name} must be \"LO..HI\", \"LO..HI step S\", [LO, HI] or [LO, HI, S], "
                              f"got {shown(value)}")  # fmt: skip
        if not 1 <= lo <= hi <= MAX_DIM:
            raise BundleError(f"{where}: dims.{name} = {lo}..{hi} must satisfy 1 <= LO <= HI <= {MAX_DIM}")
        if not 1 <= step <= MAX_DIM or lo % step or hi % step:
            raise BundleError(f"{where}: dims.{name} = {lo}..{hi} step {step}: LO and HI must be multiples of the "
                              f"step")  # fmt: skip
        out.append((name, lo, hi, step))
    return tuple(out)


# A runtime scalar's dtype (``scalars = { epsilon = "float32" }``): a keyword the caller may pass any value of,
# handed to the kernel as a one-element array of this dtype after the arrays, so one IR serves every value. A caller
# leaving it out gets the plan's default; a plan whose default is None (vit-attn's ``scale``: None means 1/sqrt(D),
# which other specialisations compute) makes it required, and kernel.toml then gives the value the builder checks
# the kernel and ships test vectors with: ``scalars = { scale = { dtype = "float32", sample = 0.125 } }``.
SCALAR_DTYPES = ("float32", "int32")
MAX_SCALARS = 16  # runtime scalars of one specialisation
INT32_RANGE = (-(1 << 31), (1 << 31) - 1)  # what an int32 runtime scalar holds (the loader checks callers too)
FLOAT32_MAX = 3.4028234663852886e38


def holds(dtype: str, value: object) -> bool:
    """Is ``value`` (parsed JSON or TOML, or a plan's default) a number ``dtype`` holds? The loader and the builder
    pass it to the kernel as a one-element array of that dtype: an int32 past its range, or a float past float32's
    or not finite, would overflow there instead of being refused here."""
    if dtype == "int32":
        return type(value) is int and INT32_RANGE[0] <= value <= INT32_RANGE[1]
    return type(value) in (float, int) and abs(value) <= FLOAT32_MAX  # NaN compares False: refused too


def parse_scalars(raw: object, where: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, float], ...]]:
    """A specialisation's ``scalars = { epsilon = "float32", scale = { dtype = "float32", sample = 0.125 } }``:
    ``(name, dtype)`` per runtime scalar, in order, and ``(name, sample)`` of those given a sample."""
    if raw is None:
        return (), ()

    def entry_ok(v):
        return v in SCALAR_DTYPES or (isinstance(v, dict) and set(v) == {"dtype", "sample"} and v["dtype"] in
                                      SCALAR_DTYPES and holds(v["dtype"], v["sample"]))  # fmt: skip

    if not isinstance(raw, dict) or len(raw) > MAX_SCALARS or not all(
        isinstance(k, str) and SYMBOL.match(k) and entry_ok(v) for k, v in raw.items()
    ):
        raise BundleError(f"{where}: scalars must be a table of at most {MAX_SCALARS} identifiers to a dtype among "
                          f"{', '.join(SCALAR_DTYPES)}, such as {{ epsilon = \"float32\" }}, or to {{ dtype = .., "
                          f"sample = a finite number }} it holds (for an int32, an int within its range); got "
                          f"{shown(raw)}")  # fmt: skip
    scalars = tuple((k, v if isinstance(v, str) else v["dtype"]) for k, v in raw.items())
    return scalars, tuple((k, v["sample"]) for k, v in raw.items() if isinstance(v, dict))


def parse_keywords(raw: object, dims, constants, scalars, where: str) -> tuple[tuple[str, str], ...]:
    """A family's ``keywords = { num_heads = "H" }``: keywords whose value is one of its dimensions (a call's
    ``num_heads=12`` binds ``H``), identifiers naming declared dimensions, neither a constant nor a runtime scalar."""
    if raw is None:
        return ()
    names = {d[0] for d in dims}
    taken = set(dict(constants)) | set(dict(scalars))
    if not isinstance(raw, dict) or not all(isinstance(k, str) and SYMBOL.match(k) and k not in taken
                                            and v in names for k, v in raw.items()):  # fmt: skip
        raise BundleError(f"{where}: keywords must map keywords (not constants or runtime scalars) to the family's "
                          f"dimensions, such as {{ num_heads = \"H\" }}")  # fmt: skip
    return tuple(sorted(raw.items()))


def distinct_names(dims, constants, scalars, where: str) -> None:
    """A dimension, a constant and a runtime scalar never share a name (each a collection of names, or of pairs
    whose first item is one): a call's keyword ``N=5`` would otherwise match a constant ``N`` while the family
    binds ``N`` from the arrays' shapes to another value."""
    def names(c):
        return {n if isinstance(n, str) else n[0] for n in c}

    for a, b, what in ((dims, constants, "dimension and a constant"), (dims, scalars, "dimension and a runtime scalar"),
                       (constants, scalars, "constant and a runtime scalar")):  # fmt: skip
        both = sorted(names(a) & names(b))
        if both:
            raise BundleError(f"{where}: {shown(both[0])} is both a {what}")


def _value_id(v) -> str:
    """A constant's part of an id: ``1e-06``, ``auto``, ``auto-or-flash`` (a constant of several values)."""
    if isinstance(v, tuple):  # (a listed sequence's strings joined by "+": ``auto-or-scalar+vector``)
        return "-or-".join("+".join(x) if isinstance(x, tuple) else _value_id(x) for x in v)
    return repr(v).replace("'", "")


@dataclass(frozen=True)
class Specialisation:
    args: tuple[ArgSpec, ...]
    constants: tuple[tuple[str, object], ...] = ()
    dims: tuple[tuple[str, int, int, int], ...] = ()  # a shape family's (name, lo, hi, step) per symbolic dimension
    scalars: tuple[tuple[str, str], ...] = ()  # runtime scalars: (keyword, dtype), passed after the arrays
    # a family's dimensions a keyword gives (``num_heads = "H"``): the call's value, checked against the arrays
    keywords: tuple[tuple[str, str], ...] = ()
    # how the kernel's outputs reach the caller when args group axes (``"B x S x (H x D)"``: merged), per output
    returns: tuple[str, ...] = ()
    # the value the builder checks a required runtime scalar with (one the plan gives no default), per scalar
    samples: tuple[tuple[str, float], ...] = ()

    @property
    def traced_constants(self) -> dict:
        """The constants the plan is traced with: a constant listing several values (``strategy = ["auto",
        "flash"]``: a call may pass any of them, the builder checks they make one kernel call) is traced at its
        first."""
        return {k: v[0] if isinstance(v, tuple) else v for k, v in self.constants}

    @property
    def id(self) -> str:
        """A file-name-safe id, stable across runs: ``128x512-float32`` (+ ``__epsilon-1e-06``); a family's says its
        ranges: ``Nx512-float32__N-1-65536``."""
        parts = ["_".join(f"{'x'.join(map(str, a.shape))}-{a.dtype}" + (f"-g{''.join(map(str, a.groups))}" if a.groups
                          else "") for a in self.args)]  # fmt: skip
        parts += [f"{n}-{lo}-{hi}" + (f"-step-{step}" if step != 1 else "") for n, lo, hi, step in self.dims]
        parts += [f"{k}-{_value_id(v)}" for k, v in self.constants]
        parts += [f"{k}-{dtype}" for k, dtype in self.scalars]
        parts += [f"{k}-is-{sym}" for k, sym in self.keywords]
        return re.sub(r"[^A-Za-z0-9_.\-]", "_", "__".join(parts))

    def describe(self) -> str:
        consts = ", ".join([f"{k} in {list(v)!r}" if isinstance(v, tuple) else f"{k}={v!r}" for k, v in self.constants]
                           + [f"{k}: {t}" for k, t in self.scalars])  # fmt: skip
        dims = "".join(f", {describe_dim(*d)}" for d in self.dims)
        consts += "".join(f", {k}={sym}" for k, sym in self.keywords)
        return f"({', '.join(map(str, self.args))}{dims}{', ' + consts if consts else ''})"


@dataclass(frozen=True)
class EntryPointSpec:
    name: str
    plan: str  # "module:function" inside the package
    reference: str
    specialisations: tuple[Specialisation, ...]
    # the entry point's own [tolerance] per dtype, over the package's (a fused kernel's outputs are larger)
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelPackage:
    root: Path
    name: str
    version: str
    license: str
    description: str
    python_files: tuple[str, ...]
    entry_points: tuple[EntryPointSpec, ...]
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)
    # [benchmarks]: an optional ``baseline = "module:function"`` the modelled figures are compared with, and the
    # targets they are modelled on (see ``bundle``).
    baseline: str | None = None
    benchmark_targets: tuple[str, ...] = ("trn2",)
    # [neuron]: the kernel written against AWS's current ``nki`` package, shipped as the HF kernels variant
    # ``build/torch-neuron/`` (see ``hf_variant``); paths inside the package, all under ``neuron/``.
    neuron_files: tuple[str, ...] = ()

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def check_version(text: str) -> str:
    if not isinstance(text, str) or not VERSION.match(text):
        raise BundleError(f"version {shown(text)}: expected MAJOR.MINOR.PATCH, e.g. 1.0.0")
    return text


MAX_CONSTANT_VALUES = 16  # values one constant may list


def constants_ok(raw: object) -> bool:
    """Is ``raw`` (parsed TOML or JSON) a table of constants: identifiers to a number, a string of at most 256
    characters or a boolean, or to a list of at most ``MAX_CONSTANT_VALUES`` distinct ones (values a call may take
    any of), each of which may itself be a list of such strings (a sequence the call passes: ``evict = ["auto",
    ["scalar", "vector"]]``)? Never NaN (TOML and JSON both read it): no call's value equals it."""
    def one(v):
        return isinstance(v, bool | int | float | str) and v == v and (not isinstance(v, str) or len(v) <= 256)

    def sequence(v):
        return isinstance(v, list) and 1 <= len(v) <= MAX_CONSTANT_VALUES and all(
            isinstance(x, str) and len(x) <= 256 for x in v)  # fmt: skip

    def many(v):
        return isinstance(v, list) and 1 <= len(v) <= MAX_CONSTANT_VALUES and all(one(x) or sequence(x) for x in v) \
            and len({(type(x), tuple(x) if isinstance(x, list) else x) for x in v}) == len(v)  # fmt: skip

    return isinstance(raw, dict) and all(isinstance(k, str) and SYMBOL.match(k) and (one(v) or many(v))
                                         for k, v in raw.items())  # fmt: skip


def listed(v):
    """A constant's value as a record keeps it: a list as a tuple, and a listed sequence as a tuple too."""
    return tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v


def _constants(raw: object, where: str) -> tuple[tuple[str, object], ...]:
    """``constants = { num_heads = 12, strategy = ["auto", "flash"] }``: a number or string the call must match, or
    a list of distinct ones it may take any of (kept as a tuple), a listed value possibly a list of strings."""
    if not constants_ok(raw):
        raise BundleError(f"{where}: constants must be a table of numbers (not NaN) or strings (at most 256 "
                          f"characters), or of lists of at most {MAX_CONSTANT_VALUES} distinct ones (values a call may "
                          f"take any of; a listed value may be a list of such strings), named by "
                          f"identifiers")  # fmt: skip
    return tuple(sorted((k, listed(v)) for k, v in raw.items()))


def _tolerance(table: dict, where: str) -> dict[str, tuple[float, float]]:
    """``tolerance = { float32 = { rtol = .., atol = .. }, .. }`` of a package or an entry point."""
    try:
        return {k: (float(v["rtol"]), float(v["atol"])) for k, v in table.get("tolerance", {}).items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise BundleError(f"{where}: tolerance must map dtypes to {{ rtol = .., atol = .. }}") from None


def read_package(root: str | Path) -> KernelPackage:
    root = Path(root).resolve()
    toml = root / "kernel.toml"
    if not toml.is_file():
        raise BundleError(f"{root}: not a kernel package (no kernel.toml)")
    try:
        data = tomllib.loads(toml.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BundleError(f"{toml}: {e}") from None
    meta = data.get("kernel", {})
    name = meta.get("name", "")
    if not NAME.match(name):
        raise BundleError(f"{toml}: [kernel] name {name!r} must match {NAME.pattern}")
    files = tuple(check_bundle_path(f) for f in meta.get("python-package", []))
    if "__init__.py" not in files:
        raise BundleError(f"{toml}: python-package must list __init__.py (the package entry)")
    for f in files:
        if not (root / f).is_file():
            raise BundleError(f"{toml}: python-package lists {f!r}, which does not exist")
    entries = []
    for ep_name, ep in sorted(data.get("entry-points", {}).items()):
        where = f"{toml}: [entry-points.{ep_name}]"
        named = re.match(r"^[A-Za-z_][A-Za-z0-9_]*\Z", ep_name)
        if not named or not isinstance(ep, dict) or not {"plan", "reference"} <= set(ep):
            raise BundleError(f"{where}: needs an identifier name, plan = 'module:function' and reference")
        specs = []
        for s in ep.get("specialisations", []):
            if not isinstance(s, dict):
                raise BundleError(f"{where}: each of specialisations must be a table such as {{ args = [...] }}, got "
                                  f"{shown(s)}")  # fmt: skip
            if not isinstance(s.get("args", []), list):
                raise BundleError(f"{where}: a specialisation's args must be a list such as [\"N x 512:float32\"]")
            args = tuple(ArgSpec.parse(a) for a in s.get("args", []))
            constants, (scalars, samples) = _constants(s.get("constants", {}), where), parse_scalars(s.get("scalars"),
                                                                                                   where)
            dims = parse_dims(s.get("dims"), args, where)
            distinct_names(dims, constants, scalars, where)
            keywords, returns = parse_keywords(s.get("keywords"), dims, constants, scalars, where), s.get("returns", [])
            try:
                named = {x for r in returns for x in parse_shape(r)[0] if isinstance(x, str)}
            except (TypeError, ValueError):
                named = None
            if not isinstance(returns, list) or named is None or not named <= {d[0] for d in dims}:
                raise BundleError(f"{where}: returns must be a list of shapes over the family's dimensions such as "
                                  f"\"B x S x (H x D)\"")  # fmt: skip
            if (keywords or returns or any(a.groups for a in args)) and not dims:
                raise BundleError(f"{where}: keywords, returns and grouped args are for shape families (dims)")
            specs.append(Specialisation(args, constants, dims, scalars, keywords, tuple(returns), samples))
        specs = tuple(specs)
        entries.append(EntryPointSpec(ep_name, ep["plan"], ep["reference"], specs, _tolerance(ep, where)))
    if not entries:
        raise BundleError(f"{toml}: declares no [entry-points.*]")
    tolerance = _tolerance(data, str(toml))
    bench = data.get("benchmarks", {})
    baseline, targets = bench.get("baseline"), bench.get("targets", ["trn2"])
    if baseline is not None and (not isinstance(baseline, str) or ":" not in baseline):
        raise BundleError(f"{toml}: [benchmarks] baseline must be 'module:function'")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise BundleError(f"{toml}: [benchmarks] targets must be a non-empty list of target names")
    return KernelPackage(
        root, name, check_version(meta.get("version", "")), meta.get("license", "unknown"),
        meta.get("description", ""), files, tuple(entries), tolerance, baseline, tuple(targets),
        _neuron_files(root, toml, data.get("neuron")),
    )  # fmt: skip


def _neuron_files(root: Path, toml: Path, section: object) -> tuple[str, ...]:
    if section is None:
        return ()
    files = section.get("files") if isinstance(section, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise BundleError(f'{toml}: [neuron] files must be a list of paths such as "neuron/__init__.py"')
    files = tuple(check_bundle_path(f) for f in files)
    if "neuron/__init__.py" not in files:
        raise BundleError(f"{toml}: [neuron] files must list neuron/__init__.py (what HF kernels imports)")
    for f in files:
        if not f.startswith("neuron/") or not (root / f).is_file():
            raise BundleError(f"{toml}: [neuron] lists {f!r}, which is not an existing file under neuron/")
    return files
