"""``t.view(dtype)`` of an HBM tensor: an aliasing view of its bytes (``hbm.view``, ir/hbm_views.py; reference/nki.md
§2.7 ``.view(dtype)`` = ``reinterpret_cast``, the last dimension scaled by the size ratio). Reads and writes
through the view touch the tensor's bytes on the NumPy reference, the simulator and JAX (checked bit for bit
against NumPy's ``ndarray.view`` and against float64 formulas); the simulator orders a write through a view before
a read of its tensor; what the tracer refuses. The verifier's side (rule hbm-view, dependence through a view) is
tests/verify/test_hbm_view.py."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.backends.simulator.deps import DependenceTracker
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.errors import NkiApiError, NkiVerificationError

BACKENDS = ["numpy", "simulator", "jax"]
BF16, E4M3, E5M2 = (np.dtype(d) for d in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2))
RNG = np.random.default_rng(1207)


def _run(kernel, backend, *args):
    if backend == "simulator":
        return nki.simulate(kernel)(*args)
    return kernel(*args, backend=backend)


def _words(dtype, shape):
    """Random integers of ``dtype`` covering its whole range (as bit patterns of a float view: NaNs included)."""
    d = np.dtype(dtype)
    raw = RNG.integers(0, 1 << (8 * d.itemsize), size=shape, dtype=np.uint64)
    return raw.astype(f"u{d.itemsize}").view(d)


@nki.jit
def write_bits(bits):
    """out (float32) written through its int32 view: out's bits are ``bits``."""
    out = nl.ndarray(bits.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(bits.shape, nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=bits)
    nisa.dma_copy(dst=out.view(nl.int32), src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_through_an_int32_view_of_a_float32_output_sets_its_bits(backend):
    bits = _words(np.int32, (128, 64))  # every pattern, NaN payloads and denormals included
    out = np.asarray(_run(write_bits, backend, bits))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.view(np.int32), bits)


@nki.jit
def write_then_read(bits, scale):
    """out2 = scale * (out's float32 values), out written through its int32 view first: the read of out depends
    on the write through the view."""
    P, F = bits.shape
    out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=bits)
    nisa.dma_copy(dst=out.view(nl.int32), src=t)  # WRITE_LINE
    f = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=f, src=out)  # READ_LINE
    nisa.tensor_scalar(dst=f, data=f, op0=nl.multiply, operand0=scale)
    out2 = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out2, src=f)
    return out, out2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_of_the_tensor_after_a_write_through_its_view_sees_the_new_bits(backend):
    values = RNG.standard_normal((128, 96)).astype(np.float32)
    out, out2 = (np.asarray(o) for o in _run(write_then_read, backend, values.view(np.int32), 3.0))
    np.testing.assert_array_equal(out, values)
    np.testing.assert_allclose(out2, 3.0 * values.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src, into", [(np.float32, np.uint8), (BF16, np.int32), (np.int32, BF16),
                                       (np.uint8, np.float32), (np.float32, np.uint32), (np.int16, np.int8),
                                       (E4M3, np.int16), (np.uint16, E5M2)],
                         ids=lambda d: np.dtype(d).name)  # fmt: skip
