"""A careless publisher's kernel.toml, and a hostile manifest's constants: each mistake ends in a ``BundleError``
naming the field and the rule, never a raw ``OverflowError``/``AttributeError``/``TypeError`` from the builder or
the plan, and never a specialisation no call can match (a constant NaN: no value equals it)."""

import json

import pytest

from hub_client.bundle import build_bundle
from hub_client.errors import BundleError
from hub_client.manifest import MANIFEST, dump, parse
from tests.hub.test_runtime_scalars import REQUIRED_LINE, WIDTH_LINE, _package, _required

FIXED = '{ args = ["N x 512:float32", "512:float32"], dims = { N = "1..65536" }, constants = { epsilon = 1e-6 } },'


@pytest.mark.parametrize("line, launcher, why", [
    (REQUIRED_LINE.replace('dtype = "float32", sample = 0.01', 'dtype = "int32", sample = 1099511627776'), _required,
     "sample = a finite number } it holds (for an int32, an int within its range)"),
    (FIXED.replace("epsilon = 1e-6", "epsilon = nan"), lambda s: s, "constants must be a table of numbers (not NaN)"),
    (FIXED.replace("epsilon = 1e-6", "epsilon = [nan, 1e-6]"), lambda s: s, "numbers (not NaN)"),
    (FIXED.replace("epsilon = 1e-6", 'epsilon = 1e-6, mode = "' + "a" * 257 + '"'), lambda s: s,
     "strings (at most 256 characters)"),
    (FIXED.replace("epsilon = 1e-6", 'epsilon = 1e-6, "a b" = 1'), lambda s: s, "named by identifiers"),
    (FIXED.replace("epsilon = 1e-6", 'epsilon = 1e-6, mode = "fast"'), lambda s: s,
     "kernel.toml gives the plan 'mode', which is no keyword parameter of launcher:plan_rmsnorm"),
    (FIXED.replace("epsilon = 1e-6", "N = 5, epsilon = 1e-6"), lambda s: s, "'N' is both a dimension and a constant"),
    (WIDTH_LINE.replace("scalars = { epsilon", "scalars = { W"), lambda s: s,
     "'W' is both a dimension and a runtime scalar"),
    ('"hello",', lambda s: s, "each of specialisations must be a table such as { args = [...] }, got 'hello'"),
    ('{ args = "N x 512:float32", dims = { N = "1..65536" } },', lambda s: s, "a specialisation's args must be a list"),
    (WIDTH_LINE, lambda s: s.replace("epsilon=1e-6)", "epsilon=1e39)"),
     "runtime scalar 'epsilon''s default 1e+39 in the plan's signature (launcher:plan_rmsnorm) is not a finite number "
     "float32 holds"),
])  # fmt: skip
def test_a_careless_kernel_toml_is_refused_naming_the_rule(tmp_path, line, launcher, why):
    with pytest.raises(BundleError) as e:
        build_bundle(_package(tmp_path, line, launcher), benchmarks=False)
    assert why in str(e.value), str(e.value)
    assert len(str(e.value)) < 600


def test_an_entry_point_that_is_not_a_table_is_refused(tmp_path):
    root = _package(tmp_path)
    toml = (root / "kernel.toml").read_text()
    (root / "kernel.toml").write_text(toml + '\n[entry-points]\nother = "plan reference"\n')
    with pytest.raises(BundleError, match=r"\[entry-points.other\]: needs an identifier name, plan"):
        build_bundle(root, benchmarks=False)


@pytest.mark.parametrize("constants", [{"epsilon": float("nan")}, {"strategy": [float("nan"), "auto"]}])
def test_the_manifest_refuses_a_nan_constant(tmp_path, constants):
    raw = json.loads(build_bundle(_package(tmp_path), benchmarks=False).files[MANIFEST])
    raw["entry_points"]["rmsnorm"]["specialisations"][0]["constants"] = constants
    data = dump(raw)
    assert b"NaN" in data  # (JSON's writer and reader both take it)
    with pytest.raises(BundleError, match=r"never NaN"):
        parse(data)
