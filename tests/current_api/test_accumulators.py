"""The engines' accumulator registers that persist across instructions (reference/nki.md §2.7 ScalarE activation,
VectorE tensor_scalar_reduce and the note after it; nki_dsl/current/isa/accumulators.py): reduce_cmd reset / idle /
reduce / reset_reduce / load_reduce on the Scalar and the Vector engine's registers, read out by reduce_res.
Each kernel against a float64 NumPy formula on the NumPy reference, the JAX backend and the simulator; then the
refusals of registers read undefined (never set, clobbered by a Vector idle, clobbered at the end of a loop body)."""

import inspect

import ml_dtypes
import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError

BACKENDS = ["numpy", "jax", "simulator"]
RNG = np.random.default_rng(12)
X = RNG.uniform(-2, 2, (128, 2048)).astype(np.float32)
CHUNK = 512
F64 = X.astype(np.float64)


def run(kernel, backend, *args):
    out = nki.simulate(kernel)(*args) if backend == "simulator" else kernel(*args, backend=backend)
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)


def line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(k for k, src in enumerate(lines) if text in src)


def _load(x, cols):
    t = nl.ndarray((x.shape[0], CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, cols])
    return t


def _column_out(col):
    out = nl.ndarray(col.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=col)
    return out


# -- Scalar engine: a row sum accumulated across column chunks, read out with the last one -------------------------
@nki.jit
def sum_of_squares_in_registers(x):
    """The RMSNorm-style sum of squares of each row: the registers are zeroed once, every chunk but the last adds
    to them without reduce_res (the loop stays symbolic), the last chunk adds and reads out."""
    chunks = x.shape[1] // CHUNK
    sq = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    first = _load(x, nl.ds(0, CHUNK))
    nisa.activation(dst=sq, op=nl.square, data=first, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    for c in nl.affine_range(chunks - 2):
        t = _load(x, nl.ds((c + 1) * CHUNK, CHUNK))
        nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    last = _load(x, nl.ds((chunks - 1) * CHUNK, CHUNK))
    nisa.activation(dst=sq, op=nl.square, data=last, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reduce)
    return _column_out(total)


@nki.jit
def exp_sum_first_chunk_resets(x):
    """As production kernels write it: ``reset_reduce if c == 0 else reduce`` (the loop is unrolled at
    specialisation), reduce_res only on the last chunk; then ``idle`` reads the registers out unchanged."""
    chunks = x.shape[1] // CHUNK
    e = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    again = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        t = _load(x, nl.ds(c * CHUNK, CHUNK))
        cmd = nisa.reduce_cmd.reset_reduce if c == 0 else nisa.reduce_cmd.reduce
        nisa.activation(dst=e, op=nl.exp, data=t, scale=0.5, reduce_op=nl.add, reduce_cmd=cmd,
                        reduce_res=total if c == chunks - 1 else None)
    nisa.activation(dst=e, op=nl.exp, data=t, reduce_res=again)  # idle: the Scalar registers stay as they are
    return _column_out(total), _column_out(again)


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_sum_accumulated_across_column_chunks_reads_out_with_the_last(backend):
    got = run(sum_of_squares_in_registers, backend, X)
    np.testing.assert_allclose(got[:, 0], (F64 ** 2).sum(axis=1), rtol=2e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_chunk_resets_the_scalar_registers_and_idle_leaves_them(backend):
    total, again = run(exp_sum_first_chunk_resets, backend, X)
    want = np.exp(0.5 * F64).sum(axis=1)
    np.testing.assert_allclose(total[:, 0], want, rtol=2e-6)
    np.testing.assert_array_equal(again, total)


# -- Vector engine: tensor_scalar_reduce, load_reduce, exponential, select_reduce --------------------------------
@nki.jit
def running_max_and_sums(x, init):
    """Per row: the max of x - 1 over all chunks (reset_reduce, then reduce), read out negated; the sum of
    exp(x - 2) over all chunks started from reduce_init (exponential's load_reduce, then reduce); the sum of 3 x
    over the first chunk started from a [P, 1] tile (tensor_scalar_reduce's load_reduce)."""
    chunks = x.shape[1] // CHUNK
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    neg_max = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        t = _load(x, nl.ds(c * CHUNK, CHUNK))
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.subtract, operand0=1.0, reduce_op=nl.maximum,
                                  reduce_cmd=nisa.reduce_cmd.reset_reduce if c == 0 else nisa.reduce_cmd.reduce,
                                  reduce_res=neg_max if c == chunks - 1 else None, reduce_res_negate=True)
    sums = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=d, src=_load(x, nl.ds(0, CHUNK)), max_value=2.0, reduce_cmd=nisa.reduce_cmd.load_reduce,
                     reduce_init=10.0)
    for c in nl.affine_range(chunks - 1):
        nisa.exponential(dst=d, src=_load(x, nl.ds((c + 1) * CHUNK, CHUNK)), max_value=2.0,
                         reduce_cmd=nisa.reduce_cmd.reduce)
    nisa.select_reduce(dst=d, predicate=d, on_true=d, on_false=0.0, reduce_res=sums, reduce_op=nl.add,
                       reduce_cmd=nisa.reduce_cmd.reset)  # reset: the sums go, the registers are 0
    zero = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=d, src=_load(x, nl.ds(0, CHUNK)), max_value=2.0, reduce_cmd=nisa.reduce_cmd.reduce,
                     reduce_res=zero)  # adds to the 0 the reset left
    start = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=start, src=init)
    from_tile = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=_load(x, nl.ds(0, CHUNK)), op0=nl.multiply, operand0=3.0,
                              reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=start,
                              reduce_res=from_tile)
    return _column_out(neg_max), _column_out(sums), _column_out(zero), _column_out(from_tile)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_registers_reduce_and_load_reduce_from_reduce_init(backend):
    init = RNG.uniform(-5, 5, (128, 1)).astype(np.float32)
    neg_max, sums, zero, from_tile = run(running_max_and_sums, backend, X, init)
    np.testing.assert_array_equal(neg_max[:, 0], -(F64 - 1.0).max(axis=1))
    np.testing.assert_array_equal(sums, np.zeros((128, 1)))
    first = F64[:, :CHUNK]
    np.testing.assert_allclose(zero[:, 0], np.exp(first - 2.0).sum(axis=1), rtol=2e-6)
    np.testing.assert_allclose(from_tile[:, 0], init[:, 0] + (3.0 * first).sum(axis=1), rtol=2e-6, atol=2e-5)


