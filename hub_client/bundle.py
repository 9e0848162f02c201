"""Build a kernel bundle from a kernel package: the files a Hub repo holds for one release.

    manifest.json                 names everything below with its sha256 (see ``manifest``)
    README.md                     the card, with Hub YAML metadata
    src/<name>/*.py               the package's Python source (imported only with trust_remote_code)
    ir/<entry>/<spec>.nkir        verified IR text per declared specialisation (what untrusted loads run); for a
                                  shape family (``N x 512:float32``, ``N in 1..65536``) the family's IR, proved for
                                  its whole range, instantiated per call shape by the loader
    tests/<entry>/<spec>.npz      small inputs + the NumPy reference's outputs
    benchmarks/modelled.json      modelled latency per specialisation on the simulator (when nki_dsl has one)
    benchmarks/comparison.json    with a [benchmarks] baseline in kernel.toml: per specialisation and target, the
                                  kernel's and the baseline's modelled latency (us), the speed-up, the binding engine
    build/torch-neuron/           with [neuron] files in kernel.toml: the HF kernels variant (``hf_variant``), the
                                  kernel against AWS's current ``nki`` for HF kernels on a Trainium machine

Deterministic: the same package and version give the same bytes (no timestamps, no absolute paths, inputs from
seeds derived from the specialisation id). Building checks each specialisation three ways before it is shipped:
the IR parses back to the same text, verifies, and the kernel matches its reference on the test vectors.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import nki_dsl as nki
from hub_client import execute
from hub_client.errors import BundleError
from hub_client.families import merge_outputs
from hub_client.hf_variant import variant_files
from hub_client.manifest import FORMAT, MANIFEST, dump, is_recordable_default, parse, sha256_hex
from hub_client.npz import npz_bytes
from hub_client.package import (
    ArgSpec,
    KernelPackage,
    Specialisation,
    check_version,
    holds,
    parse_shape,
    read_package,
    shape_at,
    shown,
)
from hub_client.package_import import function_at, import_package_dir

TARGET = "trn2"
MAX_TEST_VECTOR_ELEMENTS = 1 << 17  # inputs above this many elements get no test vector (bundles stay small)
_NATIVE = {"float32", "float16", "float64", "int32", "int8", "uint8", "int16", "int64"}  # .npy round-trips these


@dataclass(frozen=True)
class Bundle:
    files: dict[str, bytes]  # path -> bytes, including manifest.json

    @property
    def manifest(self):
        return parse(self.files[MANIFEST])

    def write(self, directory: str | Path) -> Path:
        """Write the bundle under ``directory`` (each file atomically: temp file then rename)."""
        from hub_client.atomic import write_bytes

        directory = Path(directory)
        for path, data in sorted(self.files.items()):
            write_bytes(directory / path, data)
        return directory


def _import_package(pkg: KernelPackage):
    """The publisher's own package, under a private name per package directory."""
    unique = hashlib.sha256(str(pkg.root).encode()).hexdigest()[:10]
    return import_package_dir(f"_kernels_build_{pkg.name.replace('-', '_')}_{unique}", pkg.root)


def _function(package, ref: str, pkg: KernelPackage):
    try:
        return function_at(package, ref)
    except (ImportError, AttributeError) as e:
        raise BundleError(f"{pkg.root}/kernel.toml: {ref!r} does not name a function in the package ({e})") from None


