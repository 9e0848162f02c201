"""The family prover on hostile text with the largest numbers IR text may hold (18 digits): coefficients near 10**17
in a mask, 200 such constraints, 300 derived dimensions with 12-digit divisors. The exact integer arithmetic must
stay sound (a mask that lets a row past N is refused, one that does not is proved) within the step bound. Such
masks are past int32, so ``mask-range`` refuses each of them as well: what is checked here is that it is the only
other rule to refuse, that is, that ``out-of-bounds`` proves (or refutes) them exactly."""

import pytest

import nki_dsl as nki
from tests.verify.hostile_families import MASK, SOFTMAX

C = 10**17 + 3
TIGHT = "$N - d0 - 128*i0 >= 1"  # the golden family's own mask: rows below N


def _prove(text: str):
    return nki.prove_family(nki.parse_family(text), "trn2")


def _refused_by(text: str) -> set[str]:
    with pytest.raises(nki.NkiVerificationError) as e:
        _prove(text)
    return {d.rule for d in e.value.diagnostics}


def test_huge_coefficients_beside_the_rows_mask_are_proved():
    assert _refused_by(SOFTMAX.replace(MASK, f"mask[{C}*$N - {C}*d0 - {128 * C // 1000}*i0 >= 1, {TIGHT}]")) == {
        "mask-range"}


def _loose(k: int) -> str:
    """``C*N - C*d0 - (C/1000)*i0 + k >= 0``, about ``d0 <= N - i0/1000``: the row ``128*i0 + d0`` may pass N by
    nearly ``128*i0``."""
    return f"{C - 7 * k}*$N - {C + 11 * k}*d0 - {C // 1000 + k}*i0 + {k} >= 0"


def test_two_hundred_huge_constraints_that_let_a_row_past_n_are_refused():
    with pytest.raises(nki.NkiVerificationError) as e:
        _prove(SOFTMAX.replace(MASK, "mask[" + ", ".join(_loose(k) for k in range(200)) + "]"))
    assert {d.rule for d in e.value.diagnostics} == {"out-of-bounds", "mask-range"}
    assert any("%x f32[$N, 512] on dimension 0" in d.message for d in e.value.diagnostics)


def test_the_same_constraints_with_the_rows_mask_are_proved():
    mask = "mask[" + ", ".join([_loose(k) for k in range(200)] + [TIGHT]) + "]"
    assert _refused_by(SOFTMAX.replace(MASK, mask)) == {"mask-range"}


def test_three_hundred_dimensions_with_twelve_digit_divisors_are_proved():
    symbols = "\n".join(f"  symbol $q{k} = ({10**12 - k}*$N + {k}) // {10**12 // (k + 2)}" for k in range(300))
    masks = ", ".join([f"$q{k} - d0 - 128*i0 >= 1" for k in range(0, 300, 2)] + [TIGHT])
    _prove(SOFTMAX.replace("  symbol $_0", symbols + "\n  symbol $_0").replace(MASK, f"mask[{masks}]"))


@pytest.mark.parametrize("top, why", [
    (2**30, "budget max_tensor_bytes exceeded"),
    (2**38, "loop i0 has range(0, 2147483648, 1); loop bounds must fit a signed 32-bit index"),
    (2**40, "loop i0 has range(0, 8589934592, 1); loop bounds must fit a signed 32-bit index"),
])  # fmt: skip
def test_a_range_whose_top_breaks_the_loop_bound_or_the_budget_is_refused(top, why):
    # At N = 2**38 the top's row loop no longer fits 32 bits: ``structure`` refused the upper kernel, which stopped
    # the budget checks after it, and its refusal was not reported: the family was proved up to 2**40.
    with pytest.raises(nki.NkiVerificationError) as e:
        _prove(SOFTMAX.replace("symbol $N in [1, 65536]", f"symbol $N in [1, {top}]"))
    assert why in str(e.value) and f"at the top of the family (N = {top}" in str(e.value)
