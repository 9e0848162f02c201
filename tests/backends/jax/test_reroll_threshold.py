"""The re-rolling threshold (``reroll.MIN_TRIPS``) holds for the runs tried after a candidate fails its exact
check: the run without its odd first unit is re-rolled only when it still has ``MIN_TRIPS`` units."""

import numpy as np
import pytest

from nki_dsl.backends.jax import batching, reroll
from tests.backends.jax.test_reroll import P, _exps, _loops, _run, _shared_tile


@pytest.fixture(autouse=True)
def _four_trips(monkeypatch):
    monkeypatch.setattr(batching, "ENABLED", False)  # (batching would take these runs first: see test_batching)
    monkeypatch.delenv("NKI_JAX_REROLL_MIN_TRIPS", raising=False)
    monkeypatch.setattr(reroll, "MIN_TRIPS", 4)


@pytest.mark.parametrize("tiles, rolled", [(5, True), (4, False)])
def test_the_run_without_its_first_unit_is_rerolled_only_at_the_threshold(tiles, rolled, monkeypatch):
    # _shared_tile: every unit reads the tile unit 0 made, so the run of all the units fails its check and the
    # run of units 1.. is tried: 4 units (re-rolled, one exp in the loop body beside unit 0's) or 3 (unrolled)
    x = np.random.default_rng(9).standard_normal((tiles * P, 8)).astype(np.float32)
    got, text = _run(_shared_tile, x, monkeypatch=monkeypatch)
    assert (_exps(text), _loops(text)) == ((2, True) if rolled else (tiles, False))
    np.testing.assert_allclose(got, np.exp(x) + np.tile(np.exp(x[:P]), (tiles, 1)), rtol=2e-6)
