"""The bundle manifest (``manifest.json``): what a published kernel contains and the sha256 of every other file.

It is the root of trust of a download: it is parsed strictly, every path in it is checked before it is joined onto
a directory, and every file it names must be listed with a digest. Serialisation is canonical (sorted keys, fixed
separators) so the same bundle always has the same manifest bytes, and the manifest's own sha256 is the bundle's
digest (what lock files pin).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field

from hub_client.errors import BundleError
from hub_client.package import (
    MAX_CONSTANT_VALUES,
    MAX_SCALARS,
    SCALAR_DTYPES,
    ArgSpec,
    check_version,
    constants_ok,
    distinct_names,
    holds,
    listed,
    parse_dims,
    parse_shape,
    shown,
)
from hub_client.paths import check_bundle_path

FORMAT = "nki-kernel-bundle/1"
MANIFEST = "manifest.json"
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dump(manifest: dict) -> bytes:
    return (json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()


@dataclass(frozen=True)
class SpecRecord:
    id: str
    args: tuple[ArgSpec, ...]
    constants: dict
    ir: str
    test_vectors: str | None
    dims: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # a family's (lo, hi, step); {} for one shape
    # runtime scalars, passed after the arrays: keyword -> (dtype, default value; None: the call must give it). In
    # the manifest's (sorted) key order, not necessarily the kernel's: the loader and the vector check bind them to
    # the IR's parameters by name
    scalars: dict[str, tuple[str, float | int | None]] = field(default_factory=dict)
    # a family's keywords that give a dimension (``{"num_heads": "H"}``), and per output how its axes reach the caller
    # (``(("B", "S", "H", "D"), (1, 1, 2))``: the last two merged) when ``args`` group axes; both empty otherwise
    keywords: dict[str, str] = field(default_factory=dict)
    returns: tuple[tuple[tuple, tuple[int, ...]], ...] = ()
    # constants a call must give (``num_heads``): the plan refuses the specialisation's arguments without them, so a
    # call leaving one out (or passing its default) is not held, as the launcher would refuse it
    requires: tuple[str, ...] = ()

    @property
    def is_family(self) -> bool:
        return bool(self.dims)


@dataclass(frozen=True)
class EntryRecord:
    name: str
    plan: str
    specialisations: tuple[SpecRecord, ...]
    # the plan's parameters a caller may pass by position, in order (``x, g, epsilon``): a call's values past its
    # arrays bind to these names, as Python would bind them. () in a manifest made before: keywords only.
    parameters: tuple[str, ...] = ()
    # the plan's keyword defaults that JSON holds (``{"scale": null, "strategy": "auto"}``): a call passing one
    # explicitly routes as one leaving it out. {} in a manifest made before: a default given is matched as any value.
    defaults: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    raw: dict
    digest: str  # sha256 of the manifest bytes
    name: str
    version: str
    python_package: str  # directory holding the package's __init__.py
    python_files: tuple[str, ...]
    entry_points: dict[str, EntryRecord]
    files: dict[str, str]  # path -> sha256 hex

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def ir_files(self) -> list[str]:
        return [s.ir for e in self.entry_points.values() for s in e.specialisations]


def _need(obj: dict, key: str, kind, where: str):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        raise BundleError(f"manifest: {where}{key} must be a {getattr(kind, '__name__', kind)}")
    return value


def _listed(path: object, files: dict, where: str) -> str:
    path = check_bundle_path(path)
    if path not in files:
        raise BundleError(f"manifest: {where} names {shown(path)}, which has no digest in 'files'")
    return path


def _scalars(raw: object, where: str) -> dict[str, tuple[str, float | int | None]]:
    """A record's ``"scalars": {"epsilon": {"dtype": "float32", "default": 1e-06}}``; ``"default": null``: a
    required scalar (a call that leaves it out does not match the specialisation)."""
    if not isinstance(raw, dict) or len(raw) > MAX_SCALARS:
        raise BundleError(f"manifest: {where}scalars must be an object of at most {MAX_SCALARS} scalars")
    out = {}
    for name, s in raw.items():
        ok = isinstance(s, dict) and set(s) == {"dtype", "default"} and s["dtype"] in SCALAR_DTYPES
        ok = ok and re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z", name) is not None
        default = s.get("default") if ok else None
        if not ok or (default is not None and not holds(s["dtype"], default)):
            label = name if len(name) <= 64 else name[:64] + "..."  # a hostile name is not echoed whole
            raise BundleError(f"manifest: {where}scalars.{label} must be {{\"dtype\": one of "
                              f"{', '.join(SCALAR_DTYPES)}, \"default\": a finite number it holds, or null (the "
                              f"call must give it)}}")  # fmt: skip
        out[name] = (s["dtype"], default)
    return out


def _constants(raw: object, where: str) -> dict:
    """A record's ``"constants": {"num_heads": 12, "strategy": ["auto", "flash"]}``: what kernel.toml's are
    (``package.constants_ok``); a list kept as a tuple, and a listed sequence of strings (evict's engines) too."""
    if not constants_ok(raw):
        raise BundleError(f"manifest: {where}constants must map names to a number, a string of at most 256 "
                          f"characters or a boolean, or to a list of at most {MAX_CONSTANT_VALUES} distinct ones or "
                          f"lists of such strings (names: identifiers of at most 64 characters; never "
                          f"NaN)")  # fmt: skip
    return {k: listed(v) for k, v in raw.items()}


# A specialisation's id: what ``Specialisation.id`` makes (the library's longest is 152 characters). It names the
# specialisation in every refusal and cache key, so it is bounded.
_SPEC_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,255}\Z")


