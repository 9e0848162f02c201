"""The first-party row kernels fetched without trust: every number of rows their launchers take runs, as one
family instance up to the families' top (65536) and above it as instances over slices of whole 128-row tiles
(each family's kernel is proved independent along its rows in blocks of 128 from its verified IR,
``ShapeFamily.independence``, ``verify/independent.py``; ``hub_client/chunks.py``). Enumerated through the real
loader over the real bundles: softmax, rmsnorm and layernorm whole, linear's ``linear`` entry point cut to its
float32 width families without epilogue (the same row loop as every other width family, ``linear/widths.py``; the
whole package traces some 600 families). For each family the calls are its other dimensions at the ends of their
ranges, its rows from 1 to far above the top, its constants or another value of its runtime scalars; past the
launchers' limits the launcher refuses and so does the loader."""

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.package import read_package
from hub_client.publish import publish
from tests.hub.conftest import ROOT, settings
from tests.hub.library_packages import families_only

TOP = 65536  # every row family's top in kernel.toml
ROWS = (1, 127, 129, TOP, TOP + 1, 70_000, 1_000_000)


class _Shape:
    """An array's shape and dtype, all that matching a call reads (no data: 10^6 rows cost nothing)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)


def _dtype(name):
    from nki_dsl.language import bfloat16

    return bfloat16 if name == "bfloat16" else name


def _calls(spec, rows_dim):
    """``(args, kwargs, rows)`` per call: ``spec``'s other dimensions at the ends of their ranges, its rows over
    ``ROWS``; its constants as they are, its runtime scalars at another value than their default."""
    ranges = {n: (lo, hi) for n, lo, hi, _ in spec.dims}
    corners = [{}]
    for n, (lo, hi) in ranges.items():
        if n != rows_dim:
            corners = [dict(c, **{n: v}) for c in corners for v in sorted({lo, hi})]
    kwargs = dict(spec.constants) | {name: 3e-5 for name, _ in spec.scalars}
    for corner in corners:
        for rows in ROWS:
            values = dict(corner, **{rows_dim: rows})
            args = tuple(_Shape([values.get(d, d) for d in a.shape], _dtype(a.dtype)) for a in spec.args)
            yield args, kwargs, rows


def _check_every_call(package_root, repo, entry_names):
    """Every family of ``entry_names`` in the package at ``package_root``, published and fetched without trust:
    each call ``_calls`` makes is one the launcher takes and the loader runs in one instance or in parts of whole
    row tiles. Returns the routes seen."""
    publish(build_bundle(package_root, benchmarks=False), repo, settings())
    k = kernels.get_kernel(repo, version=1)
    assert k.info.trusted is False
    pkg = read_package(package_root)
    module = __import__(f"kernels.{pkg.name}.launcher", fromlist=["launcher"])
    routes = set()
    for ep in (e for e in pkg.entry_points if e.name in entry_names):
        plan, entry = getattr(module, ep.plan.split(":")[1]), getattr(k, ep.name)
        for spec in (s for s in ep.specialisations if s.dims):
            rows_dim = spec.args[0].shape[0]
            for args, kwargs, rows in _calls(spec, rows_dim):
                plan(*args, **kwargs)  # the launcher takes it
                how, chosen, detail = entry.route(*args, **kwargs)
                assert how == ("family" if rows <= TOP else "parts"), (ep.name, spec.describe(), rows)
                if how == "parts":
                    assert detail[2][rows_dim].block == 128 and detail[1] == {rows_dim: rows}
                routes.add((ep.name, how))
    return k, routes


@pytest.mark.parametrize("name, vectors, widest", [
    ("softmax", 0, {"float32": 8192, "bfloat16": 8192, "float16": 8192}),
    ("rmsnorm", 1, {"float32": 16384, "bfloat16": 16384, "float16": 16384}),
    ("layernorm", 2, {"float32": 8192, "bfloat16": 16384, "float16": 16384}),
])  # fmt: skip
def test_every_row_count_the_row_kernels_take_runs_without_trust(registry, name, vectors, widest):
    """``vectors``: the per-column arrays after x (rmsnorm's g, layernorm's gamma and beta)."""
    k, routes = _check_every_call(ROOT / "kernels" / name, f"acme/{name}", {name})
    assert routes == {(name, "family"), (name, "parts")}
    plan = getattr(__import__(f"kernels.{name}.launcher", fromlist=["launcher"]), f"plan_{name}")
    for dtype, w in widest.items():  # one column past the launcher's limit: refused by both
        args = (_Shape((TOP + 1, w + 1), _dtype(dtype)),) + (_Shape((w + 1,), _dtype(dtype)),) * vectors
        with pytest.raises(ValueError, match="columns per row"):
            plan(*args)
        with pytest.raises(kernels.NoSpecialisationError):
            getattr(k, name).route(*args)


def test_every_row_count_runs_through_linears_width_families_without_trust(registry, tmp_path):
    def keep(line):
        return '"M x K:float32", "K x N:float32"]' in line and 'epilogue = "none"' in line

    root = families_only("linear", tmp_path, {"linear"}, keep)
    _, routes = _check_every_call(root, "acme/linear", {"linear"})
    assert routes == {("linear", "family"), ("linear", "parts")}


@pytest.mark.slow  # two instances of 65536 and 4464 rows on NumPy, and their verification: some 11 s
def test_seventy_thousand_rows_run_without_trust(registry, tmp_path):
    """rmsnorm at N = 70000 (above the family's 65536): instances of 65536 and 4464 rows, close to float64."""
    from kernels.rmsnorm.reference import rmsnorm

    root = families_only("rmsnorm", tmp_path, {"rmsnorm"}, lambda ln: '"N x 512:float32"' in ln)
    publish(build_bundle(root, benchmarks=False), "acme/rmsnorm", settings())
    k = kernels.get_kernel("acme/rmsnorm", version=1)
    rng = np.random.default_rng(11)
    x, g = rng.standard_normal((70_000, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    assert k.rmsnorm.route(x, g)[0] == "parts"
    out = k.rmsnorm(x, g, backend="numpy")
    assert out.shape == (70_000, 512) and out.dtype == np.float32
    np.testing.assert_allclose(out, rmsnorm(x.astype(np.float64), g.astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert sorted(dict(key[1])["N"] for key in k.rmsnorm._parsed if len(key) == 3) == [4464, 65536]


def test_a_fixed_weight_linear_call_above_the_top_runs_in_parts_of_the_width_family(registry, tmp_path):
    """ViT-B/16's qkv projection (768 x 2304 bf16, bias) at M = 70000: its tuned families (a static prologue of row
    tiles, pipelined groups) are not provably independent along M, so the call runs in parts of the width family
    holding K = 768 and N = 2304; at M = 197 the tuned family runs, listed first."""
    root = families_only("linear", tmp_path, {"linear"},
                         lambda ln: '"M x 768:bfloat16", "768x2304:bfloat16"' in ln
                         or ('"M x K:bfloat16", "K x N:bfloat16", "N:bfloat16"]' in ln and 'N = "2049..2560"' in ln
                             and 'epilogue = "bias"' in ln))  # fmt: skip
    publish(build_bundle(root, benchmarks=False), "acme/linear", settings())
    k = kernels.get_kernel("acme/linear", version=1)
    w, b = _Shape((768, 2304), _dtype("bfloat16")), _Shape((2304,), _dtype("bfloat16"))
    how, spec, detail = k.linear.route(_Shape((70_000, 768), _dtype("bfloat16")), w, b, epilogue="bias")
    assert how == "parts" and spec.args[0].shape == ("M", "K") and detail[2]["M"].block == 128
    how, spec, _ = k.linear.route(_Shape((197, 768), _dtype("bfloat16")), w, b, epilogue="bias")
    assert how == "family" and spec.args[0].shape == ("M", 768)
