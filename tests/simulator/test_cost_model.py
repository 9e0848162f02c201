"""The model's overheads, penalties and contention rules against figures derived here from the target constants and
the reference/nki.md section each comes from (never from the simulator's own output)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from benchmarks.fidelity import exp_chain  # the calibration row's micro-kernel: tiny dependent exps
from nki_dsl.targets import get_target
from tests.simulator.support import simulate


def _rows(prof, opcode):
    s = prof.schedule
    return [(s.start[k], s.end[k]) for k in range(len(s)) if s.templates[s.template[k]].opcode == opcode]


def _durations(prof, opcode):
    return [e - s for s, e in _rows(prof, opcode)]


def test_static_overhead_of_tiny_dependent_instructions():
    t = get_target("trn2")
    prof = simulate(exp_chain, nki.spec((128, 1), "float32"), reps=6)[1]
    first, *rest = _durations(prof, "nisa.activation")
    # §3.3: N << 128 adds the ~100-cycle static overhead to the MIN_II floor (§2.3 max(MIN_II, N));
    assert first == pytest.approx((t.min_ii_cycles + t.vector_static_overhead_cycles) / t.scalar_ghz)
    # depending on the previous instruction's output also exposes the ~60-cycle SBUF access overhead twice (the
    # producer's write access completes before the consumer's read access starts)
    dependent = t.min_ii_cycles + t.vector_static_overhead_cycles + 2 * t.sbuf_access_overhead_cycles
    assert rest == [pytest.approx(dependent / t.scalar_ghz)] * 5
    # ... which lands near the perf guide's measured tiny dependent ScalarE interval of 264 cycles (§3.3)
    assert abs(dependent - 264) / 264 < 0.1


@nki.jit
def exp_loop(x, reps=4, chained=True):
    """One tiny Scalar instruction per sequential iteration; ``chained``: each reads the tile the previous
    iteration's instruction wrote (its only predecessor on the Scalar engine is across the loop's back-edge)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    src = nl.load(x)
    for _ in nl.sequential_range(reps):
        t[...] = nl.exp(t if chained else src)
    nl.store(out, value=t)
    return out


def test_static_overhead_is_charged_across_the_loop_back_edge():
    t = get_target("trn2")
    prof = simulate(exp_loop, nki.spec((128, 1), "float32"))[1]
    first, *rest = _durations(prof, "nisa.activation")
    tiny = t.min_ii_cycles + t.vector_static_overhead_cycles  # §3.3 N << 128: static overhead on the MIN_II floor
    assert first == pytest.approx(tiny / t.scalar_ghz)  # nothing ran before it on the Scalar engine
    # iterations 2..4 read the previous iteration's output: + the ~60-cycle SBUF access overhead of the producer's
    # write and of the consumer's read (§3.3)
    assert rest == [pytest.approx((tiny + 2 * t.sbuf_access_overhead_cycles) / t.scalar_ghz)] * 3
    prof = simulate(exp_loop, nki.spec((128, 1), "float32"), chained=False)[1]
    assert _durations(prof, "nisa.activation") == [pytest.approx(tiny / t.scalar_ghz)] * 4  # no dependence