def test_reading_an_input_through_its_view(backend, src, into):
    """The view of a parameter, loaded into an integer tile (bit-exact on chip) or compared as bits."""
    into_int = np.dtype(into).kind in "iu"
    word = np.dtype(into) if into_int else np.dtype(f"u{np.dtype(into).itemsize}")

    @nki.jit
    def k(x):
        v = x.view(into)
        t = nl.ndarray(v.shape, v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
        out = nl.ndarray(v.shape, v.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    if into_int:
        x = _words(src, (128, 32))
    else:  # finite values of the view (on-chip float tiles keep a NaN, not its payload: ir/bitcast.py)
        x = RNG.standard_normal((128, 32 * np.dtype(src).itemsize // np.dtype(into).itemsize)).astype(into).view(src)
    out = np.asarray(_run(k, backend, x))
    want = x.view(into)
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.view(word), want.view(word))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_of_part_of_a_tensor_is_that_part_of_the_tensors_view(backend):
    """``x[16:80, 8:40].view(u8)`` (narrowing: the last axis x4) and ``y[:, 4:20].view(i32)`` (widening: /4, from a
    byte offset that is a whole int32)."""

    @nki.jit
    def k(x, y):
        a = x[16:80, 8:40].view(nl.uint8)
        b = y[:, 4:20].view(nl.int32)
        ta = nl.ndarray(a.shape, nl.uint8, buffer=nl.sbuf)
        tb = nl.ndarray(b.shape, nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        nisa.dma_copy(dst=tb, src=b)
        oa = nl.ndarray(a.shape, nl.uint8, buffer=nl.shared_hbm)
        ob = nl.ndarray(b.shape, nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=oa, src=ta)
        nisa.dma_copy(dst=ob, src=tb)
        return oa, ob

    x, y = _words(np.float32, (128, 64)), _words(np.uint8, (128, 32))
    oa, ob = (np.asarray(o) for o in _run(k, backend, x, y))
    np.testing.assert_array_equal(oa, np.ascontiguousarray(x[16:80, 8:40]).view(np.uint8))
    np.testing.assert_array_equal(ob, np.ascontiguousarray(y[:, 4:20]).view(np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_part_of_an_output_through_a_narrow_view(backend):
    """Only the bytes written change: the high byte of each float32 of out[:, 0:8] (little-endian byte 3, the sign
    and top exponent bits) set to 0x80 flips their sign; every other byte keeps what was stored before."""

    @nki.jit
    def k(x, hi):
        P, F = x.shape
        t = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        h = nl.ndarray((P, 1), nl.uint8, buffer=nl.sbuf)
        bytes_ = out.view(nl.uint8)  # [P, 4F]
        for j in nl.static_range(8):
            nisa.dma_copy(dst=h, src=hi)
            nisa.dma_copy(dst=bytes_[:, 4 * j + 3:4 * j + 4], src=h)
        return out

    x = np.abs(RNG.standard_normal((128, 16))).astype(np.float32) + 0.5
    hi = np.full((128, 1), 0xBF, np.uint8)  # sign bit set, exponent top bits of a value in [0.5, 2)
    out = np.asarray(_run(k, backend, x, hi))
    want = x.copy()
    want.view(np.uint8).reshape(128, 16, 4)[:, :8, 3] = 0xBF
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    assert (out[:, :8] < 0).all() and (out[:, 8:] == x[:, 8:]).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ap_with_dtype_on_an_hbm_tensor_reads_its_bits_as_that_dtype(backend):
    """§2.7's example: an int32 (128, 256) tensor's bits as bf16 through ``.ap([[512, 128], [1, 512]], dtype=bf16)``."""

    @nki.jit
    def k(x):
        t = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[512, 128], [1, 512]], dtype=nl.bfloat16))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    halves = RNG.standard_normal((128, 512)).astype(BF16)
    out = np.asarray(_run(k, backend, halves.view(np.int32)))
    np.testing.assert_array_equal(out, 2.0 * halves.astype(np.float64))  # doubling a bf16 is exact


def _delayed_write(read_base: bool):
    """A write through out's int32 view that waits for a chain of Vector-engine ops, then a DMA read of ``out``
    (``read_base``) or of an unrelated input."""

    @nki.jit
    def k(bits, other):
        P, F = bits.shape
        out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((P, F), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=bits)
        for _ in nl.static_range(6):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1)
        nisa.dma_copy(dst=out.view(nl.int32), src=t)  # WRITE_LINE
        f = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=f, src=out if read_base else other)  # READ_LINE
        out2 = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out2, src=f)
        return out, out2

    return k


def test_the_simulator_orders_a_read_of_the_tensor_after_the_write_through_its_view():
    """The write through the view and the read of ``out`` touch one address key (out's storage, addresses.py), so
    the scheduler's dependence records (deps.py) make the read wait for the write's end; the control, reading
    another tensor, waits for nothing. (In the schedule itself every DMA here also queues behind the one before,
    so the start times alone would not tell the two apart.)"""
    bits = RNG.integers(0, 1000, (128, 512)).astype(np.int32)
    target = nki_dsl.get_target("trn2")
    waits = {}
    for read_base in (True, False):
        kernel = _delayed_write(read_base)
        ir = nki_dsl.trace(kernel, bits, bits.view(np.float32)).ir
        stream = prepare(ir, target).stream(None)
        by_line = {t.op.loc.line: (reads, writes) for t, reads, writes in stream.raw()}
        (_, written), (read, _) = by_line[_line_of("WRITE_LINE")], by_line[_line_of("READ_LINE")]
        deps = DependenceTracker(stream.untracked())
        deps.ready([], written)
        deps.commit([], written, 5000.0, 7)
        waits[read_base] = deps.ready(read, [])
    assert waits[True] == (5000.0, 7)  # RAW on out's bytes, written as int32 and read as float32
    assert waits[False][0] == 0.0
    schedule = nki_dsl.simulate(_delayed_write(True), bits, bits.view(np.float32), target="trn2")[1].schedule
    at = {tag: [(schedule.start[k], schedule.end[k]) for k in range(len(schedule))
                if schedule.templates[schedule.template[k]].op.loc.line == _line_of(tag)]
          for tag in ("WRITE_LINE", "READ_LINE")}  # fmt: skip
    ((w_start, w_end),), ((r_start, _),) = at["WRITE_LINE"], at["READ_LINE"]
    assert r_start >= w_end > w_start


def _line_of(tag: str) -> int:
    import inspect

    source, first = inspect.getsourcelines(_delayed_write)
    (k,) = [i for i, text in enumerate(source) if text.rstrip().endswith(f"# {tag}")]
    return first + k


