"""The concrete linear (``linear(x, w)`` imported directly: the trusted path) runs at every shape a published width
family takes (``widths.width_boxes``), as the Hub's family instance of that shape does. Its own schedule's buffers
beside the resident weight (the prologue's result slots, the x rows ring, x^T) take more SBUF than the family's one
row tile at a time, so near the top of a box (float32 K 1152 x N 5120 reached 271.5 KiB per partition) the kernel
runs the family's schedule instead (``kernel.fits_resident``, decided from M, K, N, the dtype and the epilogue)."""

import numpy as np
import pytest

import nki_dsl as nki
from kernels.linear import reference
from kernels.linear.kernel import fits_resident, linear_kernel, resident_sbuf_bytes
from kernels.linear.launcher import linear
from kernels.linear.widths import width_boxes

BF16 = nki.language.bfloat16
DTYPES = {"float32": np.float32, "bfloat16": BF16}
EPILOGUES = ("none", "bias", "gelu", "residual")
ROWS = (3, 385)  # every tile a prologue tile (_streamed); the prologue, then a group with a ragged last tile


def _corners(box):
    """A box's four corners and one point just inside its top corner."""
    (k0, k1), (n0, n1) = box
    return [(k, n) for k in (k0, k1) for n in (n0, n1)] + [(max(k0, k1 - 1), max(n0, n1 - 1))]


def _specs(dtype, epilogue, m, k, n):
    shapes = [(m, k), (k, n)] + [(n,)] * (epilogue != "none") + [(m, n)] * (epilogue == "residual")
    return [nki.spec(s, dtype) for s in shapes]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_the_concrete_kernel_fits_sbuf_at_every_corner_of_every_width_box(dtype, epilogue):
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    for box in width_boxes(itemsize, False, epilogue):
        for k, n in _corners(box):
            for m in ROWS:
                nki.trace(linear_kernel, *_specs(dtype, epilogue, m, k, n), target="trn2", epilogue=epilogue)


def _arrays(dtype, epilogue, m, k, n, rng):
    cast = lambda a: a.astype(np.float32).astype(DTYPES[dtype])  # noqa: E731
    x, w = cast(rng.standard_normal((m, k))), cast(rng.standard_normal((k, n)) / np.sqrt(k))
    b = cast(rng.standard_normal(n)) if epilogue != "none" else None
    residual = cast(rng.standard_normal((m, n))) if epilogue == "residual" else None
    return x, w, b, residual


def _tops(dtype, marks=()):
    return [pytest.param(dtype, e, 385, box[0][1], box[1][1], marks=marks, id=f"{dtype}-{e}-{box[0][1]}x{box[1][1]}")
            for e in EPILOGUES for box in width_boxes(np.dtype(DTYPES[dtype]).itemsize, False, e)]  # fmt: skip


# the shape reported (271.5 KiB of SBUF in the kernel's own schedule), then every box's top corner; bfloat16's (x^T
# by DMA transpose, a smaller footprint beside the same weight bytes) with the slow tests
TOPS = [pytest.param("float32", "none", 385, 1152, 5120, id="reported")] + _tops("float32")
TOPS += _tops("bfloat16", pytest.mark.slow)


@pytest.mark.parametrize("dtype, epilogue, m, k, n", TOPS)
def test_the_concrete_launcher_agrees_with_the_reference_at_each_box_top(dtype, epilogue, m, k, n):
    x, w, b, residual = _arrays(dtype, epilogue, m, k, n, np.random.default_rng(k + n))
    got = np.asarray(linear(x, w, b, residual, epilogue), np.float64)
    want = np.asarray(reference.linear(x, w, b, residual, epilogue), np.float64)
    tol = 2e-2 if dtype == "bfloat16" else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=4 * tol)


def test_the_schedule_choice_is_arithmetic_and_keeps_the_common_shapes_on_their_own_schedule():
    """The choice is a bound on the kernel's own schedule's buffers, not a trace: the ViT linears (bf16, and fp32 at
    batch 1) keep their own schedule; the reported shape and the fp32 box tops take the family's."""
    for m, k, n in ((197, 768, 2304), (1576, 768, 3072), (1576, 3072, 768), (1576, 1024, 4096), (1576, 4096, 1024)):
        for epilogue in EPILOGUES:
            assert fits_resident(m, k, n, 2, epilogue, "dma")
    assert fits_resident(197, 768, 2304, 4, "bias", "rows")
    assert not fits_resident(385, 1152, 5120, 4, "none", "rows")
    assert resident_sbuf_bytes(385, 1152, 5120, 4, "none", "rows") > 224 * 1024