@nki.jit
def exp_sum_from_reduce_init(x):
    """The sum of exp(x - 2) over every chunk, started from reduce_init=10 (load_reduce) then continued."""
    chunks = x.shape[1] // CHUNK
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        nisa.exponential(dst=d, src=_load(x, nl.ds(c * CHUNK, CHUNK)), max_value=2.0, reduce_init=10.0,
                         reduce_cmd=nisa.reduce_cmd.load_reduce if c == 0 else nisa.reduce_cmd.reduce,
                         reduce_res=total if c == chunks - 1 else None)
    return _column_out(total)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exponential_load_reduce_starts_from_reduce_init(backend):
    got = run(exp_sum_from_reduce_init, backend, X)
    np.testing.assert_allclose(got[:, 0], 10.0 + np.exp(F64 - 2.0).sum(axis=1), rtol=2e-6)


# -- tensor_scalar_cumulative carrying its register across calls -------------------------------------------------
@nki.jit
def cumsum_across_chunks(x):
    """The running sum of 2 x along each whole row, one chunk per call: the first starts the register
    (reset_reduce), every later call continues it (reduce)."""
    chunks = x.shape[1] // CHUNK
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    first = _load(x, nl.ds(0, CHUNK))
    r = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=r, src=first, op0=nl.multiply, op1=nl.add, imm0=2.0)
    nisa.dma_copy(dst=out[:, nl.ds(0, CHUNK)], src=r)
    for c in nl.affine_range(chunks - 1):
        t = _load(x, nl.ds((c + 1) * CHUNK, CHUNK))
        r2 = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=r2, src=t, op0=nl.multiply, op1=nl.add, imm0=2.0,
                                      reduce_cmd=nisa.reduce_cmd.reduce)
        nisa.dma_copy(dst=out[:, nl.ds((c + 1) * CHUNK, CHUNK)], src=r2)
    return out


