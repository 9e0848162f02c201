"""A published manifest's records are untrusted: an attacker publishes both the manifest and the IR it names, and
the digests only prove they are the files published. So a record whose args or runtime scalars are not its IR's
parameters (another shape or dtype, a scalar named like an array, one parameter too few) is refused by the loader,
naming the IR file and the parameter, instead of reaching a backend that indexes arrays as the IR says (a raw
``ValueError``/``KeyError``/``IndexError``, or a float16 or complex array silently computed as float32).

A careless caller's values are data too: a runtime scalar past float64's range, an int of thousands of digits, a
ten-million-character keyword end in the loader's own errors, quoted at most a few hundred characters."""

import json

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.errors import ScalarArgumentError
from hub_client.manifest import MANIFEST, dump
from tests.hub.test_runtime_scalars import _package

CONCRETE = '{ args = ["128x64:float32", "64:float32"], constants = { epsilon = 1e-6 } },'


def _tampered(tmp_path, line, field, value):
    """The rmsnorm bundle of one specialisation ``line``, its record's ``field`` replaced by ``value`` (the manifest
    re-dumped: the attacker publishes it so)."""
    bundle = build_bundle(_package(tmp_path / "pkg", line), benchmarks=False)
    raw = json.loads(bundle.files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0][field] = value
    out = tmp_path / "bundle"
    bundle.write(out)
    (out / MANIFEST).write_bytes(dump(raw))
    return kernels.get_local_kernel(out)


def _arrays(args):
    return [np.ones(tuple(int(n) for n in a.split(":")[0].split("x")), a.split(":")[1]) for a in args]


@pytest.mark.parametrize("args, why", [
    (["128x64:float16", "64:float32"], "parameter %x of the IR is 128x64:float32, given "
                                       "128x64:float16"),
    (["128x64:complex64", "64:float32"], "parameter %x of the IR is 128x64:float32, given "
                                         "128x64:complex64"),
    (["64x64:float32", "64:float32"], "parameter %x of the IR is 128x64:float32, given "
                                      "64x64:float32"),
    (["128x32:float32", "32:float32"], "parameter %x of the IR is 128x64:float32"),
    (["128x64x2:float32", "64:float32"], "parameter %x of the IR is 128x64:float32"),
    (["128x64:float32"], "the IR's parameters are x, g; given 1 arrays"),
])  # fmt: skip
def test_a_record_whose_args_are_not_its_irs_parameters_is_refused(tmp_path, args, why):
    k = _tampered(tmp_path, CONCRETE, "args", args)
    with pytest.raises(kernels.IRRejectedError) as e:
        k.rmsnorm(*_arrays(args))
    assert why in str(e.value) and "ir/rmsnorm/128x64-float32_64-float32__epsilon-1e-06.nkir" in str(e.value)
    assert "the manifest's record does not describe its IR" in str(e.value)


WIDTHS = '{ args = ["N x W:float32", "W:float32"], dims = { N = "1..65536", W = "1..4096" }, ' \
         'scalars = { epsilon = "float32" } },'  # fmt: skip


@pytest.mark.parametrize("scalars, why", [
    ({"x": {"dtype": "float32", "default": 1.0}}, "the IR's parameters are x, g, epsilon; given 2 "
                                                  "arrays, x"),
    ({"eps": {"dtype": "float32", "default": 1.0}}, "the IR's parameters are x, g, epsilon; given 2 "
                                                    "arrays, eps"),
    ({"epsilon": {"dtype": "int32", "default": 1}}, "parameter %epsilon of the IR is 1:float32, given "
                                                    "1:int32"),
    ({}, "takes 3 arrays, got 2"),
])  # fmt: skip
def test_a_record_whose_scalars_are_not_its_irs_parameters_is_refused(tmp_path, scalars, why):
    k = _tampered(tmp_path, WIDTHS, "scalars", scalars)
    with pytest.raises(kernels.IRRejectedError) as e:
        k.rmsnorm(np.ones((3, 8), np.float32), np.ones(8, np.float32))
    assert why in str(e.value)


