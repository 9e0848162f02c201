"""``hbm.ap(pattern, vector_offset=idx, indirect_dim=0)``: rows of an HBM tensor picked by an SBUF index tile, as
the source (a gather) or destination (a scatter) of ``nisa.dma_copy`` (reference/nki.md §2.7 dma_copy and "Access
patterns & views"; trace/vector_offset.py), on the NumPy reference, the simulator and JAX; every index is checked
when the DMA runs."""

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError, NkiRuntimeError
from tests.current_api.kernel_io import indices as _indices
from tests.current_api.kernel_io import run_on as _run

BACKENDS = ["numpy", "simulator", "jax"]
RNG = np.random.default_rng(21)




@nki.jit
def embed_and_scale(table, idx, scale):
    """out[p] = scale * table[idx[p], 8:40] (table [R, C] or [R, A, B], viewed as rows of A*B elements)."""
    P = idx.shape[0]
    row = table.shape[1] if len(table.shape) == 2 else table.shape[1] * table.shape[2]
    rows = nl.ndarray((P, 32), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=table.ap([[row, P], [1, 32]], offset=8, vector_offset=_indices(idx), indirect_dim=0),
                  dge_mode=nisa.dge_mode.swdge)  # fmt: skip
    nisa.tensor_scalar(dst=rows, data=rows, op0=nl.multiply, operand0=scale)
    out = nl.ndarray((P, 32), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=rows)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(1000, 64), (300, 4, 16)], ids=["2d", "3d"])
def test_a_vector_offset_pattern_gathers_the_rows(backend, shape):
    table = RNG.standard_normal(shape).astype(np.float32)
    idx = RNG.integers(0, shape[0], (128, 1)).astype(np.int32)
    out = _run(embed_and_scale, backend, table, idx, 0.5)
    rows = table.reshape(shape[0], -1).astype(np.float64)[idx[:, 0], 8:40]
    np.testing.assert_allclose(out, 0.5 * rows, rtol=1e-6)


@nki.jit
def strided_gather(table, idx):
    """Every other element of 16, from element 3 of each picked row: out[p, j] = table[idx[p], 3 + 2 j]."""
    P = idx.shape[0]
    rows = nl.ndarray((P, 16), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=table.ap([[table.shape[1], P], [2, 16]], offset=3, vector_offset=_indices(idx)))
    out = nl.ndarray((P, 16), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=rows)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strided_pattern_inside_each_row(backend):
    table = RNG.standard_normal((50, 40)).astype(np.float32)
    idx = RNG.integers(0, 50, (64, 1)).astype(np.uint32)
    np.testing.assert_array_equal(_run(strided_gather, backend, table, idx), table[idx[:, 0].astype(int), 3:35:2])


@nki.jit
def scatter_rows(table, idx, values):
    """table[idx[p], 0:32] = values[p] (table written in place)."""
    P = idx.shape[0]
    v = nl.ndarray((P, 32), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=values)
    nisa.dma_copy(dst=table.ap([[table.shape[1], P], [1, 32]], vector_offset=_indices(idx), indirect_dim=0), src=v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_vector_offset_pattern_on_dst_scatters(backend):
    table = RNG.standard_normal((200, 48)).astype(np.float32)
    idx = RNG.permutation(200)[:128].reshape(128, 1).astype(np.int32)  # distinct rows
    values = RNG.standard_normal((128, 32)).astype(np.float32)
    expected = table.copy()
    expected[idx[:, 0], :32] = values
    _run(scatter_rows, backend, table, idx, values)
    np.testing.assert_array_equal(table, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_outside_the_rows_raises_when_the_dma_runs(backend):
    table = np.zeros((100, 64), np.float32)
    idx = RNG.integers(0, 100, (128, 1)).astype(np.int32)
    idx[17] = 100
    with pytest.raises(NkiRuntimeError, match=r"test_ap_vector_offset.py:\d+: nisa.dma_copy: index 100 from "
                                              r"partition 17 .* outside dimension 0 of %table \(0..99\)"):
        _run(embed_and_scale, backend, table, idx, 1.0)


@pytest.mark.parametrize("change, message", [
    (dict(pattern=[[64, 128], [1, 61]]), "elements 4..64 .* outside the 64 elements of a row"),
    (dict(indirect_dim=1), "indexes dimension 0"),
    (dict(idx_dtype=np.float32), "int32 or uint32 row indices"),
    (dict(pattern=[[64, 64], [1, 8]]), "spans 64 partitions and vector_offset holds 128"),
    (dict(dge_mode=nisa.dge_mode.hwdge), "needs the software DGE"),
])  # fmt: skip
def test_what_a_vector_offset_pattern_refuses(change, message):
    pattern = change.get("pattern", [[64, 128], [1, 32]])

    @nki.jit
    def k(table, idx):
        rows = nl.ndarray((pattern[0][1], pattern[1][1]), nl.float32, buffer=nl.sbuf)
        src = table.ap(pattern, offset=4, vector_offset=_indices(idx), indirect_dim=change.get("indirect_dim", 0))
        nisa.dma_copy(dst=rows, src=src, dge_mode=change.get("dge_mode", nisa.dge_mode.unknown),
                      oob_mode=change.get("oob_mode", nisa.oob_mode.error))  # fmt: skip
        out = nl.ndarray(rows.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    idx = np.zeros((128, 1), change.get("idx_dtype", np.int32))
    with pytest.raises(NkiApiError, match=message):
        k(np.zeros((10, 64), np.float32), idx)