def _inputs(spec: Specialisation, values: dict[str, int] | None = None) -> list[np.ndarray]:
    seed = int(hashlib.sha256((spec.id + repr(sorted((values or {}).items()))).encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    return [(2.0 * rng.standard_normal(shape_at(a.shape, values or {}))).astype(
        nki.language.bfloat16 if a.dtype == "bfloat16" else a.dtype) for a in spec.args]  # fmt: skip


def _samples(spec: Specialisation) -> list[dict[str, int]]:
    """The instances of a family the builder runs against the reference: its smallest, a ragged middle (300, 200 or
    130 rows: not multiples of the 128-partition tile) and its largest, those whose inputs are small enough for test
    vectors; the last of them ships as the family's vectors."""
    def fits(values):
        return sum(int(np.prod(shape_at(a.shape, values or {}))) for a in spec.args) <= MAX_TEST_VECTOR_ELEMENTS

    def near(k):  # every dimension as close to k as its range (and step) allows
        return {n: min(hi, max(lo, k // step * step)) for n, lo, hi, step in spec.dims}

    lowest, highest = {n: lo for n, lo, *_ in spec.dims}, {n: hi for n, _, hi, _ in spec.dims}
    ragged = next((v for v in (near(300), near(200), near(130)) if fits(v)), None)
    out = []
    for values in (lowest, ragged, highest):
        if values is not None and fits(values) and values not in out:
            out.append(values)
    return out


def _relocate(text: str, pkg: KernelPackage) -> str:
    # The tracer records absolute source paths; a bundle names its own copy of the source instead, so the IR is the
    # same on every machine and points at a file the bundle ships.
    text = text.replace(f'"{pkg.root}/', f'"src/{pkg.name}/')
    if '"/' in text:
        raise BundleError(f"{pkg.name}: the kernel's IR refers to source files outside the package directory")
    return text


def scalar_defaults(pkg, ep, spec, plan) -> dict[str, float | int]:
    """Each runtime scalar's value the builder traces and checks with: the plan's own keyword default (a loader
    without the Python passes it when the caller leaves the keyword out), or for a required scalar (the plan's
    default None) kernel.toml's sample."""
    params = inspect.signature(plan).parameters
    samples = dict(spec.samples)
    out = {}
    for name, dtype in spec.scalars:
        default = params[name].default if name in params else inspect.Parameter.empty
        if name in samples and default is None:
            default = samples[name]
        elif name in samples:
            raise BundleError(f"{pkg.name}.{ep.name}: runtime scalar {name!r} has a sample, which is for a scalar the "
                              f"plan's signature ({ep.plan}) gives no default (None): a required one")  # fmt: skip
        if default is inspect.Parameter.empty or isinstance(default, bool) or not isinstance(default, int | float):
            raise BundleError(f"{pkg.name}.{ep.name}: runtime scalar {name!r} needs a numeric default in the plan's "
                              f"signature ({ep.plan}), which callers that leave it out get (or the default None and "
                              f"a sample in kernel.toml: a scalar every call must give)")  # fmt: skip
        if not holds(dtype, default):  # (the manifest refuses the default too; the kernel's array would overflow)
            raise BundleError(f"{pkg.name}.{ep.name}: runtime scalar {name!r}'s default {shown(default)} in the plan's "
                              f"signature ({ep.plan}) is not a finite number {dtype} holds (for an int32, an int "
                              f"within its range)")  # fmt: skip
        out[name] = float(default) if dtype == "float32" else int(default)
    return out


def _plan_takes(pkg, ep, spec, plan) -> None:
    """Every name kernel.toml gives the plan (constants, runtime scalars, keywords giving dimensions) is one of its
    parameters, or it takes ``**kwargs``: the builder calls it with them."""
    params = inspect.signature(plan).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    given = [n for n, _ in spec.constants] + [n for n, _ in spec.scalars] + [k for k, _ in spec.keywords]
    missing = [n for n in given if n not in params or params[n].kind is inspect.Parameter.POSITIONAL_ONLY]
    if missing:
        raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: kernel.toml gives the plan {shown(missing[0])}, "
                          f"which is no keyword parameter of {ep.plan}")  # fmt: skip


def _alternatives_agree(pkg, ep, spec, call, first) -> None:
    """A constant listing several values (``strategy = ["auto", "flash"]``) publishes one IR for all of them: the
    plan, called with each (``call(constants)``), must make the same kernel call as with the first (``first``),
    the one traced. A plan that schedules another kernel for one of them (``strategy="resident"``), or refuses it
    (the schedule traced does not implement it: a family's ``evict`` engines), is refused."""
    base = spec.traced_constants
    for name, values in spec.constants:
        for value in values[1:] if isinstance(values, tuple) else ():
            try:
                launch, args, kwargs = call(base | {name: value})
            except Exception as e:  # (the package's own refusal, e.g. a ValueError naming the limit)
                raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: {name}={value!r} is listed, but the plan "
                                  f"refuses it: {e}") from e  # fmt: skip
            same = launch is first[0] and len(args) == len(first[1]) and set(kwargs) == set(first[2])
            pairs = list(zip(args, first[1])) + [(kwargs[k], first[2][k]) for k in kwargs if same]
            if not same or not all(_same_argument(a, b) for a, b in pairs):
                raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: {name}={value!r} makes another kernel call "
                                  f"than {name}={values[0]!r}, so one IR cannot serve both: list only the values "
                                  f"the plan treats alike")  # fmt: skip


def required_constants(spec, plan, args, extra: dict) -> list[str]:
    """The constants a call must give for ``spec`` to hold it: those the plan, called with ``args``, the others and
    ``extra`` (the runtime scalars' defaults, the keywords giving dimensions), refuses the arguments without
    (``num_heads``, which it takes by position; ``seq`` of a family over one model's tokens, when neither seq nor
    batch is given). A loader without the plan so refuses a call leaving one out (or passing its default), as the
    launcher does, instead of running the constant's traced value; a constant the plan fills in by itself
    (``epilogue``, ``strategy``) is not required."""
    base = spec.traced_constants
    out = []
    for name, _ in spec.constants:
        try:
            plan(*args, **{k: v for k, v in base.items() if k != name}, **extra)
        except Exception:  # (the package's own refusal, or Python's for a missing positional argument)
            out.append(name)
    return out


def _same_argument(a, b) -> bool:
    if a is b:
        return True
    if _is_array(a) and _is_array(b):
        return (tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype)
                and bool(np.array_equal(np.asarray(a), np.asarray(b))))  # fmt: skip
    try:
        return not _is_array(a) and not _is_array(b) and type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):  # (a value whose == is not a bool)
        return False


