"""``nisa.dma_copy(..., oob_mode=nisa.oob_mode.skip)`` with an indirect (``vector_offset``) side: a partition whose
row index is out of range has its transfer dropped instead of raising (reference/nki.md §2.7 dma_copy: "``skip``
drops that index's transfer"). A gather leaves that partition of ``dst`` as it was; a scatter writes nothing for
it. Checked on the NumPy reference, the simulator and JAX against float64 NumPy formulas, with the verifier's
refusal (a scatter-add cannot skip) and the simulator's pricing (data-independent: a skipped row is priced as
moved)."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
import nki_dsl.isa as legacy_isa
import nki_dsl.language as legacy_nl
from nki_dsl.backends import simulator
from nki_dsl.backends.numpy_ref import compile_kernel
from nki_dsl.errors import NkiApiError, NkiRuntimeError, NkiVerificationError
from nki_dsl.ir.fastread import Reader
from nki_dsl.ir.parser import parse_kernel
from tests.current_api.kernel_io import indices as _indices
from tests.current_api.kernel_io import run_on as _run

BACKENDS = ["numpy", "simulator", "jax"]
RNG = np.random.default_rng(412)
SKIP = nisa.oob_mode.skip




def _with_bad_rows(n_rows: int, parts: int = 128, dtype=np.int32) -> np.ndarray:
    """Row indices into ``n_rows`` rows, a quarter of them out of range (past the end, and negative when signed)."""
    idx = RNG.integers(0, n_rows, (parts, 1)).astype(np.int64)
    bad = RNG.choice(parts, parts // 4, replace=False)
    idx[bad[::2], 0] = n_rows + RNG.integers(0, 1000, bad[::2].size)
    idx[bad[1::2], 0] = -1 - RNG.integers(0, 5, bad[1::2].size) if np.dtype(dtype).kind == "i" else n_rows
    idx[0, 0] = n_rows  # the first partition past the end, the first in range next
    idx[1, 0] = n_rows - 1
    return idx.astype(dtype)


@nki.jit
def skipping_gather(table, idx, init, scale):
    """out[p] = scale * table[idx[p], 4:36] where idx[p] is a row of table, else init[p]."""
    P = idx.shape[0]
    rows = nl.ndarray((P, 32), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=init)
    nisa.dma_copy(dst=rows, src=table.ap([[table.shape[1], P], [1, 32]], offset=4, vector_offset=_indices(idx)),
                  oob_mode=SKIP, dge_mode=nisa.dge_mode.swdge)  # fmt: skip
    nisa.tensor_scalar(dst=rows, data=rows, op0=nl.multiply, operand0=scale)
    out = nl.ndarray((P, 32), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=rows)
    return out


def _gather_formula(table, idx, init, scale):
    ix = idx[:, 0].astype(np.int64)
    ok = (ix >= 0) & (ix < table.shape[0])
    rows = table.astype(np.float64)[np.where(ok, ix, 0), 4:36]
    return scale * np.where(ok[:, None], rows, init.astype(np.float64))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_a_skipping_gather_keeps_dst_where_the_row_is_out_of_range(backend, dtype):
    table = RNG.standard_normal((90, 40)).astype(np.float32)
    idx = _with_bad_rows(90, dtype=dtype)
    init = RNG.standard_normal((128, 32)).astype(np.float32)
    out = _run(skipping_gather, backend, table, idx, init, 0.5)
    np.testing.assert_allclose(out, _gather_formula(table, idx, init, 0.5), rtol=1e-6)
    ok = (idx[:, 0].astype(np.int64) >= 0) & (idx[:, 0].astype(np.int64) < 90)
    assert 0 < ok.sum() < 128  # both kinds of partition are there


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_skipping_gather_from_a_bf16_table_into_an_int_tile(backend):
    """The kept rows convert as any DMA converts (bf16 -> fp32 -> int32, rounding to nearest even); the skipped
    partitions keep the tile's own int32 values exactly."""

    @nki.jit
    def k(table, idx, init):
        P = idx.shape[0]
        rows = nl.ndarray((P, 8), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=init)
        nisa.dma_copy(dst=rows, src=table.ap([[table.shape[1], P], [1, 8]], vector_offset=_indices(idx)),
                      oob_mode=SKIP)  # fmt: skip
        out = nl.ndarray((P, 8), nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    table = (RNG.standard_normal((20, 8)) * 100).astype(nl.bfloat16)
    idx = _with_bad_rows(20, parts=64)
    init = RNG.integers(-(2**31), 2**31 - 1, (64, 8)).astype(np.int32)
    ix = idx[:, 0]
    ok = (ix >= 0) & (ix < 20)
    want = np.where(ok[:, None], np.rint(table.astype(np.float64)[np.where(ok, ix, 0)]).astype(np.int64), init)
    np.testing.assert_array_equal(_run(k, backend, table, idx, init), want)


@nki.jit
def skipping_scatter(table, idx, values):
    """table[idx[p], 8:40] = 2 * values[p] for each idx[p] that is a row of table (table written in place)."""
    P = idx.shape[0]
    v = nl.ndarray((P, 32), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=values)
    nisa.tensor_scalar(dst=v, data=v, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=table.ap([[table.shape[1], P], [1, 32]], offset=8, vector_offset=_indices(idx)), src=v,
                  oob_mode=SKIP)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_skipping_scatter_writes_only_the_rows_in_range(backend):
    table = RNG.standard_normal((300, 48)).astype(np.float32)
    rows = RNG.permutation(300)[:128].astype(np.int64)  # distinct rows: the order of repeated writes is not defined
    bad = RNG.choice(128, 40, replace=False)
    rows[bad[:20]] = 300 + RNG.integers(0, 50, 20)
    rows[bad[20:]] = -RNG.integers(1, 300, 20)  # negative: never counts from the end
    idx = rows.reshape(128, 1).astype(np.int32)
    values = RNG.standard_normal((128, 32)).astype(np.float32)
    want = table.astype(np.float64)
    ok = (rows >= 0) & (rows < 300)
    want[rows[ok], 8:40] = 2.0 * values[ok].astype(np.float64)
    _run(skipping_scatter, backend, table, idx, values)
    np.testing.assert_array_equal(table, want.astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_skip_the_same_rows_still_raise(backend):
    @nki.jit
    def k(table, idx, init):
        P = idx.shape[0]
        rows = nl.ndarray((P, 32), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=init)
        nisa.dma_copy(dst=rows, src=table.ap([[table.shape[1], P], [1, 32]], vector_offset=_indices(idx)))
        out = nl.ndarray((P, 32), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=rows)
        return out

    idx = _with_bad_rows(90)
    with pytest.raises(NkiRuntimeError, match=r"test_oob_skip.py:\d+: nisa.dma_copy: index 90 from partition 0 "):
        _run(k, backend, np.zeros((90, 40), np.float32), idx, np.zeros((128, 32), np.float32))


def test_the_ir_carries_skip_and_both_readers_keep_it():
    table = np.zeros((90, 40), np.float32)
    idx, init = _with_bad_rows(90), np.zeros((128, 32), np.float32)
    text = nki_dsl.trace(skipping_gather, table, idx, init, 0.5).text
    assert 'oob_mode = "skip"' in text
    Reader(text).start()  # the fast reader reads it without falling back to lark
    parsed = parse_kernel(text)
    table = RNG.standard_normal((90, 40)).astype(np.float32)
    init = RNG.standard_normal((128, 32)).astype(np.float32)
    out = compile_kernel(parsed).run({"table": table, "idx": idx, "init": init})
    np.testing.assert_allclose(out, _gather_formula(table, idx, init, 0.5), rtol=1e-6)


def test_a_scatter_add_cannot_skip():
    """The legacy scatter-add (``dst_rmw_op=np.add`` with an index tile) is "oob error mode only" (§2.7)."""

    @nki_dsl.jit
    def k(acc, idx, values):
        ix = legacy_nl.load(idx)
        v = legacy_nl.load(values)
        legacy_isa.dma_copy(dst=acc[ix, :], src=v, dst_rmw_op=np.add, oob_mode=legacy_isa.oob_mode.skip)

    with pytest.raises(NkiVerificationError, match=r"test_oob_skip.py:\d+: nisa.dma_copy: oob_mode = skip cannot "
                                                   r"drop rows of a scatter-add") as e:  # fmt: skip
        k(np.zeros((50, 16), np.float32), np.zeros((128, 1), np.int32), np.zeros((128, 16), np.float32))
    assert [x.rule for x in e.value.diagnostics] == ["indirect-dma"]


def test_the_simulator_prices_a_skipping_gather_as_one_moving_every_row():
    """Which partitions skip is data, known only when the DMA runs; the modelled time is not a function of the data
    (timing-only runs have none). The reading: the software DGE builds and checks every partition's descriptor
    either way, and the bytes of a dropped row are priced as moved (§2.7/§3.4 give no figure for a dropped
    transfer), so the modelled latency is the same whichever rows are out of range."""
    table = RNG.standard_normal((90, 40)).astype(np.float32)
    init = RNG.standard_normal((128, 32)).astype(np.float32)
    in_range = RNG.integers(0, 90, (128, 1)).astype(np.int32)
    none_in_range = np.full((128, 1), 1000, np.int32)
    (_, prof_in), (out_none, prof_none) = [nki_dsl.simulate(skipping_gather, table, idx, init, 0.5, target="trn2")
                                           for idx in (in_range, none_in_range)]  # fmt: skip
    np.testing.assert_allclose(out_none, 0.5 * init.astype(np.float64), rtol=1e-6)
    assert prof_in.latency_ns == prof_none.latency_ns > 0
    traced = nki_dsl.trace(skipping_gather, table, in_range, init, 0.5).ir
    assert simulator.profile(traced, nki_dsl.get_target("trn2")).latency_ns == prof_in.latency_ns  # timing only


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_masked_legacy_gather_skips_only_inside_its_mask(backend):
    """The legacy spelling, ``nisa.dma_copy(dst=rows, src=table[ix, :], mask=..., oob_mode=skip)``: partitions past
    the mask move nothing whatever their index; inside it, out-of-range rows are dropped."""

    @nki_dsl.jit
    def k(table, idx, init):
        ix = legacy_nl.load(idx)
        rows = legacy_nl.load(init)
        i_p = legacy_nl.arange(128)[:, None]
        legacy_isa.dma_copy(dst=rows, src=table[ix, :], mask=(i_p < 100), oob_mode=legacy_isa.oob_mode.skip)
        out = legacy_nl.ndarray((128, 16), dtype=table.dtype, buffer=legacy_nl.shared_hbm)
        legacy_nl.store(out, rows)
        return out

    table = RNG.standard_normal((40, 16)).astype(np.float32)
    idx = _with_bad_rows(40)
    init = RNG.standard_normal((128, 16)).astype(np.float32)
    ix = idx[:, 0].astype(np.int64)
    moved = (ix >= 0) & (ix < 40) & (np.arange(128) < 100)
    want = np.where(moved[:, None], table[np.where(moved, ix, 0)], init)
    if backend == "simulator":
        out = nki_dsl.simulate(k, table, idx, init, target="trn2")[0]
    else:
        out = k(table, idx, init, backend=backend)
    np.testing.assert_array_equal(np.asarray(out), want)


def test_skip_at_a_register_offset_is_refused_not_read_as_error():
    """A ``scalar_offset`` address is checked against the range its loop declares, which raises: ``skip`` there is
    not modelled, and says so instead of raising at run time as if ``error`` had been asked for."""

    @nki.jit
    def k(x, start):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        r = nisa.register_alloc()
        nisa.register_load(r, start)
        t = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[64, 128], [1, 64]], offset=0, scalar_offset=r), oob_mode=SKIP)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(NkiApiError, match=r"test_oob_skip.py:\d+: nisa.dma_copy: oob_mode=skip with a scalar_offset"):
        k(np.zeros((512, 64), np.float32), np.array([[0]], np.int32))