@nki.jit
def running_max_bf16_then_continued(x):
    """A running max written to a bf16 dst: the register keeps fp32, so the next call continues exactly; then
    load_reduce restarts from imm1."""
    out = nl.ndarray((128, 3 * CHUNK), nl.float32, buffer=nl.shared_hbm)
    lo = nl.ndarray((128, CHUNK), nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=lo, src=_load(x, nl.ds(0, CHUNK)), op0=nl.add, op1=nl.maximum, imm0=0.001)
    hi = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=hi, src=_load(x, nl.ds(CHUNK, CHUNK)), op0=nl.add, op1=nl.maximum,
                                  imm0=0.001, reduce_cmd=nisa.reduce_cmd.reduce)
    again = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=again, src=_load(x, nl.ds(CHUNK, CHUNK)), op0=nl.add, op1=nl.maximum,
                                  imm0=0.001, imm1=1.5, reduce_cmd=nisa.reduce_cmd.load_reduce)
    wide = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=wide, src=lo)
    nisa.dma_copy(dst=out[:, nl.ds(0, CHUNK)], src=wide)
    nisa.dma_copy(dst=out[:, nl.ds(CHUNK, CHUNK)], src=hi)
    nisa.dma_copy(dst=out[:, nl.ds(2 * CHUNK, CHUNK)], src=again)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_scalar_cumulative_carries_its_register_across_calls(backend):
    np.testing.assert_allclose(run(cumsum_across_chunks, backend, X), np.cumsum(2.0 * F64, axis=1), rtol=1e-5,
                               atol=2e-4)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_low_precision_dst_does_not_round_the_register(backend):
    got = run(running_max_bf16_then_continued, backend, X)
    shifted = F64[:, :2 * CHUNK] + 0.001
    exact = np.maximum.accumulate(shifted, axis=1)
    bf16 = exact[:, :CHUNK].astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got[:, :CHUNK], bf16.astype(np.float64))
    np.testing.assert_allclose(got[:, CHUNK:2 * CHUNK], exact[:, CHUNK:], rtol=1e-7)
    np.testing.assert_allclose(got[:, 2 * CHUNK:], np.maximum.accumulate(np.maximum(shifted[:, CHUNK:], 1.5), 1),
                               rtol=1e-7)  # fmt: skip


# -- lanes are partitions; each core of an LNC=2 launch has its own registers --------------------------------------
@nki.jit
def halves_then_whole(x):
    """Lanes 0..63 set by one instruction, lanes 64..127 by another; a third continues all 128."""
    t = _load(x, nl.ds(0, CHUNK))
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d[0:64], op=nl.copy, data=t[0:64], reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.activation(dst=d[64:128], op=nl.copy, data=t[64:128], scale=2.0, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.copy, data=t, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=total)
    return _column_out(total)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_lane_is_a_partition(backend):
    got = run(halves_then_whole, backend, X)
    row = F64[:, :CHUNK].sum(axis=1)
    np.testing.assert_allclose(got[:, 0], np.concatenate([2 * row[:64], 3 * row[64:]]), rtol=2e-6, atol=2e-5)


