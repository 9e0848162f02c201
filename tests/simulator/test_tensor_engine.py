"""Tensor-engine mechanisms of reference/nki.md §3.2 against figures derived from the target constants: background
and fast LoadStationary, the FP32 rate and the modes that double it."""

import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.targets import get_target
from tests.simulator.support import simulate


def _matmuls(prof):
    s = prof.schedule
    return [(s.start[k], s.end[k]) for k in range(len(s)) if s.templates[s.template[k]].opcode == "nisa.nc_matmul"]


@nki.jit
def two_stationaries(a, b, c, late=False):
    """Two matmuls with different stationary tiles into two PSUM tiles. ``late``: the second stationary is copied
    out of the first matmul's result, so it cannot be loaded while the first matmul multiplies."""
    out = nl.ndarray((a.shape[1], c.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    st1 = nl.load(a)
    st2 = nl.load(b)
    mv = nl.load(c)
    r1 = nisa.nc_matmul(st1, mv)
    if late:
        st2 = nl.copy(r1[:, 0:128], dtype=nl.bfloat16)
    r2 = nisa.nc_matmul(st2, mv)
    nl.store(out, value=nl.add(r1, r2))
    return out


def test_load_stationary_runs_in_the_background_of_the_previous_matmul():
    t = get_target("trn2")
    specs = (nki.spec((128, 128), "bfloat16"),) * 2 + (nki.spec((128, 512), "bfloat16"),)
    (s1, e1), (s2, e2) = _matmuls(simulate(two_stationaries, *specs)[1])
    mm = 512 / t.tensor_ghz  # §2.3 max(min(64, 128), 512) cycles
    # the second stationary was ready long before: its LoadStationary (32 cycles, §3.2 "fast LoadStationary" 4x)
    # ran while the first matmul multiplied, so the two MultiplyMovings run back to back
    assert e1 - s1 == pytest.approx(mm) and e2 - s2 == pytest.approx(mm) and s2 == pytest.approx(e1)


def test_a_stationary_that_arrives_late_exposes_its_load():
    t = get_target("trn2")
    specs = (nki.spec((128, 128), "bfloat16"),) * 2 + (nki.spec((128, 512), "bfloat16"),)
    (s1, e1), (s2, e2) = _matmuls(simulate(two_stationaries, *specs, late=True)[1])
    # the second matmul waited for its stationary (copied out of the first one's result by the Vector engine), so
    # nothing hid the 128 / 4 cycles of loading it: they add to that matmul's time
    assert e2 - s2 == pytest.approx((128 / t.fast_load_stationary_factor + 512) / t.tensor_ghz)


@nki.jit
def one_matmul_mode(a, b, is_transpose=False, onezero=False):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(nl.load(a), nl.load(b), is_transpose=is_transpose, is_stationary_onezero=onezero)
    nl.store(out, value=nl.copy(r))
    return out


def _one_ns(target, dtype, **kw):
    prof = simulate(one_matmul_mode, nki.spec((128, 128), dtype), nki.spec((128, 128), dtype), target=target, **kw)[1]
    ((s, e),) = _matmuls(prof)
    return e - s


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_fp32_rate_and_the_modes_that_double_it(target):
    t = get_target(target)
    bf16 = _one_ns(target, "bfloat16")
    assert bf16 == pytest.approx(128 / t.tensor_ghz)  # §2.3 max(min(64, 128), 128) cycles
    assert _one_ns(target, "float32") == pytest.approx(4 * bf16)  # §3.1 / §3.2 FP32 at 1/4 rate
    # §3.2: an all-zeros-and-ones operand "could lead to 2x better performance if ... float32"
    assert _one_ns(target, "float32", onezero=True) == pytest.approx(2 * bf16)
    # §3.2: NC-v3 transpose mode, "2x speedup in FP32 transpose"; NC-v2 has no such mode
    assert _one_ns(target, "float32", is_transpose=True) == pytest.approx((2 if t.nc_version >= 3 else 4) * bf16)


def test_an_exposed_load_stationary_is_overhead_in_the_busy_split():
    t = get_target("trn2")
    specs = (nki.spec((128, 128), "bfloat16"),) * 2 + (nki.spec((128, 512), "bfloat16"),)
    te = simulate(two_stationaries, *specs, late=True)[1].busy_split["tensor"]
    # two MultiplyMovings of useful work; the first LoadStationary hid behind the loads, the second was exposed
    assert te["useful"] == pytest.approx(2 * 512 / t.tensor_ghz)
    assert te["overhead"] == pytest.approx(128 / t.fast_load_stationary_factor / t.tensor_ghz)
    assert te["contention"] == 0.0


@nki.jit
def two_groups(a, b, k_tiles=4):
    """Two PSUM accumulation groups in different banks; the first is copied out while the second accumulates."""
    out = nl.ndarray((2 * a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(a)
    mv = nl.load(b)
    # the copies' SBUF destinations are allocated up front, so they share no bytes with the operands (an
    # allocation reusing the operands' bytes would make the first copy wait for the last matmul reading them)
    r1 = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    r2 = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    g1 = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    g2 = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for _ in nl.affine_range(k_tiles):
        g1 += nisa.nc_matmul(st, mv)
    for _ in nl.affine_range(k_tiles):
        g2 += nisa.nc_matmul(st, mv)
    r1[...] = nl.copy(g1)
    nl.store(out[0:128, :], value=r1)
    r2[...] = nl.copy(g2)
    nl.store(out[128:256, :], value=r2)
    return out


def test_psum_groups_in_different_banks_overlap_with_their_evictions():
    prof = simulate(two_groups, nki.spec((128, 128), "bfloat16"), nki.spec((128, 512), "bfloat16"))[1]
    s = prof.schedule
    mm = _matmuls(prof)
    copies = [(s.start[k], s.end[k]) for k in range(len(s)) if s.templates[s.template[k]].opcode == "nisa.tensor_copy"]
    # reading a bank waits for the last matmul of its accumulation group (§1.1: one group per bank) ...
    assert copies[0][0] == pytest.approx(mm[3][1])
    # ... and runs while the Tensor engine accumulates the other group in another bank
    assert copies[0][0] < mm[7][1] and copies[0][1] > mm[4][0]
    assert copies[1][0] >= mm[7][1]
