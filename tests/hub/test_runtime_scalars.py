"""Runtime scalars (``scalars = { epsilon = "float32" }`` in kernel.toml): a keyword the caller may pass any value
of, handed to the specialisation's IR after the arrays as a one-element array, so one published IR serves every
value. The bundle builder checks the plan passes it through (and gives it a default); the manifest records dtype and
default; the loader converts the caller's value or refuses one that is not a number."""

import json
import shutil

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.errors import BundleError, ScalarArgumentError
from hub_client.manifest import MANIFEST, dump, parse
from tests.hub.conftest import RMSNORM

WIDTH_LINE = '{ args = ["N x W:float32", "W:float32"], dims = { N = "1..65536", W = "1..4096" }, ' \
             'scalars = { epsilon = "float32" } },'  # fmt: skip


def _package(tmp_path, toml_line=WIDTH_LINE, launcher=lambda s: s):
    """rmsnorm with one specialisation, ``toml_line``, and its launcher edited by ``launcher``."""
    root = tmp_path / "rmsnorm"
    shutil.copytree(RMSNORM, root, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (root / "kernel.toml").read_text()
    start = toml.index("specialisations = [") + len("specialisations = [")
    (root / "kernel.toml").write_text(toml[:start] + "\n    " + toml_line + toml[toml.index("\n]", start):])
    text = (root / "launcher.py").read_text()
    (root / "launcher.py").write_text(launcher(text))
    return root


def test_the_manifest_records_the_scalar_and_the_ir_takes_it_last(tmp_path):
    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    (spec,) = bundle.manifest.entry_points["rmsnorm"].specialisations
    assert spec.scalars == {"epsilon": ("float32", 1e-6)} and spec.constants == {}
    assert spec.id.endswith("__epsilon-float32")
    head = bundle.files[spec.ir].decode().split("\n")[0]
    assert head == "kernel rmsnorm_widths(%x: f32[$N, $W] hbm, %g: f32[$W] hbm, %epsilon: f32[1] hbm) -> (%0) {"


def test_any_value_runs_and_a_non_number_is_refused(tmp_path):
    k = kernels.get_local_kernel(build_bundle(_package(tmp_path), benchmarks=False).write(tmp_path / "b"))
    x, g = np.random.default_rng(1).standard_normal((5, 33)).astype(np.float32), np.ones(33, np.float32)
    for eps in (1e-6, 0.25, np.float64(3.0), 2):
        want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + float(eps))
        np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=eps), want, rtol=1e-5, atol=1e-6)
    for bad in ("1e-6", None, True, np.ones(1)):
        with pytest.raises(ScalarArgumentError, match="epsilon must be a real number"):
            k.rmsnorm(x, g, epsilon=bad)


def test_a_plan_that_does_not_pass_the_value_is_refused(tmp_path):
    fixed = _package(tmp_path, launcher=lambda s: s.replace("np.full((1,), epsilon, np.float32)",
                                                            "np.full((1,), 1e-6, np.float32)"))  # fmt: skip
    with pytest.raises(BundleError, match="then epsilon as a one-element float32 array"):
        build_bundle(fixed, benchmarks=False)


def test_a_scalar_needs_a_default_and_a_name_of_its_own(tmp_path):
    no_default = _package(tmp_path / "a", launcher=lambda s: s.replace("def plan_rmsnorm(x, g, epsilon=1e-6)",
                                                                       "def plan_rmsnorm(x, g, epsilon)"))  # fmt: skip
    with pytest.raises(BundleError, match="needs a numeric default"):
        build_bundle(no_default, benchmarks=False)
    both = WIDTH_LINE.replace("scalars =", "constants = { epsilon = 1e-6 }, scalars =")
    with pytest.raises(BundleError, match="both a constant and a runtime scalar"):
        build_bundle(_package(tmp_path / "b", both), benchmarks=False)
    with pytest.raises(BundleError, match="scalars must be a table"):
        build_bundle(_package(tmp_path / "c", WIDTH_LINE.replace('"float32" }', '"float64" }')), benchmarks=False)


