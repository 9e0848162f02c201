"""Indirect DMA (reference/nki.md §2.7 "Indirect DMA"): ``nl.load(data[idx_tile, i_f])`` gathers the rows an
on-chip int32 tile names, ``nl.store(data[idx_tile, i_f], value=t)`` scatters a tile's partitions to them; the
indices are checked when the kernel runs. Each test runs on every backend (conftest) and on the simulator."""

import inspect

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator.templates import build_template
from nki_dsl.errors import NkiRuntimeError, NkiTraceError, NkiVerificationError
from nki_dsl.passes.pipeline import compile_for_target
from tests.backend_fixture import backend_independent

RNG = np.random.default_rng(11)
DATA = RNG.standard_normal((4, 300, 64)).astype(np.float32)


@nki.jit
def gather_rows(data, idx):
    """out[b, p, :] = data[b, idx[p], :]: a gather per batch, with basic and advanced indexing."""
    out = nl.ndarray((data.shape[0], idx.shape[0], data.shape[2]), data.dtype, buffer=nl.shared_hbm)
    ix = nl.load(idx)
    i_p = nl.arange(idx.shape[0])[:, None]
    i_f = nl.arange(data.shape[2])[None, :]
    for b in nl.affine_range(data.shape[0]):
        if_advanced = nl.load(data[b, ix[i_p, 0], i_f])  # advanced: the tile beside nl.arange
        nl.store(out[b], value=if_advanced)
    return out


@nki.jit
def gather_basic(data, idx):
    out = nl.ndarray((idx.shape[0], data.shape[2]), data.dtype, buffer=nl.shared_hbm)
    ix = nl.load(idx)
    nl.store(out, value=nl.load(data[1, ix, :]))  # basic: the [P, 1] tile beside a slice
    return out


@nki.jit
def scatter_rows(data, idx, value):
    """data[0, idx[p], :] = value[p, :] (in place), and the same rows scaled into a fresh output."""
    out = nl.ndarray(data.shape[1:], data.dtype, buffer=nl.shared_hbm)
    ix = nl.load(idx)
    v = nl.load(value)
    for start in range(0, out.shape[0], 128):  # zero the output first, 128 rows at a time
        rows = min(128, out.shape[0] - start)
        nl.store(out[start:start + rows, :], value=nl.zeros((rows, out.shape[1]), out.dtype))
    nl.store(out[ix, :], value=nl.multiply(v, 2.0))
    return out


def _unique_rows(n, size=300, seed=3):
    return np.random.default_rng(seed).permutation(size)[:n].astype(np.int32).reshape(n, 1)


def test_gather_reads_the_named_rows():
    idx = RNG.integers(0, 300, size=(128, 1)).astype(np.int32)  # repeats allowed in a gather
    want = DATA[:, idx[:, 0], :]
    np.testing.assert_array_equal(np.asarray(gather_rows(DATA, idx)), want)
    np.testing.assert_array_equal(np.asarray(gather_basic(DATA, idx)), DATA[1, idx[:, 0], :])


@backend_independent
def test_gather_on_the_simulator_costs_one_descriptor_per_row():
    idx = RNG.integers(0, 300, size=(128, 1)).astype(np.int32)
    out, profile = nki.simulate(gather_basic, DATA, idx, target="trn2")
    np.testing.assert_array_equal(out, DATA[1, idx[:, 0], :])
    trn2 = nki.get_target("trn2")
    lowered, _ = compile_for_target(nki.trace(gather_basic, DATA, idx, target="trn2").ir, trn2)
    gathers = [build_template(s, "dma", trn2) for s, _ in lowered.walk()
               if getattr(s, "name", "") == "nisa.dma_copy" and "indices" in s.operands]
    assert len(gathers) == 1 and gathers[0].dma_descriptors == 128  # one 256-byte row per partition
    assert gathers[0].nbytes == 128 * 64 * 4


