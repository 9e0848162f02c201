"""A PSUM accumulation whose nl.zeros lowering folded into its first matmul (``zero_first``): no memset runs, the
first matmul of the group overwrites the bank (it reads nothing of it), the later ones accumulate (read it)."""

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.backends.simulator.addresses import PSUM_KEY
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.targets import get_target
from tests.simulator.support import resident_matmuls, simulate, specialized


def test_first_matmul_of_a_group_overwrites_and_no_memset_runs():
    a, b = (np.random.default_rng(3).standard_normal(s).astype(np.float32) for s in ((128, 128), (128, 512)))
    out, prof = simulate(resident_matmuls, a, b, reps=4)
    np.testing.assert_array_equal(out, resident_matmuls(a, b, reps=4))  # bit for bit, the traced kernel
    stream = list(prepare(specialized(resident_matmuls, a, b, reps=4), get_target("trn2")).stream().raw())
    assert [t.opcode for t, _, _ in stream].count("nisa.memset") == 0
    matmuls = [(r, w) for t, r, w in stream if t.opcode == "nisa.nc_matmul"]
    assert len(matmuls) == 4
    reads_psum = [any(key == PSUM_KEY for key, _ in r) for r, _ in matmuls]
    assert reads_psum == [False, True, True, True]
    assert all(w[0][0] == PSUM_KEY for _, w in matmuls)


def test_the_tensor_engine_starts_when_its_operands_land():
    # With the memset gone the first matmul waits for the two loads only, then the four run back to back:
    # §2.3 nc_matmul max(min(64, 128), 512) cycles, x4 for fp32 (§3.2).
    t = get_target("trn2")
    prof = simulate(resident_matmuls, nki.spec((128, 128), "float32"), nki.spec((128, 512), "float32"), reps=4)[1]
    s = prof.schedule
    rows = [(s.templates[s.template[k]].opcode, s.start[k], s.end[k]) for k in range(len(s))]
    loads = [e for op, _, e in rows[:2]]
    mm = [(b, e) for op, b, e in rows if op == "nisa.nc_matmul"]
    assert mm[0][0] == max(loads)
    for (_, e1), (b2, e2) in zip(mm, mm[1:]):
        assert b2 == e1 and e2 - b2 == pytest.approx(512 * t.fp32_matmul_slowdown / t.tensor_ghz)
