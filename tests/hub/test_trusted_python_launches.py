"""A trusted call no published specialisation holds runs the publisher's plan (``EntryPoint._run_python``): its
launch may be a kernel or a kernel with a launch grid (``kernel[1]``), and it may pass arrays by keyword; the
arrays reach the kernel's parameters by name either way."""

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from tests.hub.test_runtime_scalars import _package

PLAN = 'return rmsnorm_kernel, (x, g), {"epsilon": float(epsilon)}'  # rmsnorm's plan for a concrete row length


@pytest.mark.parametrize("launch", ["rmsnorm_kernel", "rmsnorm_kernel[1]"])
def test_a_trusted_plan_passing_an_array_by_keyword_runs(tmp_path, launch):
    def keyword_g(text):
        assert PLAN in text
        return text.replace(PLAN, f'return {launch}, (x,), {{"g": g, "epsilon": float(epsilon)}}')

    # published: the row-length family 1..4096 (the plan's family path, unchanged); 4200 columns are not in it
    bundle = build_bundle(_package(tmp_path, launcher=keyword_g), benchmarks=False)
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"), trust_remote_code=True)
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((5, 4200)).astype(np.float32), np.linspace(0.5, 1.5, 4200).astype(np.float32)
    assert k.rmsnorm.route(x, g)[0] == "python"
    want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + 0.5) * g
    np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=0.5), want, rtol=1e-5, atol=1e-6)
