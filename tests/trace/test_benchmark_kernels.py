"""The kernels the speed benchmark times compute what their NumPy twins compute (a benchmark of a wrong or
rejected kernel would measure nothing)."""

import numpy as np
import pytest

from benchmarks.reference_cases import cases

CASES = cases(np.random.default_rng(0))


@pytest.mark.parametrize("name, kernel, np_fn, args", CASES, ids=[c[0] for c in CASES])
def test_benchmark_kernel_matches_numpy(name, kernel, np_fn, args):
    np.testing.assert_allclose(kernel(*args), np_fn(*args), rtol=1e-4, atol=1e-4)