def scalar_arrays(spec, values: dict) -> list[np.ndarray]:
    """The runtime scalars as the kernel takes them: one-element arrays of their dtypes, after the arrays."""
    return [np.full((1,), values[name], dtype=dtype) for name, dtype in spec.scalars]


def _probe(defaults: dict) -> dict:
    """Other values of the runtime scalars than their defaults: the plan must pass what it is given."""
    return {n: v * 2 + 1 for n, v in defaults.items()}


def _check_plan(pkg, ep, spec, arrays, args, kwargs, defaults, is_arg):
    """The plan passes the caller's arrays positionally, unchanged and in order, then one one-element array per
    runtime scalar holding its value (a loader without the Python matches calls to IR that way)."""
    passed = [a for a in args if is_arg(a)]
    extra = passed[len(arrays):]
    want = scalar_arrays(spec, defaults)
    if (
        len(passed) != len(arrays) + len(want)
        or any(p is not a for p, a in zip(passed, arrays))
        or any(is_arg(v) for v in kwargs.values())
        or any(not _is_array(e) or tuple(e.shape) != (1,) or np.dtype(e.dtype) != w.dtype
               or np.asarray(e)[0] != w[0] for e, w in zip(extra, want))  # fmt: skip
    ):
        scalars = "".join(f", then {n} as a one-element {t} array" for n, t in spec.scalars)
        raise BundleError(
            f"{pkg.name}.{ep.name}: the plan must pass the caller's arrays to the kernel positionally, unchanged and "
            f"in order{scalars} (a loader without the Python matches calls to IR that way)"
        )


def _check_params(pkg, ep, spec, names: list[str]):
    if len(names) != len(spec.args) + len(spec.scalars) or names[len(spec.args):] != [n for n, _ in spec.scalars]:
        raise BundleError(f"{pkg.name}.{ep.name}: the kernel's parameters are not exactly the entry point's arrays"
                          + "".join(f", then {n}" for n, _ in spec.scalars))  # fmt: skip


def _trace(pkg, ep, spec, plan, arrays):
    """``(IR text, parsed IR, (launch, args, kwargs))`` of one specialisation."""
    defaults = scalar_defaults(pkg, ep, spec, plan)
    launch, args, kwargs = plan(*arrays, **spec.traced_constants, **defaults)
    _check_plan(pkg, ep, spec, arrays, args, kwargs, defaults, _is_array)
    if spec.scalars:
        _check_plan(pkg, ep, spec, arrays, *plan(*arrays, **spec.traced_constants, **_probe(defaults))[1:],
                    _probe(defaults), _is_array)  # fmt: skip
    _alternatives_agree(pkg, ep, spec, lambda c: plan(*arrays, **c, **defaults), (launch, args, kwargs))
    traced = nki.trace(launch, *args, target=TARGET, **kwargs)
    text = _relocate(traced.text, pkg)
    parsed = nki.parse_ir(text, target=TARGET)  # verified as a loader would; its text must be the same
    if parsed.text != text:
        raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: IR text does not round-trip through the parser")
    _check_params(pkg, ep, spec, execute.param_names(parsed))
    return text, parsed, (launch, args, kwargs)