@nki.jit
def quadrant_sums(x):
    """Per 32-partition quadrant (a loop index in the partition start): the registers of those lanes only, set and
    read out in the same iteration."""
    t = _load(x, nl.ds(0, CHUNK))
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    for q in nl.affine_range(4):
        nisa.tensor_scalar_reduce(dst=d[nl.ds(q * 32, 32)], data=t[nl.ds(q * 32, 32)], op0=nl.multiply,
                                  operand0=2.0, reduce_op=nl.add, reduce_res=total[nl.ds(q * 32, 32)])
    return _column_out(total)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_index_in_the_partition_start_picks_the_lanes(backend):
    got = run(quadrant_sums, backend, X)
    np.testing.assert_allclose(got[:, 0], 2 * F64[:, :CHUNK].sum(axis=1), rtol=2e-6, atol=2e-5)
    ir = nki_dsl.trace(quadrant_sums, X).ir
    (loop,) = [s for s in ir.body if hasattr(s, "body")]
    assert loop.kind == "affine"  # each iteration its own lanes: independent iterations
    reduce = next(s for s in loop.body if getattr(s, "name", "") == "nisa.tensor_scalar_reduce")
    assert str(reduce.operands["reduce_res"].index[0]) == "d0 + 32*i0"


@nki.jit
def per_core_row_sums(x):
    """Each core of kernel[2] sums its half of the rows in its own registers."""
    out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    rows = nl.ds(nl.program_id(0) * 128, 128)
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(x.shape[1] // CHUNK):
        t = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[rows, nl.ds(c * CHUNK, CHUNK)])
        nisa.activation(dst=d, op=nl.copy, data=t, reduce_cmd=nisa.reduce_cmd.reset_reduce if c == 0 else
                        nisa.reduce_cmd.reduce)  # fmt: skip
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.copy, data=t, reduce_cmd=nisa.reduce_cmd.idle, reduce_res=total)
    nisa.dma_copy(dst=out[rows, :], src=total)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_core_has_its_own_registers(backend):
    x = RNG.uniform(-2, 2, (256, 1024)).astype(np.float32)
    launch = nki.simulate(per_core_row_sums)[2] if backend == "simulator" else per_core_row_sums[2]
    got = np.asarray(launch(x) if backend == "simulator" else launch(x, backend=backend))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got[:, 0], x64.sum(axis=1), rtol=2e-6, atol=2e-5)


# -- the IR is explicit: an accumulator tensor, ordinary ops, one read-out -----------------------------------------
def test_the_registers_are_an_ordinary_tensor_at_the_top_of_the_kernel():
    ir = nki_dsl.trace(sum_of_squares_in_registers, X).ir
    assert ir.body[0].name == "alloc" and ir.body[0].result.name == "scalar_accumulator"
    assert tuple(ir.body[0].result.type.shape) == (128, 1) and ir.body[0].result.type.dtype == "float32"
    loops = [s for s in ir.body if hasattr(s, "body")]
    assert [lp.kind for lp in loops] == ["sequential"]  # the loop carries the registers
    acts = [s for s, _ in ir.walk() if getattr(s, "name", "") == "nisa.activation"]
    # three squares into the registers, then the read-out (ScalarE ActReadAccumulator, §3.3) into total
    assert [a.attrs["reduce_cmd"] for a in acts] == ["reset_reduce", "reduce", "reduce", "idle"]
    assert all(a.operands["reduce_res"].tensor.name == "scalar_accumulator" for a in acts[:3])
    assert acts[3].attrs["op"] == "copy" and acts[3].operands["data"].tensor.name == "scalar_accumulator"


def test_the_read_out_costs_one_small_scalar_instruction():
    @nki.jit
    def with_read_out(x, read):
        t = _load(x, nl.ds(0, CHUNK))
        d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=total, value=0.0)
        nisa.activation(dst=d, op=nl.exp, data=t, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                        reduce_res=total if read else None)
        return _column_out(total)

    _, with_it = nki.simulate(with_read_out, X, True)
    _, without = nki.simulate(with_read_out, X, False)
    assert with_it.instructions == without.instructions + 1
    # a [128, 1] ScalarE instruction: its fixed cost, well under the exponential over 512 columns before it
    extra = with_it.unit_busy_ns["scalar"] - without.unit_busy_ns["scalar"]
    assert 0 < extra < without.unit_busy_ns["scalar"], (extra, without.unit_busy_ns)


