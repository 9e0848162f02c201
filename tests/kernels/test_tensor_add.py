"""Tensor addition kernels: one tile, an SPMD grid of [128, 512] tiles (also spread over two NeuronCores with
``nl.nc``), and ragged shapes handled by masks. Addition is exact in fp32 and rounds once in bf16."""

import numpy as np
import pytest

from tests.kernels import formulas as ref
from tests.kernels.nki_style import tensor_add


def _pair(shape, dtype=ref.F32, seed=0):
    rng = np.random.default_rng(seed)
    return ref.randn(rng, shape, dtype), ref.randn(rng, shape, dtype)


def test_single_tile():
    a, b = _pair((100, 700))
    ref.assert_close(tensor_add.nki_tensor_add_kernel(a, b), ref.f64(a) + ref.f64(b), 1e-7, 0)


@pytest.mark.parametrize("launch", [tensor_add.nki_tensor_add, tensor_add.nki_tensor_add_nc2])
def test_spmd_grid(launch):
    a, b = _pair((512, 1536))  # grid [4, 3] (or [nc(2) * 2, 3]): every program writes its own tile
    ref.assert_close(launch(a, b), ref.f64(a) + ref.f64(b), 1e-7, 0)


def test_spmd_grid_bf16():
    # fp32 sum of two bf16 values rounded once to bf16: within half a bf16 ulp (2^-9 relative).
    a, b = _pair((256, 1024), ref.LOW_PRECISION["bf16"])
    out = tensor_add.nki_tensor_add(a, b)
    assert out.dtype == a.dtype
    ref.assert_close(out, ref.f64(a) + ref.f64(b), 2.0**-8, 1e-30)


@pytest.mark.parametrize("shape", [(1, 1), (127, 511), (129, 513), (300, 1100)])
def test_ragged_edges(shape):
    a, b = _pair(shape, seed=sum(shape))
    ref.assert_close(tensor_add.nki_tensor_add_ragged(a, b), ref.f64(a) + ref.f64(b), 1e-7, 0)
