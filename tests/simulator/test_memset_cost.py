"""memset's §2.3 rule: writing zero to a 16-bit tile takes max(MIN_II, N/2) cycles, any other value or dtype
max(MIN_II, N). Measured as differences of scheduled durations, so the per-instruction overhead cancels."""

import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.targets import get_target
from tests.simulator.support import simulate

F = 2048


def _fill(value, engine):
    @nki.jit
    def fill(a):
        out = nl.ndarray((128, F), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.memset((128, F), value, a.dtype, engine=engine))
        return out

    return fill


def _memset_ns(value, dtype, target, engine=nisa.vector_engine):
    s = simulate(_fill(value, engine), nki.spec((128, F), dtype), target=target)[1].schedule
    (k,) = [k for k in range(len(s)) if s.templates[s.template[k]].opcode == "nisa.memset"]
    return s.end[k] - s.start[k]


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_zero_memset_of_a_16_bit_tile_takes_half_the_cycles_of_any_other(target):
    ghz = get_target(target).vector_ghz
    zero, one = _memset_ns(0.0, "bfloat16", target), _memset_ns(1.0, "bfloat16", target)
    assert one - zero == pytest.approx((F - F / 2) / ghz)  # N cycles against N/2
    assert _memset_ns(0.0, "float32", target) == pytest.approx(one)  # zero is fast only in 16 bits
    assert _memset_ns(0.0, "float16", target) == pytest.approx(zero)


def test_a_memset_on_gpsimd_takes_its_start_cost_plus_n_cycles_whatever_the_value():
    t = get_target("trn2")
    zero = _memset_ns(0.0, "bfloat16", "trn2", nisa.gpsimd_engine)
    assert zero == pytest.approx(_memset_ns(1.0, "bfloat16", "trn2", nisa.gpsimd_engine))  # no 16-bit zero rate
    assert zero >= (t.gpsimd_start_cycles + F) / t.gpsimd_ghz