def _trace_family(pkg, ep, spec, plan):
    """``(IR text, parsed family)`` of a shape family: the plan sees the arguments with symbolic dimensions
    (``nki.symbolic_shapes``) and must pass them on unchanged; the kernel is traced with them, and the family is
    proved for its whole range on the bundle's target (``nki.trace`` proves it; the relocated text is proved again
    after parsing, as shipped)."""
    ranges = {n: (lo, hi, step) for n, lo, hi, step in spec.dims}
    specs = [nki.spec(a.shape, a.dtype, dims={s: ranges[s] for s in a.symbols}) for a in spec.args]
    shapes = nki.symbolic_shapes(*specs)
    stand_ins = [_FamilyArg(s, shape) for s, shape in zip(specs, shapes)]
    defaults = scalar_defaults(pkg, ep, spec, plan)
    # a keyword giving a dimension (keywords = { num_heads = "H" }) reaches the plan as that dimension, symbolic
    dims = {str(d): d for shape in shapes for d in shape if not isinstance(d, int)}
    keywords = {k: dims[sym] for k, sym in spec.keywords}
    launch, args, kwargs = plan(*stand_ins, **spec.traced_constants, **defaults, **keywords)
    _alternatives_agree(pkg, ep, spec, lambda c: plan(*stand_ins, **c, **defaults, **keywords), (launch, args, kwargs))

    def is_arg(a):
        return isinstance(a, _FamilyArg) or (bool(spec.scalars) and _is_array(a))

    _check_plan(pkg, ep, spec, stand_ins, args, kwargs, defaults, is_arg)
    if spec.scalars:
        _check_plan(pkg, ep, spec, stand_ins, *plan(*stand_ins, **spec.traced_constants, **_probe(defaults),
                                                     **keywords)[1:], _probe(defaults), is_arg)  # fmt: skip
    # the runtime scalars as specs: the family's IR must not depend on their values
    args = [a.spec if isinstance(a, _FamilyArg) else nki.spec(a.shape, str(a.dtype)) if _is_array(a) else a
            for a in args]  # fmt: skip
    try:
        family = nki.trace(launch, *args, target=TARGET, **kwargs)
    except nki.NkiError as e:
        raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: the shape family cannot be published: {e}") from None
    text = _relocate(family.text, pkg)
    parsed = nki.prove_family(nki.parse_family(text), TARGET)
    if parsed.text != text:
        raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: IR text does not round-trip through the parser")
    _check_params(pkg, ep, spec, parsed.param_names)
    return text, parsed, required_constants(spec, plan, stand_ins, defaults | keywords)


class _FamilyArg:
    """What a plan sees of a shape family's argument at publish time: ``shape`` (with ``Dim``s), ``dtype``, ``ndim``;
    no data."""

    def __init__(self, spec, shape):
        self.spec, self.shape = spec, shape
        self.dtype = nki.language.bfloat16 if spec.dtype == "bfloat16" else np.dtype(spec.dtype)
        self.ndim = len(shape)


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _check_against_reference(pkg, ep, spec, parsed, arrays, reference, scalars: dict, view=None):
    """``arrays`` are the caller's; ``scalars`` the runtime scalars' values (passed after them, as arrays). With
    ``view`` (a family whose args group axes): ``(the kernel's arrays, the keywords' values, the outputs as the
    caller gets them)``, the kernel run on the first and the reference on ``arrays`` with the keywords."""
    exe = execute.compile_ir(parsed, execute.DEFAULT_BACKEND, TARGET)
    kernel_arrays, keywords, to_caller = view or (arrays, {}, lambda out: out)
    actual = to_caller(exe.run(dict(zip(execute.param_names(parsed), kernel_arrays + scalar_arrays(spec, scalars)))))
    expected = reference(*arrays, **spec.traced_constants, **scalars, **keywords)
    dtype = spec.args[0].dtype
    rtol, atol = ep.tolerance.get(dtype) or pkg.tolerance.get(dtype, (1e-5, 1e-6))
    # a kernel of several outputs (a tuple, as its reference returns) is checked output by output
    pairs = list(zip(actual, expected)) if isinstance(actual, tuple) else [(actual, expected)]
    if (isinstance(actual, tuple) and (not isinstance(expected, tuple) or len(actual) != len(expected))) or any(
        a.shape != e.shape or not np.allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)
        for a, e in pairs
    ):
        raise BundleError(f"{pkg.name}.{ep.name}{spec.describe()}: the kernel disagrees with its NumPy reference")
    return expected, (rtol, atol)