@pytest.mark.parametrize("make, message", [
    (lambda x: x.view(nl.bool_), "bool_ has no defined bit layout"),
    (lambda x: x[:, 0:6].view(nl.uint8)[:, 1:7].view(nl.int32), r"from 1 of 1 bytes each are not whole 4-byte"),
    (lambda x: x.reshape((128, 2, 32)).permute(0, 2, 1).view(nl.uint8), "last axis must run along the tensor's last"),
])  # fmt: skip
def test_what_an_hbm_view_refuses(make, message):
    @nki.jit
    def k(x):
        v = make(x)
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out, v

    with pytest.raises(NkiApiError, match=message):
        k(np.zeros((128, 64), np.float32))


def test_a_last_dimension_that_does_not_divide_is_refused():
    @nki.jit
    def k(x):
        x.view(nl.int32)
        return x

    with pytest.raises(NkiApiError, match=r"test_hbm_views.py:\d+: view: view\(int32\) of the uint8 HBM tensor 'x' "
                                          r"\[128, 6\]: its last dimension holds 6 bytes, not a whole number of "
                                          r"4-byte int32 elements"):  # fmt: skip
        k(np.zeros((128, 6), np.uint8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_may_return_the_view_of_an_output_it_wrote(backend):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out.view(nl.uint16)

    a = RNG.standard_normal((128, 48)).astype(np.float32)
    out = np.asarray(_run(k, backend, a))
    assert (out.dtype, out.shape) == (np.uint16, (128, 96))
    np.testing.assert_array_equal(out, a.view(np.uint16))


def test_a_shape_familys_symbolic_tensor_is_not_viewed():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.view(nl.int32)[0:128, :])
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(NkiApiError, match=r"view\(int32\) of 'x' \['\$N', 64\]: a shape family's tensor has symbolic "
                                          r"dimensions"):  # fmt: skip
        nki_dsl.trace(k, nki_dsl.spec(("N", 64), "float32", dims={"N": (128, 4096)}))


def _view_swap(read_before_barrier: bool):
    """Each core writes its half of a shared float32 scratch through the scratch's int32 view, then reads the
    other core's half as float32: out[c] = x[1 - c]. Before the barrier, the read races with the peer's write."""

    @nki.jit
    def k(x):
        _, P, F = x.shape
        out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        scratch = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        c = nl.program_id(0)
        t = nl.ndarray((P, F), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c].view(nl.int32))
        nisa.dma_copy(dst=scratch.view(nl.int32)[c], src=t)
        back = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        if read_before_barrier:
            nisa.dma_copy(dst=back, src=scratch[1 - c])
        nisa.core_barrier(scratch, (0, 1))
        if not read_before_barrier:
            nisa.dma_copy(dst=back, src=scratch[1 - c])
        nisa.dma_copy(dst=out[c], src=back)
        return out

    return k


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_two_cores_exchange_through_a_view_of_shared_hbm(backend):
    x = RNG.standard_normal((2, 128, 64)).astype(np.float32)
    out = np.asarray(_view_swap(False)[2](x, backend=backend))
    np.testing.assert_array_equal(out, x[::-1])


def test_core_race_sees_a_write_through_a_view_and_the_peers_read_of_its_tensor():
    with pytest.raises(NkiVerificationError, match=r"core 0 writes %\w+\[128, 64\] .* and core 1 reads %\w+\[128, 64\]"
                                                   r" .* the two cores .* race on the same elements"):  # fmt: skip
        nki_dsl.trace(_view_swap(True)[2], np.zeros((2, 128, 64), np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tile_loaded_before_a_write_through_a_view_keeps_the_old_values(backend):
    """WAR: ``f`` is loaded from the parameter ``a``, then ``a`` is overwritten in place through its int32 view; ``f``
    (stored afterwards) holds the values from before, and the caller's ``a`` holds the new bits."""

    @nki.jit
    def k(a, bits):
        P, F = a.shape
        f = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=f, src=a)
        t = nl.ndarray((P, F), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=bits)
        nisa.dma_copy(dst=a.view(nl.int32), src=t)
        out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=f)
        return out

    a = RNG.standard_normal((128, 64)).astype(np.float32)
    before = a.copy()
    bits = _words(np.int32, (128, 64))
    np.testing.assert_array_equal(np.asarray(_run(k, backend, a, bits)), before)
    np.testing.assert_array_equal(a.view(np.int32), bits)


def test_traced_views_print_and_read_back_through_both_readers():
    from nki_dsl.ir import parser
    from nki_dsl.ir.budget import DEFAULT_BUDGET
    from nki_dsl.ir.fastread import Reader
    from nki_dsl.ir.printer import print_kernel

    x = _words(np.float32, (128, 64))
    text = nki_dsl.trace(write_then_read, x.view(np.int32), 3.0).text
    assert "_v = hbm.view(x=%0) : i32[128, 64] shared_hbm loc(" in text  # the output's int32 view
    fast = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(Reader(text).start())
    slow = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(parser._lark().parse(text))
    assert print_kernel(fast) == print_kernel(slow) == text
