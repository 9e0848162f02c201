"""Row softmax kernels (the library's kernels/softmax and the NKI-style variants in
tests/kernels/nki_style/softmax.py) against the NumPy formula, including a row count that is not a multiple of 128
(masked last tile) and low-precision inputs."""

import numpy as np
import pytest

from kernels.softmax.kernel import softmax_kernel
from tests.kernels import formulas as ref
from tests.kernels.nki_style import softmax

KERNELS = [softmax_kernel, softmax.softmax_builtin_kernel, softmax.softmax_online_kernel,
           softmax.softmax_isa_kernel]  # fmt: skip
# Low precision: inputs and the output (and, in softmax_kernel, the tutorial's intermediate tiles) are rounded
# to 8 (bf16) / 11 (fp16) mantissa bits, a few roundings of 2^-8 / 2^-11 relative each; probabilities far below
# the row maximum are compared absolutely (fp16 flushes them to subnormals or 0).
TOLERANCE = {"fp32": (1e-5, 1e-7), "bf16": (2e-2, 2e-3), "fp16": (1e-2, 5e-4)}


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("rows", [128, 300])  # 300: two full tiles and a masked tile of 44 rows
def test_softmax_fp32(kernel, rows):
    x = ref.randn(np.random.default_rng(rows), (rows, 1024), scale=3.0)
    ref.assert_close(kernel(x), ref.softmax(x), *TOLERANCE["fp32"])


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_softmax_low_precision(kernel, precision):
    x = ref.randn(np.random.default_rng(1), (200, 512), ref.LOW_PRECISION[precision], scale=2.0)
    out = kernel(x)
    assert out.dtype == x.dtype
    ref.assert_close(out, ref.softmax(x), *TOLERANCE[precision])


def test_online_softmax_survives_large_logits():
    # Logits of 1e4 overflow exp unless the running max is subtracted; blocks see different maxima, so the
    # running sum must be rescaled when the max grows (the online-softmax recurrence).
    rng = np.random.default_rng(2)
    x = ref.randn(rng, (130, 2048), scale=1.0)
    x[:, 1500] += 1e4
    x[:, 10] += 5e3
    ref.assert_close(softmax.softmax_online_kernel(x), ref.softmax(x), *TOLERANCE["fp32"])