@nki.jit
def zero_accumulate_copy(a, b):
    """memset (Vector) zeroes a PSUM tile, one matmul (Tensor) accumulates into it, a copy (Vector) reads it."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(nl.load(a), nl.load(b))
    nl.store(out, value=nl.copy(acc))
    return out


def test_an_output_another_engine_overwrote_is_no_dependence():
    # The copy's previous Vector instruction is the memset, whose output the matmul has since overwritten: the
    # copy waits for the Tensor engine, not for its own engine's pipeline, so it pays no static overhead (§3.3).
    t = get_target("trn2")
    prof = simulate(zero_accumulate_copy, nki.spec((128, 128), "float32"), nki.spec((128, 512), "float32"))[1]
    assert _durations(prof, "nisa.tensor_copy") == [pytest.approx(512 / t.vector_ghz)]  # §2.3 max(MIN_II, N)


def test_large_independent_instructions_pay_no_static_overhead():
    t = get_target("trn2")
    prof = simulate(exp_chain, nki.spec((128, 2048), "float32"), reps=1)[1]
    assert _durations(prof, "nisa.activation") == [pytest.approx(2048 / t.scalar_ghz)]  # §2.3 max(MIN_II, N)


@nki.jit
def copies(x, stride=8):
    out = nl.ndarray((128, 256), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)  # [128, 2048]
    i_p, i_f = nl.arange(128)[:, None], nl.arange(256)[None, :]
    near = nl.copy(a[i_p, i_f])  # contiguous: 4 B stride
    far = nl.copy(a[i_p, stride * i_f])  # every 8th fp32 element: 32 B stride
    nl.store(out, value=nl.add(near, far))
    return out


def test_minor_stride_over_16_bytes_halves_bandwidth():
    t = get_target("trn1")  # no Vector perf modes on NC-v2: the §2.3 baseline N cycles per copy
    prof = simulate(copies, nki.spec((128, 2048), "float32"), target="trn1")[1]
    near, far = _durations(prof, "nisa.tensor_copy")
    assert near == pytest.approx(256 / t.vector_ghz)
    assert t.stride_penalty_min_bytes < 8 * 4
    assert far == pytest.approx(t.stride_penalty * 256 / t.vector_ghz)  # §3.3 "stride > 16 B halves bandwidth"
    prof = simulate(copies, nki.spec((128, 2048), "float32"), target="trn1", stride=4)[1]
    assert _durations(prof, "nisa.tensor_copy")[1] == pytest.approx(256 / t.vector_ghz)  # 16 B: not over


@nki.jit
def contention(x, w):
    """A Vector and a GpSimd instruction on the same SBUF tile; a Vector and a Scalar one on the same PSUM tile."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)  # [128, 512]
    b = nl.load(w)  # [128, 128]
    v = nisa.tensor_scalar(a, nl.multiply, 2.0, engine=nki.isa.engine.vector)
    g = nisa.tensor_scalar(a, nl.add, 1.0, engine=nki.isa.engine.gpsimd)
    m = nisa.nc_matmul(b, a)  # PSUM [128, 512]
    c = nisa.tensor_copy(m, engine=nki.isa.engine.vector)
    e = nisa.activation(nl.exp, m)
    nl.store(out, value=nl.add(nl.add(v, g), nl.add(c, e)))
    return out


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_nc_v2_engine_pairs_cannot_share_sbuf_or_psum(target):
    prof = simulate(contention, nki.spec((128, 512), "float32"), nki.spec((128, 128), "float32"), target=target)[1]
    s = prof.schedule
    by = {}
    for k in range(len(s)):
        tm = s.templates[s.template[k]]
        by.setdefault((tm.opcode, s.units[s.unit[k]]), []).append((s.start[k], s.end[k]))
    vector_sbuf = by[("nisa.tensor_scalar", "vector")][0]
    gpsimd_sbuf = by[("nisa.tensor_scalar", "gpsimd")][0]
    vector_psum = by[("nisa.tensor_copy", "vector")][0]
    scalar_psum = by[("nisa.activation", "scalar")][0]
    # §3.3: on NC-v2 Vector and GpSimd cannot access SBUF in parallel, nor Vector and Scalar PSUM; lifted on NC-v3
    serialised = get_target(target).nc_version == 2
    assert _overlap(vector_sbuf, gpsimd_sbuf) is not serialised
    assert _overlap(vector_psum, scalar_psum) is not serialised


@nki.jit
def transposes(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.transpose(nl.load(x)))  # on the Tensor engine (> 32 x 32)
    return out


@pytest.mark.parametrize("shape", [(128, 64), (64, 128)])
def test_tensor_engine_transpose_cost(shape):
    t = get_target("trn2")
    prof = simulate(transposes, nki.spec(shape, "float32"))[1]
    P, F = shape
    # §2.3 nc_transpose on the Tensor engine: max(P, min(64, F)) cycles
    assert _durations(prof, "nisa.nc_transpose") == [pytest.approx(max(P, min(64, F)) / t.tensor_ghz)]


@nki.jit
def dma_transposes(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    plain = nl.load(x)  # [128, 512]
    from_hbm = nisa.dma_transpose(x[0:128, 0:128])  # HBM -> SBUF
    from_sbuf = nisa.dma_transpose(plain[0:128, 0:128])  # SBUF -> SBUF
    nl.store(out[0:128, 0:128], value=nl.add(from_hbm, from_sbuf))
    return out


def test_dma_transpose_streams_at_its_documented_fraction():
    t = get_target("trn2")
    prof = simulate(dma_transposes, nki.spec((128, 512), "float32"))[1]
    (hbm, sbuf), = [[tm for tm in prof.schedule.templates if tm.opcode == "nisa.dma_transpose"]]
    # 128 x 128 fp32: 512 B per partition, 8 partitions per engine (§3.4). The busiest engine pays a descriptor per
    # partition (the time to stream 256 B at peak) and streams its 8 x 512 B at the transpose fraction of peak,
    # then writes its 4 B completion semaphore (one more descriptor).
    desc = 256 / t.dma_engine_bytes_per_ns
    semaphore = desc + 4 / t.dma_engine_bytes_per_ns

    def engine_ns(fraction):
        return 8 * desc + 8 * 512 / (t.dma_engine_bytes_per_ns * fraction) + semaphore

    assert hbm.payload_ns == pytest.approx(engine_ns(t.dma_transpose_hbm_fraction))  # §3.4: up to 90 % from HBM
    assert sbuf.payload_ns == pytest.approx(engine_ns(t.dma_transpose_sbuf_fraction))  # §3.4: 50 % SBUF to SBUF


def test_psum_accumulation_is_one_instruction_per_matmul_writing_the_accumulator():
    from kernels.matmul import matmul_tiled

    prof = simulate(matmul_tiled, np.ones((256, 256), np.float32), np.ones((256, 512), np.float32))[1]
    # lhsT [K=256, M=256], rhs [256, N=512] in 128 x 512 output tiles: per output tile, 2 K steps of (2 loads + 1
    # matmul accumulating into PSUM), a copy out and a store; no separate accumulate instruction, and no memset:
    # the accumulator's zeros fold into the first matmul of the group (lower-language, ``zero_first``)
    assert len(_durations(prof, "nisa.nc_matmul")) == 2 * 2
    assert prof.instructions == 2 * (2 * 3 + 2)
