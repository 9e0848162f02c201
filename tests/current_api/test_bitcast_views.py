"""``t.view(dtype)``: an on-chip tile's bits reinterpreted (reference/nki.md §2.7 ``.view(dtype)``; ir/bitcast.py),
against NumPy's ``ndarray.view`` and float64 formulas on the NumPy reference, the simulator and JAX; what the
verifier's ``bitcast`` rule refuses."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError, NkiVerificationError

BACKENDS = ["numpy", "simulator", "jax"]
BF16, E4M3, E5M2 = (np.dtype(d) for d in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2))


def _viewer(into):
    @nki.jit
    def k(x):
        P, F = x.shape
        t = nl.ndarray((P, F), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t.view(into)
        out = nl.ndarray(v.shape, into, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    return k


def _run(kernel, backend, *args):
    return np.asarray(kernel(*args, backend=backend))


PAIRS = [  # (source dtype, view dtype): same sizes, narrowing and widening
    (np.float32, np.int32), (np.float32, np.uint32), (np.int32, np.float32), (BF16, np.int16), (np.uint16, BF16),
    (np.float16, np.uint16), (E4M3, np.uint8), (np.int8, E5M2), (np.float32, np.uint8), (BF16, np.float32),
    (np.uint8, BF16), (np.float32, BF16),
]  # fmt: skip


def _bits(dtype, shape, seed=0):
    """Random words of ``dtype`` (any bit pattern)."""
    d = np.dtype(dtype)
    raw = np.random.default_rng(seed).integers(0, 1 << (8 * d.itemsize), size=shape, dtype=np.uint64)
    return raw.astype(f"u{d.itemsize}").view(d)


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) in (BF16, E4M3, E5M2)


def _same_bits_or_both_nan(out, expected):
    """Equal bit for bit, except that a NaN pattern of a float side comes back as some NaN: the backends hold
    floats as fp32 values, which keep NaN but not its payload (ir/bitcast.py)."""
    nan = np.isnan(expected.astype(np.float32)) if _is_float(expected.dtype) else np.zeros(expected.shape, bool)
    width = f"u{expected.dtype.itemsize}"
    np.testing.assert_array_equal(out.view(width)[~nan], expected.view(width)[~nan])
    assert np.isnan(out[nan].astype(np.float32)).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src, into", PAIRS, ids=lambda d: np.dtype(d).name)
def test_view_keeps_the_bits(backend, src, into):
    x = _bits(src, (128, 64))
    if _is_float(src):  # a NaN source would reach the view as a canonical NaN: its bits are not the source's
        x = np.where(np.isnan(x.astype(np.float32)), np.zeros((), x.dtype), x)
    out = _run(_viewer(into), backend, x) if backend != "simulator" else nki.simulate(_viewer(into))(x)
    _same_bits_or_both_nan(np.asarray(out).view(into) if out.dtype != np.dtype(into) else out, x.view(into))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_fp8_and_bf16_pattern_survives_a_round_trip(backend):
    @nki.jit
    def round_trip(x8, x16):
        out8 = nl.ndarray(x8.shape, nl.uint8, buffer=nl.shared_hbm)
        out16 = nl.ndarray(x16.shape, nl.uint16, buffer=nl.shared_hbm)
        for x, out, dt in ((x8, out8, nl.float8_e4m3fn), (x16, out16, nl.bfloat16)):
            t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            f = nl.ndarray(x.shape, dt, buffer=nl.sbuf)
            nisa.tensor_copy(dst=f, src=t.view(dt))  # held as values of dt, then back to the bits
            nisa.dma_copy(dst=out, src=f.view(out.dtype))
        return out8, out16

    x8 = np.arange(256, dtype=np.uint8).reshape(128, 2)
    x16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(128, 512)
    keep8 = ~np.isnan(x8.view(E4M3).astype(np.float32))  # non-NaN patterns: all of them bit for bit
    keep16 = ~np.isnan(x16.view(BF16).astype(np.float32))
    o8, o16 = (np.asarray(o) for o in (round_trip(x8, x16, backend=backend) if backend != "simulator"
                                       else nki.simulate(round_trip)(x8, x16)))  # fmt: skip
    np.testing.assert_array_equal(o8[keep8], x8[keep8])
    np.testing.assert_array_equal(o16[keep16], x16[keep16])
    assert np.isnan(o16[~keep16].view(BF16).astype(np.float32)).all()  # NaNs stay NaN


@nki.jit
def exponent_of(x):
    """floor(log2 |x|) of normal fp32 values from their bits: ((bits >> 23) & 0xff) - 127."""
    P, F = x.shape
    t = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    bits = t.view(nl.int32)
    e = nl.ndarray((P, F), nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=e, data=bits, op0=nl.right_shift, operand0=23, op1=nl.bitwise_and, operand1=255)
    out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    f = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=f, data=e, op0=nl.subtract, operand0=127.0)
    nisa.dma_copy(dst=out, src=f)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_bits_of_a_float_give_its_exponent(backend):
    x = np.random.default_rng(2).uniform(-1e6, 1e6, (128, 64)).astype(np.float32)
    out = _run(exponent_of, backend, x) if backend != "simulator" else nki.simulate(exponent_of)(x)
    np.testing.assert_array_equal(out, np.floor(np.log2(np.abs(x.astype(np.float64)))))


def test_a_widening_view_needs_a_whole_number_of_elements():
    with pytest.raises(NkiApiError, match="not a whole number of 4-byte float32"):
        _viewer(np.float32)(np.zeros((128, 3), BF16))


def test_a_view_of_bool_is_refused_with_the_reason():
    """A view of an HBM tensor aliases it (test_hbm_views.py): returned, it is an output nothing wrote."""
    @nki.jit
    def hbm_view(x):
        return x.view(nl.int32)
    with pytest.raises(NkiVerificationError, match=r"output %x_v i32\[128, 4\] in 'hbm' is never written"):
        hbm_view(np.zeros((128, 4), np.float32))
    with pytest.raises(NkiApiError, match="no defined bit layout"):
        _viewer(np.bool_)(np.zeros((128, 4), np.uint8))


def test_golden_writing_into_a_view_is_refused(golden_bitcast):
    @nki.jit
    def write_view(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t.view(nl.int32)
        nisa.memset(dst=v, value=0)  # would zero t on hardware; here only the copy
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    golden_bitcast(write_view, "write")


def test_golden_reading_a_view_after_its_source_changed_is_refused(golden_bitcast):
    @nki.jit
    def stale(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t.view(nl.int32)
        nisa.memset(dst=t, value=1.0)
        out = nl.ndarray(x.shape, nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    golden_bitcast(stale, "")


def test_a_view_remade_in_each_iteration_after_the_write_is_accepted():
    @nki.jit
    def fresh_each_time(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray((3, *x.shape), nl.int32, buffer=nl.shared_hbm)
        for i in nl.sequential_range(3):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out[i], src=t.view(nl.int32))
        return out

    x = np.random.default_rng(1).standard_normal((128, 8)).astype(np.float32)
    out = fresh_each_time(x)
    np.testing.assert_array_equal(out, np.stack([(x * 2**k).view(np.int32) for k in (1, 2, 3)]))


def test_a_view_made_before_a_loop_that_writes_its_source_is_refused():
    @nki.jit
    def loop_stale(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t.view(nl.int32)
        out = nl.ndarray((3, *x.shape), nl.int32, buffer=nl.shared_hbm)
        for i in nl.sequential_range(3):
            nisa.dma_copy(dst=out[i], src=v)  # iterations 2 and 3 would read the bits line +1 wrote
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        return out

    with pytest.raises(NkiVerificationError, match="reads this view after line"):
        nki_dsl.trace(loop_stale, np.zeros((128, 8), np.float32))


@pytest.fixture
def golden_bitcast():
    from pathlib import Path

    def check(kernel, case):
        with pytest.raises(NkiVerificationError) as info:
            nki_dsl.trace(kernel, np.zeros((128, 8), np.float32))
        assert {d.rule for d in info.value.diagnostics} == {"bitcast"}, str(info.value)
        path = Path(__file__).parents[1] / "verify" / "golden" / (f"bitcast-{case}.txt" if case else "bitcast.txt")
        import os

        if os.environ.get("NKI_UPDATE_GOLDEN") == "1":
            path.write_text(str(info.value) + "\n")
        assert path.read_text() == str(info.value) + "\n"

    return check


@nki.jit
def halves(x):
    """x int32 [128, 256] read as bf16 through access patterns (§2.7 ``.ap``: "int32 (128,256) as bf16:
    [[512,128],[1,512]]"): all of it, and the high half of every word (the odd bf16 elements, little-endian)."""
    t = nl.ndarray((128, 256), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    whole = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=whole, src=t.ap([[512, 128], [1, 512]], dtype=nl.bfloat16))
    high = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=high, src=t.ap([[512, 128], [2, 256]], offset=1, dtype=nl.bfloat16))
    out_whole = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.shared_hbm)
    out_high = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_whole, src=whole)
    nisa.dma_copy(dst=out_high, src=high)
    return out_whole, out_high


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_access_pattern_with_dtype_walks_the_bits_in_that_dtype(backend):
    x = _bits(np.int32, (128, 256), seed=5)
    got = (halves(x, backend=backend) if backend != "simulator" else nki.simulate(halves)(x))
    whole, high = (np.asarray(g) for g in got)
    _same_bits_or_both_nan(whole, x.view(BF16))
    _same_bits_or_both_nan(high, x.view(BF16)[:, 1::2])