def _profile(launch, args, kwargs, target):
    """The kernel's Profile on ``target``, timing only (the cost model does not read the data, so the figures
    are those of a run with the test inputs, at a fraction of the time for large specialisations)."""
    return nki.benchmark(launch, *args, target=target, **kwargs)  # (it reads an array's shape and dtype only)


def _modelled(launch, args, kwargs) -> dict:
    p = _profile(launch, args, kwargs, TARGET)
    return {"latency_ns": round(float(p.latency_ns), 3), "flops": float(p.flops), "hbm_bytes": int(p.hbm_bytes),
            "bottleneck": p.bottleneck}  # fmt: skip


def _compared(pkg, ep, spec, launch, args, kwargs, baseline) -> dict:
    """Per target: the kernel's and the baseline's modelled latency, the speed-up and the binding engine. The
    baseline is the package's own function (``baseline(entry, specs, constants, target) -> microseconds``)."""
    out = {}
    for target in pkg.benchmark_targets:
        p = _profile(launch, args, kwargs, target)
        base_us = float(baseline(ep.name, [nki.spec(a.shape, a.dtype) for a in spec.args], spec.traced_constants,
                                 target))  # fmt: skip
        busy = p.engine_busy
        out[target] = {"latency_us": round(p.latency_us, 3), "baseline_us": round(base_us, 3),
                       "speedup": round(base_us / p.latency_us, 3), "binding_engine": p.bottleneck,
                       "binding_busy": round(busy[p.bottleneck], 3),
                       "tensor_engine_utilisation": round(p.tensor_engine_utilisation, 4)}  # fmt: skip
    return out