@pytest.mark.parametrize("record", [{"dtype": "float64", "default": 1e-6}, {"dtype": "float32"},
                                    {"dtype": "float32", "default": "1e-6"}, {"dtype": "int32", "default": 0.5},
                                    {"dtype": "float32", "default": 1e-6, "extra": 1},
                                    {"dtype": "int32", "default": 1 << 31},  # would overflow the loader's int32 array
                                    {"dtype": "float32", "default": 1e39}])  # past float32: inf  # fmt: skip
def test_the_manifest_refuses_a_malformed_scalar(tmp_path, record):
    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    raw = json.loads(bundle.files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0]["scalars"] = {"epsilon": record}
    with pytest.raises(BundleError, match="scalars.epsilon must be"):
        parse(dump(raw))


def test_a_hostile_scalar_name_is_refused_without_being_echoed_whole(tmp_path):
    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    raw = json.loads(bundle.files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0]["scalars"] = {"x" * 100_000: {"dtype": "float32",
                                                                                       "default": 1e-6}}
    with pytest.raises(BundleError, match="scalars.x+[.][.][.] must be") as refused:
        parse(dump(raw))
    assert len(str(refused.value)) < 400


def _rms(x, eps):
    return x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + float(eps))


def test_a_scalar_passed_by_position_binds_to_the_plans_parameter_at_that_position(tmp_path):
    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    assert bundle.manifest.entry_points["rmsnorm"].parameters == ("x", "g", "epsilon")
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"))
    x, g = np.random.default_rng(2).standard_normal((3, 40)).astype(np.float32), np.ones(40, np.float32)
    np.testing.assert_allclose(k.rmsnorm(x, g, 0.5), _rms(x, 0.5), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(k.rmsnorm(x, g, 0.5), k.rmsnorm(x, g, epsilon=0.5))
    with pytest.raises(TypeError, match=r"got multiple values for argument 'epsilon'"):
        k.rmsnorm(x, g, 0.5, epsilon=0.5)
    with pytest.raises(TypeError, match=r"takes at most 3 positional arguments \(x, g, epsilon\), got 4"):
        k.rmsnorm(x, g, 0.5, 7)
    with pytest.raises(ScalarArgumentError, match="epsilon must be a real number"):
        k.rmsnorm(x, g, "0.5")


def test_a_constant_passed_by_position_matches_the_specialisation_that_fixes_it(tmp_path):
    line = '{ args = ["N x 512:float32", "512:float32"], dims = { N = "1..65536" }, constants = { epsilon = 1e-6 } },'
    k = kernels.get_local_kernel(build_bundle(_package(tmp_path, line), benchmarks=False).write(tmp_path / "b"))
    x, g = np.random.default_rng(3).standard_normal((2, 512)).astype(np.float32), np.ones(512, np.float32)
    np.testing.assert_allclose(k.rmsnorm(x, g, 1e-6), _rms(x, 1e-6), rtol=1e-5, atol=1e-6)
    with pytest.raises(kernels.NoSpecialisationError, match=r"epsilon=0\.5"):  # not the fixed value: no match
        k.rmsnorm(x, g, 0.5)


def test_a_manifest_without_parameters_takes_keywords_only(tmp_path):
    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    raw = json.loads(bundle.files[MANIFEST])
    del raw["entry_points"]["rmsnorm"]["parameters"]  # as written before positions were recorded
    bundle.files[MANIFEST] = dump(raw)
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"))
    x, g = np.ones((2, 8), np.float32), np.ones(8, np.float32)
    np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=0.5), _rms(x, 0.5), rtol=1e-5)
    with pytest.raises(kernels.NoSpecialisationError):
        k.rmsnorm(x, g, 0.5)


MALFORMED_PARAMETERS = ["x, g", ["x", "x"], ["x", 1], ["1x"], ["x" * 65], [f"p{i}" for i in range(65)], [["x"]]]
MALFORMED_DEFAULTS = [["epsilon"], {"epsilon": [1]}, {"epsilon": {"a": 1}}, {"1x": 1}, {"x" * 65: 1}, {"s": "x" * 257},
                      {"e": float("nan")}, {f"p{i}": 1 for i in range(65)}]  # fmt: skip


@pytest.mark.parametrize("field, value, rule",
                         [("parameters", v, "must be a list of at most 64") for v in MALFORMED_PARAMETERS]
                         + [("defaults", v, "must map at most 64") for v in MALFORMED_DEFAULTS])  # fmt: skip