def test_an_access_pattern_with_dtype_over_hbm_reads_its_bits():  # through an hbm.view (test_hbm_views.py)
    @nki.jit
    def over_hbm(x):
        t = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[128, 128], [1, 128]], dtype=nl.bfloat16))
        out = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.random.default_rng(5).standard_normal((128, 128)).astype(BF16)
    np.testing.assert_array_equal(np.asarray(over_hbm(x.view(np.int32))).view(np.uint16), x.view(np.uint16))


@nki.jit
def _three_d_view(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)  # stored [128, 4*8]: read as [d0, 8*d1 + d2]
    nisa.dma_copy(dst=t, src=x)
    v = t.view(nl.int32)
    out = nl.ndarray(v.shape, nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=v)
    return out


def test_a_view_of_a_three_dimensional_tile_keeps_the_bits():
    """Its last axis is contiguous although the tile is stored as [P, F] and the middle axis steps through F too
    (the rule refused every view of a tile of three or more dimensions)."""
    x = np.random.default_rng(2).standard_normal((128, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(_three_d_view(x)), x.view(np.int32))


def test_a_view_whose_last_axis_strides_is_refused():
    @nki.jit
    def every_other(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t[:, :, 0:8:2].view(nl.int32)
        out = nl.ndarray(v.shape, nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    with pytest.raises(NkiVerificationError, match=r"the last axis of operand 'src' %\w+\[128, 4, 4\] in 'sbuf' is "
                                                   r"not contiguous in its tensor"):  # fmt: skip
        nki_dsl.trace(every_other, np.zeros((128, 4, 8), np.float32))


def _row_view(step):
    @nki.jit
    def one_row(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t[0:1, 0:8:step].view(nl.int32)
        out = nl.ndarray(v.shape, nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    return one_row


def test_a_view_of_one_partition_whose_last_axis_strides_is_refused():
    """A single partition does not make a strided last axis contiguous (the partition axis is not the last)."""
    with pytest.raises(NkiVerificationError, match=r"the last axis of operand 'src' %\w+\[1, 4\] in 'sbuf' is "
                                                   r"not contiguous in its tensor"):  # fmt: skip
        nki_dsl.trace(_row_view(2), np.zeros((128, 8), np.float32))
    x = np.random.default_rng(4).standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(_row_view(1)(x, backend="numpy")), x[0:1].view(np.int32))


def test_a_view_of_a_last_axis_of_one_element_is_contiguous_whatever_its_step():
    """One element per partition is contiguous however far apart a longer axis would step."""

    @nki.jit
    def one_column(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t[:, 3:8:8].view(nl.int32)
        out = nl.ndarray(v.shape, nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    x = np.random.default_rng(5).standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(one_column(x, backend="numpy")), x[:, 3:4].view(np.int32))


_DMA = '{dst_rmw_op = none, oob_mode = "error", dge_mode = "unknown"}'


def _block_view_ir(src: str, width: int) -> str:
    """IR from outside (the current API has no block dimensions): one block of a [4, [128], 8] tile viewed per
    iteration, its access index [i0, d0, <src>]."""
    return f"""\
kernel blocks(%x: f32[4, 128, 8] hbm) -> (%out) {{
  grid ()
  source "k.py"
  %t = alloc() : f32[4, [128], 8] sbuf loc(3)
  %out = alloc() : i32[4, 128, {width}] shared_hbm loc(4)
  affine i0 = range(0, 4, 1) loc(5) {{
    nisa.dma_copy(dst=%t[i0, d0, d1 ; 128x8], src=%x[i0, d0, d1 ; 128x8]) {_DMA} loc(6)
    %v = nisa.tensor_copy(src=%t[i0, d0, {src} ; 128x{width}]) {{engine = "vector", view_bytes = (4, 4)}} : i32[128, {width}] sbuf loc(7)
    nisa.dma_copy(dst=%out[i0, d0, d1 ; 128x{width}], src=%v) {_DMA} loc(8)
  }}
}}
"""  # noqa: E501


def test_a_view_of_one_block_of_a_block_tile_reads_its_last_index_for_contiguity():
    """The index has three entries (block, partition, free): the free one decides, not the partition one."""
    from nki_dsl.backends.numpy_ref import compile_kernel
    from nki_dsl.ir.parser import parse_kernel
    from nki_dsl.passes.verifier import verify_kernel  # with the compiler's lowering, for the placing rules
    from nki_dsl.targets import get_target

    kernel = parse_kernel(_block_view_ir("d1", 8))
    assert verify_kernel(kernel, get_target("trn2")) == []
    x = np.random.default_rng(3).standard_normal((4, 128, 8)).astype(np.float32)
    np.testing.assert_array_equal(compile_kernel(kernel).run({"x": x}), x.view(np.int32))
    (diag,) = verify_kernel(parse_kernel(_block_view_ir("2*d1", 4)), get_target("trn2"))
    assert (diag.rule, diag.loc.line) == ("bitcast", 7)
    assert diag.message == "the last axis of operand 'src' %t[128, 4] in 'sbuf' is not contiguous in its tensor"