# -- refusals: registers read undefined ----------------------------------------------------------------------------
def _refused(kernel, *args) -> NkiApiError:
    with pytest.raises(NkiApiError) as e:
        nki_dsl.trace(kernel, *args)
    return e.value


@nki.jit
def continues_registers_never_set(x):
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.exp, data=_load(x, nl.ds(0, CHUNK)), reduce_cmd=nisa.reduce_cmd.reduce,
                    reduce_res=total)
    return _column_out(total)


def test_continuing_registers_nothing_set_is_refused():
    e = _refused(continues_registers_never_set, X)
    assert e.loc.line == line_of(continues_registers_never_set, "reduce_cmd=nisa.reduce_cmd.reduce")
    assert e.op == "nisa.activation"
    assert "reduce_cmd=reduce continues the Scalar engine's accumulator registers, lanes 0..127 of which no " \
           "instruction of this kernel has set" in e.bare_message


@nki.jit
def reads_lanes_nothing_set(x):
    t = _load(x, nl.ds(0, CHUNK))
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d[0:64], data=t[0:64], op0=nl.add, operand0=0.0, reduce_op=nl.add)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_res=total,
                              reduce_cmd=nisa.reduce_cmd.reduce)
    return _column_out(total)


def test_continuing_lanes_an_instruction_on_fewer_partitions_left_unset_is_refused():
    e = _refused(reads_lanes_nothing_set, X)
    assert e.op == "nisa.tensor_scalar_reduce"
    assert "lanes 64..127 of which no instruction of this kernel has set" in e.bare_message


@nki.jit
def idle_reduce_res_without_a_reduction(x):
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.exp, data=_load(x, nl.ds(0, CHUNK)), reduce_op=nl.add, reduce_res=total)
    return _column_out(total)


def test_idle_with_reduce_res_reads_the_registers_and_says_how_to_get_this_sum():
    e = _refused(idle_reduce_res_without_a_reduction, X)
    assert "reduce_cmd=idle reads out (reduce_res=) the Scalar engine's accumulator registers" in e.bare_message
    assert "pass reduce_cmd=nisa.reduce_cmd.reset_reduce to read out this instruction's own reduction" \
           in e.bare_message


@nki.jit
def vector_idle_then_continue(x, fix):
    t = _load(x, nl.ds(0, CHUNK))
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add)
    nisa.exponential(dst=d, src=t)  # idle: may clobber the Vector registers
    if fix:
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_res=total,
                              reduce_cmd=nisa.reduce_cmd.reduce)
    return _column_out(total)


def test_a_vector_idle_clobbers_the_registers_until_they_are_set_again():
    e = _refused(vector_idle_then_continue, X, False)
    assert e.op == "nisa.tensor_scalar_reduce"
    assert e.loc.line == line_of(vector_idle_then_continue, "reduce_res=total,")
    idle = line_of(vector_idle_then_continue, "nisa.exponential(")
    assert (f"reduce_cmd=reduce continues the Vector engine's accumulator registers, but line {idle} "
            f"(nisa.exponential with reduce_cmd=idle) may have clobbered them") in e.bare_message
    got = vector_idle_then_continue(X, True)  # reset_reduce after the idle use, as §2.7 asks
    np.testing.assert_allclose(np.asarray(got)[:, 0], 2 * F64[:, :CHUNK].sum(axis=1), rtol=2e-6, atol=2e-5)


@nki.jit
def scalar_idle_keeps_registers(x):
    t = _load(x, nl.ds(0, CHUNK))
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.copy, data=t, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.activation(dst=d, op=nl.exp, data=t)  # idle on the Scalar engine: untouched (§2.7)
    total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.copy, data=t, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=total)
    return _column_out(total)


def test_a_scalar_idle_leaves_the_registers():
    got = scalar_idle_keeps_registers(X)
    np.testing.assert_allclose(np.asarray(got)[:, 0], 2 * F64[:, :CHUNK].sum(axis=1), rtol=2e-6, atol=2e-5)