def test_the_manifest_refuses_a_malformed_entry_point_field(tmp_path, field, value, rule):
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    raw["entry_points"]["rmsnorm"][field] = value
    with pytest.raises(BundleError, match=rf"entry_points\.rmsnorm\.{field} {rule}") as e:
        parse(dump(raw))
    assert len(str(e.value)) < 300


@pytest.mark.parametrize("scalar, detail", [(np.ones(2, np.float32), "a runtime scalar is one element"),
                                            (np.ones(1, np.float64), "runtime scalar epsilon is 1:float32")])
def test_test_vectors_with_a_malformed_scalar_are_invalid(tmp_path, scalar, detail):
    """The shipped vectors' scalar must be what the IR's parameter of that name takes (found by name: the manifest
    keeps its scalars in sorted order, the vectors in the kernel's)."""
    from hub_client.npz import load_npz, npz_bytes
    from hub_client.vectors import run_vectors

    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    (spec,) = bundle.manifest.entry_points["rmsnorm"].specialisations
    assert [r.status for r in run_vectors(bundle.manifest, bundle.files.__getitem__)] == ["ok"]
    v = load_npz(bundle.files[spec.test_vectors])
    v["arg2"] = scalar
    files = dict(bundle.files, **{spec.test_vectors: npz_bytes(v)})
    (result,) = run_vectors(bundle.manifest, files.__getitem__)
    assert (result.status, result.detail) == ("invalid", f"arg2 is {'x'.join(map(str, scalar.shape))}:"
                                                         f"{scalar.dtype}, {detail}")  # fmt: skip


# -- a required runtime scalar (the plan's default None; kernel.toml's sample) and a constant listing values ---------

REQUIRED_LINE = WIDTH_LINE.replace('scalars = { epsilon = "float32" }',
                                   'scalars = { epsilon = { dtype = "float32", sample = 0.01 } }')  # fmt: skip


def _required(s):
    return s.replace("def plan_rmsnorm(x, g, epsilon=1e-6)", "def plan_rmsnorm(x, g, epsilon=None)")


def test_a_required_scalar_is_recorded_null_and_a_call_without_it_is_not_matched(tmp_path):
    """A plan whose default is None (vit-attn's scale: None means something the IR cannot take as a number) makes
    the scalar required: the builder checks the kernel at kernel.toml's sample, the manifest records default null,
    a call that gives the value runs and one that leaves it out matches another specialisation, or none."""
    bundle = build_bundle(_package(tmp_path, REQUIRED_LINE, _required), benchmarks=False)
    (spec,) = bundle.manifest.entry_points["rmsnorm"].specialisations
    assert spec.scalars == {"epsilon": ("float32", None)}
    record = json.loads(bundle.files[MANIFEST])["entry_points"]["rmsnorm"]["specialisations"][0]
    assert record["scalars"] == {"epsilon": {"dtype": "float32", "default": None}}
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"))
    x, g = np.random.default_rng(4).standard_normal((3, 20)).astype(np.float32), np.ones(20, np.float32)
    np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=0.5), _rms(x, 0.5), rtol=1e-5, atol=1e-6)
    with pytest.raises(kernels.NoSpecialisationError, match=r"epsilon: float32 \(any value, required\)"):
        k.rmsnorm(x, g)
    for bad in (float("inf"), float("nan"), 1e39):  # not a float32: refused, as a manifest default would be
        with pytest.raises(ScalarArgumentError, match="epsilon must be a real number float32 holds"):
            k.rmsnorm(x, g, epsilon=bad)


def test_a_sample_is_only_for_a_required_scalar_and_a_required_scalar_needs_one(tmp_path):
    with pytest.raises(BundleError, match="has a sample, which is for a scalar the plan's signature"):
        build_bundle(_package(tmp_path / "a", REQUIRED_LINE), benchmarks=False)  # the plan's default is 1e-6
    with pytest.raises(BundleError, match="or the default None and a sample in kernel.toml"):
        build_bundle(_package(tmp_path / "b", launcher=_required), benchmarks=False)
    for i, (dtype, sample) in enumerate([("float32", '"0.01"'), ("float32", "nan"), ("float32", "inf"),
                                         ("float32", "true"), ("int32", "0.5")]):  # fmt: skip
        line = REQUIRED_LINE.replace('dtype = "float32", sample = 0.01', f'dtype = "{dtype}", sample = {sample}')
        with pytest.raises(BundleError, match="or to { dtype = .., sample = a finite number }"):
            build_bundle(_package(tmp_path / f"c{i}", line), benchmarks=False)


