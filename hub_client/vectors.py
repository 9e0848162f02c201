"""Re-running a bundle's test vectors: the verified IR of each specialisation on its stored inputs, compared with
the stored expected outputs within the stored tolerance.

One comparison serves both ends: ``build_bundle`` runs it over the bundle it is about to return (a bundle whose
vectors disagree with its own IR is never produced), and ``nki-kernels verify --run`` runs it over a cached release
(the digests prove the bytes are the published ones; this proves the published IR still computes what its
publisher recorded, on this machine's nki_dsl). The inputs are untrusted data: ``.npz`` is read without pickle and
checked against the declared shapes and dtypes before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import nki_dsl as nki
from hub_client import execute, families
from hub_client.errors import BundleError
from hub_client.manifest import Manifest
from hub_client.npz import load_npz
from hub_client.package import describe_dim


@dataclass(frozen=True)
class VectorResult:
    entry: str
    spec: str
    status: str  # "ok", "mismatch", "invalid" (vectors unusable) or "none" (the bundle ships no vectors for it)
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "invalid")


def _check_one(spec, read: Callable[[str], bytes], target: nki.Target, backend: str) -> tuple[str, str]:
    try:
        v = load_npz(read(spec.test_vectors))
        args = [v[f"arg{i}"] for i in range(len(spec.args) + len(spec.scalars))]  # the arrays, then the scalars
        expected, (rtol, atol) = v["expected"], (float(t) for t in v["tolerance"])
    except BundleError as e:  # load_npz's refusal names what is wrong
        return "invalid", f"unreadable test vectors ({e})"
    except (KeyError, ValueError, OSError, TypeError) as e:
        return "invalid", f"unreadable test vectors ({type(e).__name__}: {e})"
    if spec.is_family:  # one instance of the family: its vectors' shapes must fit it
        values, why = families.bind_kernel(spec, tuple(args[:len(spec.args)]))  # (vectors hold the kernel's shapes)
        if values is None:
            shapes = ", ".join(f"{'x'.join(map(str, a.shape))}:{a.dtype}" for a in args)
            return "invalid", (f"the vectors ({shapes}) do not fit the family{': ' + why if why else ''}; the "
                               f"specialisation says {', '.join(map(str, spec.args))} with "
                               f"{', '.join(describe_dim(n, *d) for n, d in spec.dims.items())}")
    for i, (a, s) in enumerate(zip(args, spec.args)):
        if not spec.is_family and tuple(a.shape) != s.shape or np.dtype(a.dtype).name != s.dtype:
            return "invalid", f"arg{i} is {'x'.join(map(str, a.shape))}:{a.dtype}, the specialisation says {s}"
    for i, a in enumerate(args[len(spec.args):], len(spec.args)):
        if tuple(a.shape) != (1,):
            return "invalid", f"arg{i} is {'x'.join(map(str, a.shape))}:{a.dtype}, a runtime scalar is one element"
    try:
        if spec.is_family:
            ir = execute.parse_family(read(spec.ir).decode()).instantiate(*args, target=target)
        else:
            ir = execute.parse_verified(read(spec.ir).decode(), target)
    except Exception as e:  # nki_dsl's parse and verification errors carry the verifier's message
        return "invalid", f"{spec.ir} was refused: {e}"
    # the scalars' vectors follow the IR's parameters (the builder's order); the manifest's JSON keeps them sorted
    for i, (name, a) in enumerate(zip(execute.param_names(ir)[len(spec.args):], args[len(spec.args):]), len(spec.args)):
        dtype = spec.scalars.get(name, ("a runtime scalar of the manifest",))[0]
        if np.dtype(a.dtype).name != dtype:
            return "invalid", f"arg{i} is 1:{a.dtype}, runtime scalar {name} is 1:{dtype}"
    named = dict(zip(execute.param_names(ir), args))
    why = execute.mismatch(ir, named) if len(args) == len(named) else (
        f"{len(args)} vectors for the IR's {len(named)} parameters")
    if why:
        return "invalid", f"the vectors do not fit {spec.ir}: {why}"
    actual = execute.compile_ir(ir, backend, target).run(named)
    if actual.shape != expected.shape:
        return "mismatch", f"output shape {actual.shape}, expected {expected.shape}"
    a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
    close = np.isclose(a64, e64, rtol=rtol, atol=atol)
    if not close.all():
        worst = float(np.max(np.abs(a64 - e64)))
        off = int((~close).sum())
        return "mismatch", f"{off} of {close.size} outputs off (max |error| {worst:.3g}; rtol {rtol:g}, atol {atol:g})"
    return "ok", f"{close.size} outputs within rtol {rtol:g}, atol {atol:g}"


def run_vectors(manifest: Manifest, read: Callable[[str], bytes], *, backend: str = execute.DEFAULT_BACKEND,
                target: str | None = None) -> list[VectorResult]:  # fmt: skip
    """Every specialisation's test vectors, run on ``backend``; ``read(path)`` returns a bundle file's bytes."""
    target = nki.get_target(target or manifest.raw.get("target", "trn2"))  # resolved once for every vector
    results = []
    for ep in manifest.entry_points.values():
        for spec in ep.specialisations:
            if spec.test_vectors is None:
                results.append(VectorResult(ep.name, spec.id, "none", "no test vectors shipped (inputs too large)"))
                continue
            status, detail = _check_one(spec, read, target, backend)
            results.append(VectorResult(ep.name, spec.id, status, detail))
    return results