def build_bundle(package_dir: str | Path, version: str | None = None, *, benchmarks: bool = True) -> Bundle:
    """The bundle of the package at ``package_dir`` (``version`` overrides kernel.toml's, same major).
    ``benchmarks=False`` skips the modelled figures (the manifest says so)."""
    pkg = read_package(package_dir)
    version = check_version(version) if version else pkg.version
    if int(version.split(".")[0]) != pkg.major:
        raise BundleError(
            f"{pkg.name}: version {version} changes the major version of kernel.toml ({pkg.version}); a new major "
            f"is a new API: change kernel.toml's version"
        )
    module = _import_package(pkg)
    simulate = benchmarks and "simulator" in execute.available_backends()
    files: dict[str, bytes] = {}
    entries, bench, compared = {}, {}, {}
    baseline = _function(module, pkg.baseline, pkg) if simulate and pkg.baseline else None
    for ep in pkg.entry_points:
        plan, reference = _function(module, ep.plan, pkg), _function(module, ep.reference, pkg)
        records = []
        for spec in ep.specialisations:
            _plan_takes(pkg, ep, spec, plan)
            if spec.dims:
                records.append(_family_record(pkg, ep, spec, plan, reference, files, bench, compared, simulate,
                                              baseline))  # fmt: skip
                continue
            arrays, defaults = _inputs(spec), scalar_defaults(pkg, ep, spec, plan)
            text, parsed, launch = _trace(pkg, ep, spec, plan, arrays)
            ir_path = f"ir/{ep.name}/{spec.id}.nkir"
            files[ir_path] = text.encode()
            tv_path = None
            if sum(a.size for a in arrays) <= MAX_TEST_VECTOR_ELEMENTS and all(a.dtype in _NATIVE for a in spec.args):
                expected, tol = _check_against_reference(pkg, ep, spec, parsed, arrays, reference, defaults)
                if not isinstance(expected, tuple):  # (test vectors hold one output)
                    tv_path = f"tests/{ep.name}/{spec.id}.npz"
                    vectors = {f"arg{i}": a for i, a in enumerate(arrays + scalar_arrays(spec, defaults))}
                    vectors["expected"] = expected
                    vectors["tolerance"] = np.array(tol, dtype=np.float64)
                    files[tv_path] = npz_bytes(vectors)
            if simulate:
                bench[f"{ep.name}/{spec.id}"] = _modelled(*launch)
            if baseline is not None:
                compared[f"{ep.name}/{spec.id}"] = _compared(pkg, ep, spec, *launch, baseline)
            record = {"id": spec.id, "args": [str(a) for a in spec.args], "constants": dict(spec.constants),
                      "ir": ir_path, "test_vectors": tv_path}  # fmt: skip
            requires = _requires(required_constants(spec, plan, arrays, defaults))
            records.append(record | _scalars_record(spec, defaults) | requires)
        held = keyword_defaults(plan)  # (only when the plan has some: other entry points keep their bytes)
        entries[ep.name] = {"plan": ep.plan, "parameters": positional_parameters(plan), "specialisations": records}
        entries[ep.name] |= {"defaults": held} if held else {}
    for name in pkg.python_files:
        files[f"src/{pkg.name}/{name}"] = (pkg.root / name).read_bytes()
    files.update(variant_files(pkg))  # build/torch-neuron/: what HF kernels loads on a Trainium machine
    if (pkg.root / "README.md").is_file():
        files["README.md"] = (pkg.root / "README.md").read_bytes()
    if simulate:
        files["benchmarks/modelled.json"] = (json.dumps(bench, sort_keys=True, indent=1) + "\n").encode()
        benchmarks = {"status": "modelled", "target": TARGET, "file": "benchmarks/modelled.json"}
        if baseline is not None:
            files["benchmarks/comparison.json"] = (json.dumps(compared, sort_keys=True, indent=1) + "\n").encode()
            benchmarks.update(comparison="benchmarks/comparison.json", targets=list(pkg.benchmark_targets),
                              baseline=(baseline.__doc__ or "").strip().split("\n\n")[0])  # fmt: skip
    else:
        note = "not requested" if not benchmarks else "this nki_dsl has no simulator backend"
        benchmarks = {"status": "skipped", "note": f"no modelled figures: {note}"}
    manifest = {
        "format": FORMAT, "name": pkg.name, "version": version, "major": int(version.split(".")[0]),
        "license": pkg.license, "description": pkg.description, "target": TARGET,
        "python": {"package": f"src/{pkg.name}", "files": [f"src/{pkg.name}/{n}" for n in pkg.python_files]},
        "entry_points": entries, "benchmarks": benchmarks,
        "files": {path: sha256_hex(data) for path, data in sorted(files.items())},
    }  # fmt: skip
    files[MANIFEST] = dump(manifest)
    parsed_manifest = parse(files[MANIFEST])  # the builder's output must pass the loader's checks
    _check_vectors(pkg, parsed_manifest, files)
    return Bundle(files)


def positional_parameters(plan) -> list[str]:
    """The plan's parameters a caller can pass by position, in order: what the loader binds positional values past
    the arrays to, without the plan."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [n for n, p in inspect.signature(plan).parameters.items() if p.kind in kinds]


def keyword_defaults(plan) -> dict:
    """The plan's keyword defaults JSON holds as they are (None, a boolean, a finite number, a string), which a
    loader without the plan treats as left out when a call passes them (``hub_client/keywords.py``); a default of
    another kind (a tuple) is not recorded, so a call passing it is matched as any other value."""
    params = inspect.signature(plan).parameters.values()
    return {p.name: p.default for p in params
            if p.default is not inspect.Parameter.empty and is_recordable_default(p.default)}  # fmt: skip


def _requires(names: list[str]) -> dict:
    """The record's ``requires`` (only when it has any: other records keep their bytes)."""
    return {"requires": names} if names else {}


def _scalars_record(spec, defaults: dict) -> dict:
    """The record's ``scalars`` (only when it has any: other records keep their bytes); a required one's default is
    null."""
    if not spec.scalars:
        return {}
    required = dict(spec.samples)  # (a sample is only for a scalar the plan gives no default: the call must give it)
    return {"scalars": {n: {"dtype": t, "default": None if n in required else defaults[n]} for n, t in spec.scalars}}