def test_a_constant_listing_values_the_plan_treats_apart_is_refused(tmp_path):
    """``constants = { epsilon = [1e-6, 1e-5] }`` would let a call with either run one IR; the plan bakes epsilon into
    the concrete kernel, so the two make different kernel calls and the builder refuses the list."""
    line = ('{ args = ["N x 512:float32", "512:float32"], dims = { N = "1..65536" }, '
            'constants = { epsilon = [1e-6, 1e-5] } },')
    with pytest.raises(BundleError, match=r"epsilon=1e-05 makes another kernel call than epsilon=1e-06"):
        build_bundle(_package(tmp_path, line), benchmarks=False)


@pytest.mark.parametrize("constants", [{"strategy": [[["auto"]]]}, {"strategy": []}, {"strategy": ["auto", "auto"]},
                                       {"strategy": [str(i) for i in range(17)]}, {"strategy": {"auto": 1}},
                                       {"strategy": "x" * 257}, {"epsilon": None}, {"evict": [[]]},
                                       {"evict": [[1]]}, {"evict": [["scalar"], ["scalar"]]},
                                       {"evict": [["x" * 257]]}, {"evict": [["scalar"] * 17]},
                                       {"evict": ["auto", ["scalar", None]]}])  # fmt: skip
def test_the_manifest_refuses_malformed_constants(tmp_path, constants):
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0]["constants"] = constants
    with pytest.raises(BundleError, match=r"constants must map names to a number, a string of at most 256") as e:
        parse(dump(raw))
    assert len(str(e.value)) < 300


def test_a_listed_sequence_of_strings_is_a_tuple_a_call_may_pass(tmp_path):
    """``evict = ["auto", ["scalar", "vector"]]``: "auto" or the sequence (scalar, vector), kept as a tuple."""
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0]["constants"] = {"evict": ["auto", ["scalar", "vector"]]}
    spec = parse(dump(raw)).entry_points["rmsnorm"].specialisations[0]
    assert spec.constants == {"evict": ("auto", ("scalar", "vector"))}


def test_the_manifest_refuses_too_many_scalars(tmp_path):
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0]["scalars"] = {
        f"s{i}": {"dtype": "float32", "default": 0.0} for i in range(17)}  # fmt: skip
    with pytest.raises(BundleError, match="scalars must be an object of at most 16 scalars"):
        parse(dump(raw))


def test_the_manifest_records_the_plans_keyword_defaults(tmp_path):
    bundle = build_bundle(_package(tmp_path), benchmarks=False)
    assert bundle.manifest.entry_points["rmsnorm"].defaults == {"epsilon": 1e-6}
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"))
    x, g = np.ones((2, 8), np.float32), np.ones(8, np.float32)
    assert k.rmsnorm.route(x, g, epsilon=1e-6) == k.rmsnorm.route(x, g)




@pytest.mark.parametrize("requires", ["epsilon", ["epsilon"], [1]])
def test_the_manifest_refuses_requires_naming_no_constant(tmp_path, requires):
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    record = raw["entry_points"]["rmsnorm"]["specialisations"][0]
    assert "epsilon" not in record["constants"]
    record["requires"] = requires
    with pytest.raises(BundleError, match=r"specialisations\[\]\.requires must list constants of the specialisation"):
        parse(dump(raw))


def test_the_manifest_refuses_a_required_constant_listed_twice(tmp_path):
    """A record's ``requires`` names each constant once, so its length is bounded by the constants (a refusal walks
    it on every call no specialisation holds), not by the manifest's 16 MiB."""
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    record = raw["entry_points"]["rmsnorm"]["specialisations"][0]
    record["constants"]["mode"] = "fast"
    record["requires"] = ["mode"] * 100_000
    with pytest.raises(BundleError, match=r"requires must list constants of the specialisation, each once"):
        parse(dump(raw))
    record["requires"] = ["mode"]
    assert parse(dump(raw)).entry_points["rmsnorm"].specialisations[0].requires == ("mode",)
