"""Which of several published specialisations holding a call a loader runs (``EntryPoint.route``): one launch
before several, then the fewest launches, then the most specific (fewest symbolic dimensions), and the manifest's
order only for ties. Each case lists the worse choice first, so a loader taking the first match fails it."""

import numpy as np
import pytest

import nki_dsl as nki
from hub_client.entry import EntryPoint
from hub_client.manifest import SpecRecord
from hub_client.package import ArgSpec
from kernels.softmax.kernel import softmax_kernel
from kernels.softmax.widths import softmax_widths


@pytest.fixture(scope="module")
def ir_dir(tmp_path_factory):
    """softmax's IR over rows ``N x 512`` and over ``N x W`` (independent along N in blocks of 128), and at 300x512."""
    root = tmp_path_factory.mktemp("route")
    rows = nki.trace(softmax_kernel, nki.spec(("N", 512), "float32", dims={"N": (1, 65536)}), target="trn2")
    both = nki.trace(softmax_widths, nki.spec(("N", "W"), "float32", dims={"N": (1, 65536), "W": (1, 4096)}),
                     target="trn2")  # fmt: skip
    (root / "rows.nkir").write_text(rows.text)
    (root / "both.nkir").write_text(both.text)
    (root / "one.nkir").write_text(nki.trace(softmax_kernel, nki.spec((300, 512), "float32"), target="trn2").text)
    return root


def _spec(sid: str, arg: str, dims: dict, ir: str) -> SpecRecord:
    return SpecRecord(sid, (ArgSpec.parse(arg),), {}, ir, None, {n: (lo, hi, 1) for n, (lo, hi) in dims.items()})


def _entry(ir_dir, *specs) -> EntryPoint:
    return EntryPoint("softmax", "acme/softmax", ir_dir, specs)


def _x(n: int, w: int = 512):
    return np.zeros((n, w), np.float32)


def test_a_concrete_shape_is_chosen_before_a_family_listed_first(ir_dir):
    entry = _entry(ir_dir, _spec("rows", "N x 512:float32", {"N": (1, 65536)}, "rows.nkir"),
                   SpecRecord("one", (ArgSpec.parse("300x512:float32"),), {}, "one.nkir", None))  # fmt: skip
    how, spec, _ = entry.route(_x(300))
    assert (how, spec.id) == ("ir", "one")
    assert entry.route(_x(301))[1].id == "rows"


def test_the_more_specific_family_is_chosen_before_a_wider_one_listed_first(ir_dir):
    entry = _entry(ir_dir, _spec("any-width", "N x W:float32", {"N": (1, 65536), "W": (1, 4096)}, "both.nkir"),
                   _spec("rows", "N x 512:float32", {"N": (1, 65536)}, "rows.nkir"))  # fmt: skip
    assert entry.route(_x(300))[:2] == ("family", entry.specialisations[1])
    assert entry.route(_x(300, 256))[1].id == "any-width"  # (the only one holding it)


def test_a_family_holding_the_call_is_chosen_before_parts_of_one_listed_first(ir_dir):
    entry = _entry(ir_dir, _spec("short", "N x 512:float32", {"N": (1, 1024)}, "rows.nkir"),
                   _spec("long", "N x 512:float32", {"N": (1, 65536)}, "rows.nkir"))  # fmt: skip
    how, spec, _ = entry.route(_x(3000))
    assert (how, spec.id) == ("family", "long")


def test_the_family_needing_the_fewest_parts_is_chosen(ir_dir):
    """N = 10000 rows: 10 parts of N in 1..1024, 3 of 1..4096 (the first listed), 2 of 1..8192."""
    entry = _entry(ir_dir, _spec("a", "N x 512:float32", {"N": (1, 1024)}, "rows.nkir"),
                   _spec("b", "N x 512:float32", {"N": (1, 8192)}, "rows.nkir"),
                   _spec("c", "N x 512:float32", {"N": (1, 4096)}, "rows.nkir"))  # fmt: skip
    how, spec, (_, over, _) = entry.route(_x(10000))
    assert (how, spec.id, over) == ("parts", "b", {"N": 10000})
    out = entry(np.ones((10000, 512), np.float32), backend="numpy")
    np.testing.assert_allclose(out, np.full((10000, 512), 1 / 512, np.float32), rtol=1e-6)
    shapes = {dict(key[1])["N"] for key in entry._parsed if len(key) == 3}
    assert shapes == {8192, 1808}  # two instances of "b"'s range: the top and the rest


def test_equal_parts_go_to_the_more_specific_family(ir_dir):
    """3 parts either way (N = 10000 over 1..4096); the family fixing the width wins though listed last."""
    entry = _entry(ir_dir, _spec("any-width", "N x W:float32", {"N": (1, 4096), "W": (1, 4096)}, "both.nkir"),
                   _spec("rows", "N x 512:float32", {"N": (1, 4096)}, "rows.nkir"))  # fmt: skip
    assert entry.route(_x(10000))[:2] == ("parts", entry.specialisations[1])
