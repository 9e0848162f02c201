"""Rule ``double-row``: the FP8 double-row matmul only on NeuronCore-v3+, FP8 operands of shape [K, 2, M] /
[K, 2, N], no column tiling; parsed IR is held to it as traced kernels are."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


@nki.jit
def double_row(s, m):
    out = nl.ndarray((s.shape[2], m.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_matmul(nl.load(s), nl.load(m), perf_mode=nisa.matmul_perf_mode.double_row))
    return out


S, M = np.zeros((128, 2, 128), E4M3), np.zeros((128, 2, 64), E4M3)


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_double_row_is_accepted_from_neuroncore_v3(target):
    nki.trace(double_row, S, M, target=target)


def test_golden_double_row_on_trn1(golden, rejected):
    golden("double-row", rejected(double_row, S, M, target="trn1"))


def _parsed(text: str):
    with pytest.raises(nki.NkiVerificationError) as info:
        nki.parse_ir(text, target="trn2")
    return info.value


def test_golden_parsed_double_row_on_bf16_tiles(golden):
    text = nki.trace(double_row, S, M).text.replace("f8e4m3[128, 2, 128]", "bf16[128, 2, 128]")
    golden("double-row", _parsed(text), "bf16")


def test_golden_parsed_double_row_shapes_and_tiling_are_the_shape_rules(golden):
    base = nki.trace(double_row, S, M).text
    tiled = base.replace("tile_position = (), tile_size = ()", "tile_position = (0, 0), tile_size = (128, 64)")
    golden("shape", _parsed(tiled), "double-row-tiling")
    four_rows = base.replace("f8e4m3[128, 2, 128]", "f8e4m3[128, 4, 64]").replace("128x2x128", "128x4x64")
    golden("shape", _parsed(four_rows), "double-row-rows")


def test_golden_parsed_perf_mode_outside_the_enum(golden):
    text = nki.trace(double_row, S, M).text.replace('perf_mode = "double_row"', 'perf_mode = "quad_row"')
    golden("structure", _parsed(text), "perf-mode")
