"""A runtime scalar on a concrete specialisation (no shape family): the bundle builder traces the plan with the
scalar's default and again with another value, so a plan that hard-codes the default is refused there too, and the
published IR takes the value after the arrays. (tests/hub/test_runtime_scalars.py covers shape families.)"""

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.errors import BundleError
from tests.hub.test_runtime_scalars import _package

CONCRETE_LINE = '{ args = ["5 x 33:float32", "33:float32"], scalars = { epsilon = "float32" } },'
# rmsnorm's plan takes epsilon at run time only for a shape family: here, for every shape
RUNTIME_EPSILON = ("if _static(x.shape[1]) is None:", "if True:")
DEFAULT_ONLY = ("np.full((1,), epsilon, np.float32)", "np.full((1,), 1e-6, np.float32)")


def _launcher(*edits):
    def edit(text):
        for old, new in edits:
            assert old in text
            text = text.replace(old, new)
        return text

    return edit


def test_a_concrete_specialisation_takes_the_scalar_at_run_time(tmp_path):
    bundle = build_bundle(_package(tmp_path, CONCRETE_LINE, _launcher(RUNTIME_EPSILON)), benchmarks=False)
    (spec,) = bundle.manifest.entry_points["rmsnorm"].specialisations
    assert spec.scalars == {"epsilon": ("float32", 1e-6)} and not spec.dims
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"))
    x, g = np.random.default_rng(2).standard_normal((5, 33)).astype(np.float32), np.ones(33, np.float32)
    for eps in (1e-6, 0.25):
        want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + eps)
        np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=eps), want, rtol=1e-5, atol=1e-6)


def test_a_concrete_plan_that_passes_only_the_default_is_refused(tmp_path):
    root = _package(tmp_path, CONCRETE_LINE, _launcher(RUNTIME_EPSILON, DEFAULT_ONLY))
    with pytest.raises(BundleError, match="then epsilon as a one-element float32 array"):
        build_bundle(root, benchmarks=False)