def test_scatter_writes_the_named_rows():
    idx = _unique_rows(100)
    value = RNG.standard_normal((100, 64)).astype(np.float32)
    want = np.zeros((300, 64), np.float32)
    want[idx[:, 0]] = value * 2
    np.testing.assert_array_equal(np.asarray(scatter_rows(DATA, idx, value)), want)
    out, _ = nki.simulate(scatter_rows, DATA, idx, value, target="trn2")
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("bad, partition", [(300, 7), (-1, 0)])
def test_an_index_outside_the_dimension_is_refused_when_the_kernel_runs(bad, partition):
    idx = RNG.integers(0, 300, size=(128, 1)).astype(np.int32)
    idx[partition, 0] = bad
    with pytest.raises(NkiRuntimeError) as info:
        np.asarray(gather_basic(DATA, idx))
    msg = str(info.value)
    lines, first = inspect.getsourcelines(gather_basic.fn)
    line = first + next(k for k, text in enumerate(lines) if "nl.load(data[1, ix" in text)
    assert msg.startswith(f"test_indirect_dma.py:{line}: nl.load: "), msg
    assert f"index {bad} from partition {partition} of operand 'indices' is outside dimension 1 of %data " \
           "(0..299)" in msg
    with pytest.raises(NkiRuntimeError, match=f"index {bad} from partition {partition} "):
        nki.simulate(gather_basic, DATA, idx, target="trn2")  # the lowered DMA, at the same kernel line


@backend_independent
def test_an_index_tile_on_a_free_axis_is_refused():
    @nki.jit
    def free_axis(data, idx):
        out = nl.ndarray((128, 64), data.dtype, buffer=nl.shared_hbm)
        ix = nl.load(idx)  # [1, 64]: one row of indices, along a free axis
        nl.store(out, value=nl.load(data[0, nl.arange(128)[:, None], ix]))
        return out

    with pytest.raises(NkiTraceError, match="err_indirect_indices_free_dim"):
        free_axis(DATA, np.zeros((1, 64), np.int32))


@backend_independent
def test_an_indirect_view_is_only_moved_by_a_dma():
    @nki.jit
    def computed(data, idx):
        out = nl.ndarray((128, 64), data.dtype, buffer=nl.shared_hbm)
        ix = nl.load(idx)
        nl.store(out, value=nl.exp(data[0, ix, :]))
        return out

    with pytest.raises(NkiTraceError, match="can only be moved by nl.load, nl.store or nisa.dma_copy"):
        computed(DATA, np.zeros((128, 1), np.int32))


@backend_independent
def test_a_scatter_in_an_affine_loop_that_ignores_its_index_is_refused():
    # the rows are data: two iterations may write the same row, so the write is loop-carried (conservative)
    @nki.jit
    def scatter_loop(data, idx, value):
        out = nl.ndarray(data.shape[1:], data.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            ix = nl.load(idx[nl.ds(i * 64, 64), :])
            nl.store(out[ix, :], value=nl.load(value[nl.ds(i * 64, 64), :]))
        return out

    with pytest.raises(NkiVerificationError, match="writes the same elements in every iteration"):
        scatter_loop(DATA, _unique_rows(128), np.zeros((128, 64), np.float32))


@nki.jit
def gather_ragged(data, idx):
    """A gather per 128 rows of ``idx``, the last tile cut by a mask over its partitions."""
    n = idx.shape[0]
    out = nl.ndarray((n, data.shape[2]), data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    for t in nl.affine_range((n + 127) // 128):
        keep = t * 128 + i_p < n
        ix = nl.load(idx[t * 128 + i_p, nl.arange(1)[None, :]], mask=keep)
        rows = nl.load(data[2, ix, :], mask=keep)
        nl.store(out[nl.ds(t * 128, 128), :], value=rows, mask=keep)
    return out


def test_a_gather_masked_over_its_partitions_moves_and_checks_only_the_kept_ones():
    idx = RNG.integers(0, 300, size=(200, 1)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(gather_ragged(DATA, idx)), DATA[2, idx[:, 0], :])
    np.testing.assert_array_equal(nki.simulate(gather_ragged, DATA, idx, target="trn2")[0], DATA[2, idx[:, 0], :])
    idx[150, 0] = 400
    with pytest.raises(NkiRuntimeError, match="index 400 from partition 22 "):  # row 150 = partition 22, tile 1
        np.asarray(gather_ragged(DATA, idx))


@backend_independent
def test_a_masked_scatter_is_refused():
    @nki.jit
    def masked_scatter(data, idx, value):
        out = nl.ndarray(data.shape[1:], data.dtype, buffer=nl.shared_hbm)
        ix = nl.load(idx)
        nl.store(out[ix, :], value=nl.load(value), mask=(nl.arange(128)[:, None] < 100))
        return out

    with pytest.raises(NkiVerificationError, match="a scatter DMA takes no mask"):
        masked_scatter(DATA, _unique_rows(128), np.zeros((128, 64), np.float32))
