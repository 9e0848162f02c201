"""Rule ``mask-range``: a mask constraint stays within int32 over its ranges (the engines' and the JAX backend's
integer arithmetic for masks), so every backend writes the same elements. Found by the IR fuzzer: a mask
``d0 + 128*i0 <= 4294967296`` ran on NumPy and escaped the JAX backend as a raw ``OverflowError``."""

from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
from tests.verify.hostile_families import MASK, SOFTMAX

GOLDEN = Path(__file__).parents[1] / "ir" / "golden"
ROWS = (GOLDEN / "softmax_rows.nkir").read_text()
SUBTRACT = "%s = nl.subtract(x=%t, y=%m) : f32[128, 512] sbuf loc(12)"
LIMIT = 2**31 - 1


def _with_column_mask(bound: int) -> str:
    """The golden row softmax with ``mask[d0 <= bound]`` on its subtract: magnitude ``bound + 127``."""
    assert SUBTRACT in ROWS
    return ROWS.replace(SUBTRACT, SUBTRACT.replace(" : f32", f" mask[d0 <= {bound}] : f32"))


def _prove(text: str):
    return nki.prove_family(nki.parse_family(text), "trn2")


def _refusal(text: str, read=lambda text: nki.parse_ir(text, target="trn2")) -> tuple[list, str]:
    with pytest.raises(nki.NkiVerificationError) as e:
        read(text)
    return [(d.rule, d.loc.line, d.op) for d in e.value.diagnostics], str(e.value)


def test_a_mask_reaching_exactly_int32_max_is_accepted_and_runs_as_the_reference_on_every_backend():
    traced = nki.parse_ir(_with_column_mask(LIMIT - 127), target="trn2")
    x = np.random.default_rng(0).standard_normal((1000, 512)).astype(np.float32)
    want = np.asarray(traced.compile(backend="numpy").run({"x": x}))
    for backend in ("jax", "simulator"):
        np.testing.assert_allclose(np.asarray(traced.compile(backend=backend).run({"x": x})), want, rtol=2e-6)


def test_one_past_int32_max_is_refused_naming_the_op_line_and_bound():
    said, message = _refusal(_with_column_mask(LIMIT - 126))
    assert said == [("mask-range", 12, "nl.subtract")]
    assert "reaches magnitude 2147483648" in message and "past 2147483647: engines evaluate masks in int32" in message


def test_the_bound_counts_loop_and_program_id_ranges_not_just_the_constant():
    # d0 + 128*i0 + 256*pid0 <= C: |C| + 127 + 128*1 + 256*3 (grid (4,), i0 in 0..1)
    bound = LIMIT - 127 - 128 - 768
    text = ROWS.replace(SUBTRACT, SUBTRACT.replace(" : f32", f" mask[d0 + 128*i0 + 256*pid0 <= {bound}] : f32"))
    nki.parse_ir(text, target="trn2")
    said, _ = _refusal(text.replace(f"<= {bound}]", f"<= {bound + 1}]"))
    assert said == [("mask-range", 12, "nl.subtract")]


def test_a_family_whose_mask_may_pass_int32_in_some_instance_is_refused_at_its_proof():
    # on the subtract (line 21), beside the rows bound: $N + C >= 0, |C| + 65536 at the family's top
    subtract = "%3 = nl.subtract(x=%1, y=%2) mask[$N - d0 - 128*i0 >= 1]"
    assert subtract in SOFTMAX and MASK in SOFTMAX
    fine = SOFTMAX.replace(subtract, subtract[:-1] + f", $N >= {-(LIMIT - 65536)}]")
    _prove(fine)
    said, message = _refusal(fine.replace(f">= {-(LIMIT - 65536)}]", f">= {-(LIMIT - 65535)}]"), _prove)
    assert said == [("mask-range", 21, "nl.subtract")] and "2147483648" in message


def test_golden_one_past_int32_max(golden):
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.parse_ir(_with_column_mask(LIMIT - 126), target="trn2")
    golden("mask-range", e.value)
