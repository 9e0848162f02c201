"""The read-out of ScalarE's accumulator registers (``reduce_res=`` of the current API) is ``ActReadAccumulator``,
about 64 ScalarE cycles (reference/nki.md §3.3), not a general instruction: the IR marks it (``activation`` with
``reads_accumulator``) and the simulator prices it at ``Target.act_read_accumulator_cycles`` whole, with none
of the static and access overheads a dependent ``[P, 1]`` instruction pays (nki_dsl/backends/simulator/cost.py)."""

import dataclasses

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.targets import get_target
from tests.simulator.support import simulate

X = np.linspace(-1, 1, 128 * 512, dtype=np.float32).reshape(128, 512)


@nki.jit
def row_sums(x):
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    y = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    copied = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=copied, op=nl.copy, data=r)  # a plain [P, 1] ScalarE instruction reading the read-out
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=copied)
    return out


def _durations(target):
    s = simulate(row_sums, X, target=target)[1].schedule
    got = {}
    for k in range(len(s)):
        t = s.templates[s.template[k]]
        if t.opcode == "nisa.activation" and t.N == 1:
            got["read-out" if t.op.attrs.get("reads_accumulator") else "copy"] = s.end[k] - s.start[k]
    return got


@pytest.mark.parametrize("name", ["trn1", "trn2", "trn3"])
def test_the_read_out_takes_the_act_read_accumulator_cycles_whole(name):
    t = get_target(name)
    got = _durations(t)
    assert got["read-out"] == pytest.approx(t.act_read_accumulator_cycles / t.scalar_ghz)
    # the [P, 1] copy right after it depends on it: MIN_II plus the static and twice the access overhead (§3.3)
    dependent = t.min_ii_cycles + t.vector_static_overhead_cycles + 2 * t.sbuf_access_overhead_cycles
    assert got["copy"] == pytest.approx(dependent / t.scalar_ghz)


def test_the_price_is_the_targets_figure_not_a_constant():
    t = get_target("trn2")
    slower = dataclasses.replace(t, act_read_accumulator_cycles=3 * t.act_read_accumulator_cycles)
    assert _durations(slower)["read-out"] == pytest.approx(3 * _durations(t)["read-out"])


def test_the_ir_marks_the_read_out_and_values_are_unchanged():
    text = nki_dsl.trace(row_sums, X).text
    assert text.count("reads_accumulator = true") == 1  # the read-out only, not the instruction reducing
    assert print_kernel(parse_kernel(text)) == text  # the mark survives the IR text (a Hub bundle's form)
    np.testing.assert_allclose(row_sums(X)[:, 0], np.exp(X.astype(np.float64)).sum(axis=1), rtol=1e-5)



@pytest.mark.parametrize("marked", ["op = exp", "reads_accumulator = true"], ids=["wide-exp", "read-out-as-exp"])
def test_parsed_ir_cannot_claim_the_read_out_price_for_another_activation(marked):
    # The mark is priced at 64 cycles whole: an IR text (a Hub bundle) putting it on a wide or non-copy
    # activation would model that work as nearly free, so the verifier refuses it.
    from nki_dsl.passes.verifier import check

    text = nki_dsl.trace(row_sums, X).text
    line = next(ln for ln in text.splitlines() if marked in ln)
    if marked == "op = exp":  # the [128, 512] exp claims to be the read-out
        forged = line.replace('reduce_cmd = "reset_reduce"}', 'reduce_cmd = "reset_reduce", reads_accumulator = true}')
    else:  # the read-out claims the price while computing exp
        forged = line.replace("op = copy", "op = exp")
    assert forged != line
    with pytest.raises(nki_dsl.NkiError, match="reads_accumulator marks the copy of a"):
        check(parse_kernel(text.replace(line, forged)), get_target("trn2"))