@nki.jit
def clobbered_at_the_end_of_each_iteration(x, fix):
    d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
    t0 = _load(x, nl.ds(0, CHUNK))
    nisa.tensor_scalar_reduce(dst=d, data=t0, op0=nl.add, operand0=0.0, reduce_op=nl.add)
    for c in nl.affine_range(x.shape[1] // CHUNK):
        t = _load(x, nl.ds(c * CHUNK, CHUNK))
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add,  # continues
                                  reduce_cmd=nisa.reduce_cmd.reduce)
        nisa.select_reduce(dst=d, predicate=d, on_true=t, on_false=0.0)  # idle
        if fix:
            nisa.tensor_scalar_reduce(dst=d, data=t0, op0=nl.add, operand0=0.0, reduce_op=nl.add,
                                      reduce_cmd=nisa.reduce_cmd.reset)
    return _column_out(d[:, 0:1])


def test_a_loop_body_that_continues_the_registers_and_ends_clobbering_them_is_refused():
    e = _refused(clobbered_at_the_end_of_each_iteration, X, False)
    k = clobbered_at_the_end_of_each_iteration
    assert e.loc.line == line_of(k, "# continues")
    assert (f"from the previous iteration of the loop at line {line_of(k, 'for c in')}, but line "
            f"{line_of(k, 'nisa.select_reduce(')} (nisa.select_reduce with reduce_cmd=idle) clobbers them at the end "
            f"of every iteration") in e.bare_message
    nki_dsl.trace(k, X, True)  # set again after the idle use: accepted


def test_a_loop_of_one_iteration_hands_nothing_on():
    nki_dsl.trace(clobbered_at_the_end_of_each_iteration, X[:, :CHUNK], False)


@pytest.mark.parametrize("call, message", [
    (lambda t, d, r: nisa.activation(dst=d, op=nl.exp, data=t, reduce_cmd=nisa.reduce_cmd.load_reduce),
     "reduce_cmd=load_reduce is not one of idle, reset, reduce, reset_reduce for this instruction: load_reduce "
     "starts from reduce_init, which it does not take"),
    (lambda t, d, r: nisa.select_reduce(dst=d, predicate=t, on_true=t, on_false=0.0,
                                        reduce_cmd=nisa.reduce_cmd.load_reduce),
     "reduce_cmd=load_reduce is not one of"),
    (lambda t, d, r: nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add,
                                               reduce_init=1.0),
     "reduce_init= is given with reduce_cmd=load_reduce, which starts from it, and only then"),
    (lambda t, d, r: nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=0.0, reduce_op=nl.add,
                                               reduce_cmd=nisa.reduce_cmd.load_reduce),
     "reduce_init= is given with reduce_cmd=load_reduce"),
    (lambda t, d, r: nisa.tensor_scalar_cumulative(dst=d, src=t, op0=nl.add, op1=nl.add, imm0=0.0,
                                                   reduce_cmd=nisa.reduce_cmd.idle),
     "reduce_cmd=idle: the instruction runs its register through every element"),
    (lambda t, d, r: nisa.tensor_scalar_cumulative(dst=d, src=t, op0=nl.add, op1=nl.add, imm0=0.0,
                                                   reduce_cmd=nisa.reduce_cmd.load_reduce),
     "imm1= is given with reduce_cmd=load_reduce"),
    (lambda t, d, r: nisa.exponential(dst=d, src=t, reduce_res=r),
     "reduce_cmd=idle reads out (reduce_res=) the Vector engine's accumulator registers, but line"),
])  # fmt: skip
def test_misused_commands_are_refused_at_the_kernel_line(call, message):
    @nki.jit
    def k(x):
        t = _load(x, nl.ds(0, CHUNK))
        d = nl.ndarray((128, CHUNK), nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        call(t, d, r)
        return _column_out(r)

    e = _refused(k, X)
    assert message in e.bare_message
    assert e.loc.file == __file__