MAX_PARAMETERS = 64
MAX_VIEWS = 16  # keywords giving dimensions, and outputs with a view, per specialisation


def _keywords(raw: object, dims: dict, taken: set, where: str) -> dict[str, str]:
    """A family's ``"keywords": {"num_heads": "H"}``: at most ``MAX_VIEWS`` identifiers, each naming one of its
    dimensions and neither a constant nor a runtime scalar."""
    ok = isinstance(raw, dict) and len(raw) <= MAX_VIEWS
    ok = ok and all(isinstance(k, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z", k) and k not in taken
                    and isinstance(v, str) and v in dims for k, v in raw.items())  # fmt: skip
    if not ok:
        raise BundleError(f"manifest: {where}keywords must map at most {MAX_VIEWS} keywords (not constants or "
                          f"scalars) to the family's dimensions")  # fmt: skip
    return dict(raw)


def _returns(raw: object, dims: dict, where: str) -> tuple[tuple[tuple, tuple[int, ...]], ...]:
    """A family's ``"returns": ["B x S x (H x D)"]``: per output, its axes (ints and the family's dimensions) and
    their groups; at most ``MAX_VIEWS`` of at most 256 characters each."""
    bad = BundleError(f"manifest: {where}returns must be a list of at most {MAX_VIEWS} shapes over the family's "
                      f"dimensions, such as \"B x S x (H x D)\"")  # fmt: skip
    if not isinstance(raw, list) or len(raw) > MAX_VIEWS or not all(isinstance(r, str) and len(r) <= 256 for r in raw):
        raise bad
    out = []
    for r in raw:
        try:
            shape, groups = parse_shape(r)
        except (TypeError, ValueError):
            raise bad from None
        if any((isinstance(x, str) and x not in dims) or (isinstance(x, int) and x <= 0) for x in shape):
            raise bad
        out.append((shape, groups))
    return tuple(out)


def _parameters(raw: object, where: str) -> tuple[str, ...]:
    """An entry point's ``"parameters": ["x", "g", "epsilon"]``: distinct identifiers, at most ``MAX_PARAMETERS``."""
    ok = isinstance(raw, list) and len(raw) <= MAX_PARAMETERS and len(set(map(str, raw))) == len(raw)
    if not ok or not all(isinstance(n, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z", n) for n in raw):
        raise BundleError(f"manifest: {where}parameters must be a list of at most {MAX_PARAMETERS} distinct "
                          f"identifiers (the plan's positional parameters)")  # fmt: skip
    return tuple(raw)


MAX_DEFAULT_CHARS = 256  # a string default's length


def is_recordable_default(v) -> bool:
    """A keyword default the manifest's ``defaults`` holds as it is: null, a boolean, a finite number or a string of
    at most ``MAX_DEFAULT_CHARS`` (the builder records only these, the parser accepts only these)."""
    if isinstance(v, str):
        return len(v) <= MAX_DEFAULT_CHARS
    return v is None or isinstance(v, bool | int) or (isinstance(v, float) and math.isfinite(v))


def _defaults(raw: object, where: str) -> dict:
    """An entry point's ``"defaults": {"scale": null, "strategy": "auto", "epsilon": 1e-06}``: at most
    ``MAX_PARAMETERS`` identifiers, each to a value ``is_recordable_default`` takes."""
    ok = isinstance(raw, dict) and len(raw) <= MAX_PARAMETERS
    if not ok or not all(isinstance(k, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z", k)
                         and is_recordable_default(v) for k, v in raw.items()):  # fmt: skip
        raise BundleError(f"manifest: {where}defaults must map at most {MAX_PARAMETERS} identifiers (the plan's "
                          f"keywords) to null, a boolean, a finite number or a string of at most "
                          f"{MAX_DEFAULT_CHARS} characters")  # fmt: skip
    return dict(raw)


# The largest manifest.json read: a manifest lists its files' digests and specialisations, ~100 bytes each (the
# whole kernel library's biggest, vit-attn's, is well under 1 MiB), so 16 MiB is generous and still bounds what a
# hostile server's file costs in memory before JSON parsing starts.
MAX_MANIFEST_BYTES = 16 << 20


def parse(data: bytes) -> Manifest:
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"manifest: {len(data):,} bytes, more than the {MAX_MANIFEST_BYTES:,} a manifest may have")
    try:
        raw = json.loads(data.decode("utf-8"))
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, and an integer past 4,300 digits (plain ValueError)
        raise BundleError(f"manifest: not valid JSON ({str(e)[:200]})") from None
    except RecursionError:  # json's decoder recurses per nesting level: [[[[...]]]] a few thousand deep
        raise BundleError("manifest: not valid JSON (nested deeper than the JSON reader goes)") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise BundleError(
            f"manifest: format must be {FORMAT!r}, got {shown(raw.get('format') if isinstance(raw, dict) else raw)}"
        )
    files = _need(raw, "files", dict, "")
    for path, digest in files.items():
        check_bundle_path(path)
        if path == MANIFEST or not isinstance(digest, str) or not _HEX64.match(digest):
            raise BundleError(f"manifest: files[{shown(path)}] must be a sha256 hex digest of a file other than itself")
    python = _need(raw, "python", dict, "")
    package_dir = check_bundle_path(_need(python, "package", str, "python."))
    py_files = tuple(_listed(p, files, "python.files") for p in _need(python, "files", list, "python."))
    if f"{package_dir}/__init__.py" not in py_files:
        raise BundleError(f"manifest: python.files must include {package_dir}/__init__.py")
    entries = {}
    for name, ep in _need(raw, "entry_points", dict, "").items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*\Z", name) or name.startswith("_"):
            raise BundleError(f"manifest: entry point name {shown(name)} is not a public identifier")
        specs = []
        for s in _need(ep, "specialisations", list, f"entry_points.{name}."):
            where = f"entry_points.{name}.specialisations[]."
            args = tuple(ArgSpec.parse(a) for a in _need(s, "args", list, where) if isinstance(a, str))
            tv = s.get("test_vectors")
            dims = {n: tuple(rest) for n, *rest in parse_dims(s.get("dims"), args, f"manifest: {where}dims")}
            spec_id, constants = _need(s, "id", str, where), _constants(_need(s, "constants", dict, where), where)
            if not _SPEC_ID.match(spec_id):
                raise BundleError(f"manifest: {where}id {shown(spec_id)} must be 1 to 255 of [A-Za-z0-9_.-] (what "
                                  f"publishing makes of a specialisation)")  # fmt: skip
            scalars = _scalars(s.get("scalars", {}), where)
            distinct_names(dims, constants, scalars, f"manifest: {where}(id {spec_id})")
            keywords = _keywords(s.get("keywords", {}), dims, set(constants) | set(scalars), where)
            returns = _returns(s.get("returns", []), dims, where)
            if (keywords or returns or any(a.groups for a in args)) and not dims:
                raise BundleError(f"manifest: {where}keywords, returns and grouped args are for shape families")
            requires = s.get("requires", [])
            # (each at most once: with the membership test that bounds the list by the constants, which a call's
            # refusal walks, not by the manifest's size)
            if not isinstance(requires, list) or not all(isinstance(n, str) and n in constants for n in requires) \
                    or len(set(requires)) != len(requires):
                raise BundleError(f"manifest: {where}requires must list constants of the specialisation, each once")
            specs.append(SpecRecord(
                spec_id, args, constants, _listed(_need(s, "ir", str, where), files, where + "ir"),
                None if tv is None else _listed(tv, files, where + "test_vectors"), dims, scalars, keywords, returns,
                tuple(requires),
            ))  # fmt: skip
        entries[name] = EntryRecord(name, _need(ep, "plan", str, f"entry_points.{name}."), tuple(specs),
                                    _parameters(ep.get("parameters", []), f"entry_points.{name}."),
                                    _defaults(ep.get("defaults", {}), f"entry_points.{name}."))  # fmt: skip
    return Manifest(
        raw, sha256_hex(data), _need(raw, "name", str, ""), check_version(_need(raw, "version", str, "")),
        package_dir, py_files, entries, dict(files),
    )  # fmt: skip
