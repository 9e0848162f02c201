"""The fused Mamba selective scan against the recurrence computed step by step in float64.

fp32: the scan multiplies by exp(delta * A) < 1 and adds, so rounding errors do not grow; sums over 4-8 states
of O(1) terms: rtol/atol 1e-5. bf16: the tutorial keeps deltaA, deltaBu, the scan output and the state sum in
the input dtype (2^-9 relative each, plus bf16 inputs feeding exp): rtol/atol 5e-2 on outputs of O(1).
"""

import numpy as np
import pytest

from tests.kernels import formulas as ref
from tests.kernels.nki_style import mamba


def _inputs(batch, channels, seq, state, dtype=ref.F32, seed=0):
    rng = np.random.default_rng(seed)
    delta = rng.uniform(0.01, 0.2, (batch, channels, seq)).astype(dtype)  # softplus-ed step sizes
    u = ref.randn(rng, (batch, channels, seq), dtype)
    A = (-rng.uniform(0.5, 4.0, (channels, state))).astype(dtype)  # negative: a decaying state
    B = ref.randn(rng, (batch, state, seq), dtype)
    C = ref.randn(rng, (batch, state, seq), dtype)
    return delta, u, A, B, C


@pytest.mark.parametrize("kernel", [mamba.mamba_v1, mamba.mamba_v2], ids=lambda k: k.__name__)
def test_selective_scan_fp32(kernel):
    args = _inputs(2, 256, 512, 4)
    ref.assert_close(kernel(*args), ref.selective_scan(*args), 1e-5, 1e-5)


def test_chunked_scan_carries_state():
    # Chunks of 64 columns: seven hand-offs of the state through the scan's initial value.
    args = _inputs(1, 128, 448, 8, seed=1)
    ref.assert_close(mamba.mamba_v2(*args, seq_chunk=64), ref.selective_scan(*args), 1e-5, 1e-5)


@pytest.mark.parametrize("kernel", [mamba.mamba_v1, mamba.mamba_v2], ids=lambda k: k.__name__)
def test_selective_scan_bf16(kernel):
    args = _inputs(1, 128, 256, 4, ref.LOW_PRECISION["bf16"], seed=2)
    out = kernel(*args)
    assert out.dtype == args[0].dtype
    ref.assert_close(out, ref.selective_scan(*args), 5e-2, 5e-2)