def _family_record(pkg, ep, spec, plan, reference, files, bench, compared, simulate, baseline) -> dict:
    """A shape family's manifest record; its IR, vectors (at the largest sample that fits) and modelled figures
    (at the last sample: a family has no one size to time) go into the bundle's files."""
    text, family, requires = _trace_family(pkg, ep, spec, plan)
    ir_path = f"ir/{ep.name}/{spec.id}.nkir"
    files[ir_path] = text.encode()
    tv_path, samples = None, _samples(spec)
    defaults = scalar_defaults(pkg, ep, spec, plan)
    for values in samples:
        arrays = _inputs(spec, values)  # the kernel's shapes; the caller's merge the groups of args
        runtime = scalar_arrays(spec, defaults)
        instance = family.instantiate(*arrays, *runtime, target=TARGET)
        concrete = _caller_spec(spec, values)
        if not all(a.dtype in _NATIVE for a in spec.args):
            break
        shapes = []  # the kernel's output shapes, for the vectors (which hold the kernel's shapes)

        def to_caller(out, values=values, shapes=shapes):
            shapes.append(None if isinstance(out, tuple) else out.shape)
            return _merged(spec, out, values)

        view = (arrays, {}, to_caller)  # (the keywords' values are the caller spec's constants)
        call = [a.reshape(s.shape) for a, s in zip(arrays, concrete.args)]
        expected, tol = _check_against_reference(pkg, ep, concrete, instance, call, reference, defaults, view)
        if isinstance(expected, tuple):  # checked, but test vectors hold one output: none shipped
            continue
        expected = expected.reshape(shapes[0])
        tv_path = f"tests/{ep.name}/{spec.id}.npz"
        vectors = {f"arg{i}": a for i, a in enumerate(arrays + runtime)} | {"expected": expected}
        vectors["tolerance"] = np.array(tol, dtype=np.float64)
        files[tv_path] = npz_bytes(vectors)
    if samples and simulate:  # (build_bundle has a baseline only when it simulates)
        values = samples[-1]
        launch = plan(*_inputs(spec, values), **spec.traced_constants, **defaults, **_keyword_values(spec, values))
        concrete = _caller_spec(spec, values)
        bench[f"{ep.name}/{spec.id}"] = _modelled(*launch) | {"at": values}
        if baseline is not None:
            compared[f"{ep.name}/{spec.id}"] = _compared(pkg, ep, concrete, *launch, baseline)
    dims = {n: [lo, hi] + ([step] if step != 1 else []) for n, lo, hi, step in spec.dims}
    views = {"keywords": dict(spec.keywords)} if spec.keywords else {}
    views |= {"returns": list(spec.returns)} if spec.returns else {}  # (only when present: other records keep bytes)
    record = {"id": spec.id, "args": [str(a) for a in spec.args], "constants": dict(spec.constants), "ir": ir_path,
              "test_vectors": tv_path, "dims": dims}  # fmt: skip
    return record | _scalars_record(spec, defaults) | views | _requires(requires)


def _keyword_values(spec: Specialisation, values: dict) -> dict:
    return {k: values[sym] for k, sym in spec.keywords}


def _caller_spec(spec: Specialisation, values: dict) -> Specialisation:
    """One instance as the caller sees it: the groups of args merged, the keywords' values as constants."""
    args = tuple(ArgSpec(shape_at(a.shape, values, a.groups), a.dtype) for a in spec.args)
    return Specialisation(args, tuple(sorted((*spec.constants, *_keyword_values(spec, values).items()))),
                          scalars=spec.scalars)  # fmt: skip


def _merged(spec: Specialisation, out, values: dict):
    """The kernel's output as the caller gets it (``returns``: groups merged), by the loader's own rule."""
    returns = tuple(parse_shape(text) for text in spec.returns)
    return merge_outputs(returns, out, values, lambda why: BundleError(f"{spec.describe()}: {why}"))


def _check_vectors(pkg: KernelPackage, manifest, files: dict[str, bytes]) -> None:
    """The shipped vectors, re-run from the shipped bytes exactly as ``nki-kernels verify --run`` will run them."""
    from hub_client.vectors import run_vectors

    failed = [r for r in run_vectors(manifest, files.__getitem__, target=TARGET) if r.failed]
    if failed:
        lines = "; ".join(f"{r.entry}/{r.spec}: {r.detail}" for r in failed)
        raise BundleError(f"{pkg.name}: the bundle's test vectors disagree with its IR: {lines}")
