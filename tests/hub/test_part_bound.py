"""A call run in parts (``hub_client/chunks.py``) runs as at most ``chunks.MAX_PARTS`` instances: the caller's
arrays are untrusted, and a broadcast NumPy view of 2**40 rows costs no memory yet would be millions of instances.
A call above the bound is refused before any part runs (counted here: no backend is ever reached), on every
backend, naming the kernel, the dimension, its size, the argument it is an axis of and the bound."""

from types import SimpleNamespace

import numpy as np
import pytest

import kernels
from hub_client import chunks
from hub_client.bundle import build_bundle
from hub_client.entry import EntryPoint
from hub_client.errors import NoSpecialisationError
from hub_client.publish import publish
from tests.hub.conftest import settings
from tests.hub.library_packages import families_only

TOP = 300  # the family's N range 1..300; softmax's rows come in 128-row tiles, so its parts are 256 rows


@pytest.fixture(scope="module")
def softmax_rows(tmp_path_factory):
    root = families_only("softmax", tmp_path_factory.mktemp("bound"), {"softmax"},
                         lambda ln: '"N x 512:float32"' in ln)  # fmt: skip
    toml = root / "kernel.toml"
    toml.write_text(toml.read_text().replace('N = "1..65536"', f'N = "1..{TOP}"'))
    return build_bundle(root, benchmarks=False)


@pytest.fixture
def runs(monkeypatch):
    """The instances that reached a backend."""
    seen = []
    original = EntryPoint._run
    monkeypatch.setattr(EntryPoint, "_run", lambda self, *a: seen.append(a) or original(self, *a))
    return seen


def _rows(n: int):
    return np.broadcast_to(np.ones((1, 512), np.float32), (n, 512))  # (no memory for the rows)


@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_a_broadcast_view_of_2_40_rows_is_refused_before_any_part_runs(registry, softmax_rows, runs, backend):
    k = _kernel(softmax_rows)
    with pytest.raises(NoSpecialisationError) as e:
        k.softmax(_rows(2**40), backend=backend)
    text = str(e.value)
    assert "acme/softmax-bound@1.0.0: no published specialisation of softmax" in text
    # refused on the count without the proof's 128-row blocks (a lower bound), before the IR is even parsed
    assert f"N = {2**40} in {-(-(2**40) // TOP):,} parts of at most {TOP}" in text
    assert "N is axis 0 of argument 0 x (N x 512:float32)" in text and f"more than the {chunks.MAX_PARTS}" in text
    assert runs == []


def test_one_part_over_the_bound_is_refused_and_the_bound_itself_runs(registry, softmax_rows, runs):
    k = _kernel(softmax_rows)
    at = chunks.MAX_PARTS * 256  # MAX_PARTS instances of 256 rows (the top rounded down to the 128-row tile)
    how, _, (_, over, proved) = k.softmax.route(_rows(at))
    assert how == "parts" and len(chunks.sizes(at, 1, TOP, 1, proved["N"].block)) == chunks.MAX_PARTS
    with pytest.raises(NoSpecialisationError, match=f"N = {at + 1} in {chunks.MAX_PARTS + 1:,} parts"):
        k.softmax(_rows(at + 1), backend="numpy")  # (the old code ran every one of them)
    assert runs == []


def _kernel(bundle):
    publish(bundle, "acme/softmax-bound", settings())  # (the registry is each test's own)
    return kernels.get_kernel("acme/softmax-bound", version=1)


def test_chunks_run_bounds_the_product_over_every_dimension_cut_before_calling():
    """Two dimensions of 65 and 64 parts are 4160 instances: refused though each alone is within the bound."""
    assert 65 * 64 > chunks.MAX_PARTS >= 65
    calls = []
    axes = {"B": SimpleNamespace(block=1, params=(0,), outputs=(0,)), "H": SimpleNamespace(block=1, params=(1,),
                                                                                          outputs=(1,))}  # fmt: skip
    with pytest.raises(NoSpecialisationError, match=r"B = 65 in 65 parts of at most 1 x H = 64 in 64 parts .* 4,160 "):
        chunks.run(calls.append, (np.zeros((65, 64)),), {"B": (65, 1, 1, 1), "H": (64, 1, 1, 1)}, axes, "k")
    assert calls == []


def test_count_is_the_length_of_sizes_and_sizes_never_lists_more_than_the_bound():
    for n, lo, hi, step, block in [(70000, 1, 65536, 1, 128), (9, 3, 4, 1, 1), (5, 2, 3, 1, 2), (1000, 1, 256, 1, 1),
                                   (260, 8, 256, 4, 1), (512, 1, 256, 1, 1)]:  # fmt: skip
        assert chunks.count(n, lo, hi, step, block) == len(chunks.sizes(n, lo, hi, step, block))
    with pytest.raises(ValueError, match="more than MAX_PARTS"):
        chunks.sizes(2**40, 1, 65536, 1, 128)
