"""Every cost rule cites the reference section it comes from (that every instruction has one is
tests/ir/test_op_table.py's), and the Tensor engine takes FP8 operands at the rate §3.1 quotes for the target
(checked against the constants)."""

import re

import pytest

import nki_dsl as nki
from nki_dsl.backends.simulator.cost import COMPUTE, DMA_RULES
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import get_target
from tests.simulator.support import one_matmul, simulate

RULES = {**COMPUTE, **DMA_RULES}


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_cost_rule_cites_its_source(name):
    rule = RULES[name]
    assert re.search(r"§\d+\.\d+", rule.source), f"{name}: the cost rule cites no reference/nki.md section"
    assert (rule.formula is None) == (OPS[name].engine == "dma")


def _matmul_ns(target, dtype):
    prof = simulate(one_matmul, nki.spec((128, 128), dtype), nki.spec((128, 512), dtype), target=target)[1]
    s = prof.schedule
    (k,) = [k for k in range(len(s)) if s.templates[s.template[k]].opcode == "nisa.nc_matmul"]
    return s.end[k] - s.start[k]


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_fp8_matmul_streams_the_moving_tile_at_the_quoted_fp8_rate(target):
    t = get_target(target)
    bf16 = _matmul_ns(target, "bfloat16")
    assert bf16 == pytest.approx(512 / t.tensor_ghz)  # §2.3: max(min(64, 128), 512) cycles
    fp8 = _matmul_ns(target, "float8_e4m3")
    # §3.1 TensorE row: the moving tile enters at 2x128 elements per cycle (BF16), 4x128 for dense FP8 on NC-v3
    speedup = {"trn1": 1, "trn2": 2, "trn3": 1}[target]  # trn1: cFP8 at the BF16 rate; trn3: non-MX FP8 2x128
    assert fp8 == pytest.approx(bf16 / speedup)
    # ... which is the quoted dense FP8 peak (trn2: 158 TFLOPS, "double-row") within rounding of the quote
    tflops = 2 * 128 * 128 * 512 / fp8 / 1e3
    assert tflops == pytest.approx(t.quoted_fp8_tflops, rel=0.01)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3"])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_utilisation_is_measured_against_the_peak_of_the_operand_dtype(target, dtype):
    # Full-size matmuls stream at the peak rate of their dtype (§3.1), so the Tensor engine's ideal time equals its
    # busy time and utilisation never exceeds 1, FP8 on trn2 (twice the BF16 rate) included. (256 of them: enough
    # to outweigh the three transfers' fixed costs, one at a time on the DMA engines, §3.4.)
    from tests.simulator.support import resident_matmuls

    prof = simulate(resident_matmuls, nki.spec((128, 128), dtype), nki.spec((128, 512), dtype), target=target,
                    reps=256)[1]  # fmt: skip
    assert prof.tensor_ideal_ns == pytest.approx(prof.unit_busy_ns["tensor"], rel=1e-9)
    assert 0.5 < prof.tensor_engine_utilisation <= 1.0