def test_an_untampered_record_still_runs(tmp_path):
    k = _tampered(tmp_path, CONCRETE, "args", ["128x64:float32", "64:float32"])
    x = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(k.rmsnorm(x, np.ones(64, np.float32)), want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def widths(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("widths")
    return kernels.get_local_kernel(build_bundle(_package(tmp, WIDTHS), benchmarks=False).write(tmp / "b"))


X, G = np.ones((3, 8), np.float32), np.ones(8, np.float32)


@pytest.mark.parametrize("value, shown", [
    (10**400, "got an int of 1329 bits"), (-(10**400), "got an int of 1329 bits"),
    (10**5000, "got an int of 16610 bits"), ("y" * 10**7, "(10000000 characters)"),
    (np.array(0.5), "got array(0.5)"), (float("nan"), "got nan"),
], ids=["past-float64", "past-minus-float64", "5000-digits", "long-string", "0-d", "nan"])  # fmt: skip
def test_a_scale_no_float32_holds_is_refused_and_quoted_in_bounds(widths, value, shown):
    with pytest.raises(ScalarArgumentError, match="epsilon must be a real number float32 holds") as e:
        widths.rmsnorm(X, G, epsilon=value)
    assert shown in str(e.value) and len(str(e.value)) < 400


def test_a_0_d_array_scale_is_refused_saying_what_to_pass(widths):
    jnp = pytest.importorskip("jax.numpy")

    for value in (np.array(0.5), jnp.array(0.5)):
        with pytest.raises(ScalarArgumentError, match=r"; pass a Python number \(float\(value\)\)"):
            widths.rmsnorm(X, G, epsilon=value)
    with pytest.raises(ScalarArgumentError) as e:
        widths.rmsnorm(X, G, epsilon=np.ones(1))
    assert "pass a Python number" not in str(e.value)


def test_an_int_or_a_numpy_scalar_is_a_scale(widths):
    for value in (2, np.int64(2), np.float32(2.0), 2.0):
        np.testing.assert_allclose(widths.rmsnorm(X, G, epsilon=value), X / np.sqrt(3.0), rtol=1e-6)


@pytest.mark.parametrize("kwargs, shown", [({"foo": 10**5000}, "foo=an int of 16610 bits"),
                                           ({"foo": "y" * 10**7}, "(10000000 characters)"),
                                           ({"z" * 10**6: 1}, "z" * 64 + "...=1")],
                         ids=["5000-digits", "long-value", "long-name"])  # fmt: skip
def test_an_unknown_keyword_is_quoted_in_bounds(widths, kwargs, shown):
    with pytest.raises(kernels.NoSpecialisationError) as e:
        widths.rmsnorm(X, G, **kwargs)
    assert shown in str(e.value) and len(str(e.value)) < 2000


def test_a_refusal_lists_at_most_forty_specialisations(tmp_path):
    """A manifest may hold thousands of records: a call none matches is refused with the first 40 and a count."""
    bundle = build_bundle(_package(tmp_path / "pkg", CONCRETE), benchmarks=False)
    raw = json.loads(bundle.files[MANIFEST])
    (record,) = raw["entry_points"]["rmsnorm"]["specialisations"]
    raw["entry_points"]["rmsnorm"]["specialisations"] = [record | {"id": f"s{i}"} for i in range(5000)]
    bundle.write(tmp_path / "bundle")
    (tmp_path / "bundle" / MANIFEST).write_bytes(dump(raw))
    k = kernels.get_local_kernel(tmp_path / "bundle")
    with pytest.raises(kernels.NoSpecialisationError) as e:
        k.rmsnorm(X, G)
    assert str(e.value).count("rmsnorm(128x64:float32, 64:float32, epsilon=1e-06)") == 40
    assert "... and 4960 more" in str(e.value)


def test_the_manifest_refuses_a_constant_named_by_no_identifier(tmp_path):
    from hub_client.errors import BundleError
    from hub_client.manifest import parse

    raw = json.loads(build_bundle(_package(tmp_path, CONCRETE), benchmarks=False).files[MANIFEST])
    for name in ("x" * 100_000, "a b", ""):
        raw["entry_points"]["rmsnorm"]["specialisations"][0]["constants"] = {name: 1}
        with pytest.raises(BundleError, match="names: identifiers of at most 64 characters") as e:
            parse(dump(raw))
        assert len(str(e.value)) < 400


@pytest.fixture(scope="module")
def widths_manifest(tmp_path_factory):
    return json.loads(build_bundle(_package(tmp_path_factory.mktemp("m"), WIDTHS), benchmarks=False).files[MANIFEST])


def _refused(raw, field, value, match):
    from hub_client.errors import BundleError
    from hub_client.manifest import parse

    raw = json.loads(json.dumps(raw))
    raw["entry_points"]["rmsnorm"]["specialisations"][0][field] = value
    with pytest.raises(BundleError, match=match) as e:
        parse(dump(raw))
    assert len(str(e.value)) < 500


@pytest.mark.parametrize("record", [
    {"dtype": "float32", "default": True}, {"dtype": "float32", "default": [1.0]}, {"dtype": "float32", "default": {}},
    {"dtype": "float32", "default": float("nan")}, {"dtype": "float32", "default": float("inf")},
    {"dtype": "float32", "default": -1e39}, {"dtype": "int32", "default": -(2**31) - 1},
    {"dtype": "int32", "default": True},
    {"dtype": ["float32"], "default": 1.0}, {"dtype": None, "default": 1.0}, [], "float32",
])  # fmt: skip
def test_the_manifest_refuses_a_scalar_of_no_dtype_it_holds(widths_manifest, record):
    _refused(widths_manifest, "scalars", {"epsilon": record}, "scalars.epsilon must be")


@pytest.mark.parametrize("dims", [{"N": "9..3", "W": "1..4096"}, {"N": [-3, 9], "W": "1..4096"},
                                  {"N": [1, 2**41], "W": "1..4096"}, {"N": [1.0, 9], "W": "1..4096"},
                                  {"N": "1..99999999999999", "W": "1..4096"}, {"N": [2, 9, 2], "W": "1..4096"},
                                  {"N": [0, 5], "W": "1..4096"}, {"N": "1..65536"}, {"N": True, "W": "1..4096"},
                                  {"N": " " * 100_000, "W": "1..4096"}])  # fmt: skip
def test_the_manifest_refuses_a_dimension_range_that_is_reversed_negative_huge_or_not_integers(widths_manifest, dims):
    _refused(widths_manifest, "dims", dims, r"dims")


def test_the_manifest_refuses_a_keyword_that_is_also_a_runtime_scalar(widths_manifest):
    _refused(widths_manifest, "keywords", {"epsilon": "N"}, "keywords must map at most 16 keywords \\(not constants "
                                                            "or scalars\\)")  # fmt: skip


@pytest.mark.parametrize("args, vectors, why", [
    (["128x64:float16", "64:float32"], lambda v: v | {"arg0": v["arg0"].astype(np.float16)},
     "parameter %x of the IR is 128x64:float32, given 128x64:float16"),
    (["64x64:float32", "64:float32"], lambda v: v | {"arg0": v["arg0"][:64]},
     "parameter %x of the IR is 128x64:float32, given 64x64:float32"),
    (["128x64:float32"], lambda v: {k: a for k, a in v.items() if k != "arg1"},
     "the IR's parameters are x, g; given x"),
])  # fmt: skip
def test_vectors_of_a_record_that_does_not_describe_its_ir_are_invalid(tmp_path, args, vectors, why):
    """``nki-kernels verify --run`` on such a bundle: its vectors fit the manifest's record, not the IR (was a raw
    ValueError or KeyError from the backend)."""
    from hub_client.manifest import parse
    from hub_client.npz import load_npz, npz_bytes
    from hub_client.vectors import run_vectors

    bundle = build_bundle(_package(tmp_path, CONCRETE), benchmarks=False)
    raw = json.loads(bundle.files[MANIFEST])
    record = raw["entry_points"]["rmsnorm"]["specialisations"][0]
    record["args"] = args
    files = dict(bundle.files)
    files[record["test_vectors"]] = npz_bytes(vectors(load_npz(files[record["test_vectors"]])))
    (result,) = run_vectors(parse(dump(raw)), files.__getitem__)
    assert result.status == "invalid" and why in result.detail, result.detail


@pytest.mark.parametrize("line, rows", [(CONCRETE, 128), (WIDTHS, 3), (WIDTHS, 70000)], ids=["ir", "family", "parts"])
def test_an_ir_file_that_is_not_utf8_is_refused(tmp_path, line, rows):
    """Read as UTF-8 whatever the locale; bytes that are not were a raw UnicodeDecodeError on a family's path."""
    from hub_client.manifest import sha256_hex

    bundle = build_bundle(_package(tmp_path / "pkg", line), benchmarks=False)
    (spec,) = bundle.manifest.entry_points["rmsnorm"].specialisations
    bad = b"\xff\xfe" + bundle.files[spec.ir]
    raw = json.loads(bundle.files[MANIFEST])
    raw["files"][spec.ir] = sha256_hex(bad)
    out = bundle.write(tmp_path / "bundle")
    (out / spec.ir).write_bytes(bad)
    (out / MANIFEST).write_bytes(dump(raw))
    cols = 64 if line == CONCRETE else 8
    with pytest.raises(kernels.IRRejectedError, match=r"was refused: not UTF-8 text \(invalid start byte at byte 0\)"):
        kernels.get_local_kernel(out).rmsnorm(np.ones((rows, cols), np.float32), np.ones(cols, np.float32))
