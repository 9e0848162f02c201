"""The family prover's work on hostile IR text (issue 14): a family proof is what lets untrusted IR run for a whole
range, so it must stay sound, and its work must be bounded whatever the text. Measured as work, not time."""

import pytest

import nki_dsl as nki
from nki_dsl.verify import family, integer_sets
from tests.verify.hostile_families import SOFTMAX, chain


@pytest.mark.parametrize("links", [1, 20, 1000])
def test_a_chain_of_derived_symbols_in_a_mask_is_proved(links):
    nki.prove_family(nki.parse_family(chain(links)), "trn2")


@pytest.mark.parametrize("links", [1, 1000])
def test_a_chain_that_lets_a_row_past_the_end_is_refused(links):
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(chain(links, slack=1)), "trn2")
    assert "out-of-bounds" in {d.rule for d in e.value.diagnostics} and "may reach N" in str(e.value)


def _steps(monkeypatch, text: str) -> int:
    """The integer-search steps proving ``text`` takes (it must be proved within the bound)."""
    made = []

    class Counted(integer_sets.Work):
        def __init__(self, steps):
            super().__init__(steps)
            made.append(self)

    monkeypatch.setattr(family, "Work", Counted)
    nki.prove_family(nki.parse_family(text), "trn2")
    monkeypatch.undo()
    return sum(w.limit - w.left for w in made)


@pytest.mark.parametrize("links", [20, 1000])
def test_a_chain_costs_the_proof_a_few_steps_per_link(monkeypatch, links):
    # Substituted, the chain is one expression in N: the steps are the rewriting's, linear in the links (it was
    # one propagation pass over the constraints per unit of N's range: 65,536 passes)
    assert _steps(monkeypatch, chain(links)) <= 20 * links + 200


def test_a_proof_at_exactly_its_step_bound_is_proved_and_one_step_less_refuses_it(monkeypatch):
    text = chain(1000)  # (4,000 rows: elimination gives up on it before the integer search is asked)
    needed = _steps(monkeypatch, text)
    assert needed > 0
    monkeypatch.setattr(family, "MAX_PROOF_STEPS", needed)
    nki.prove_family(nki.parse_family(text), "trn2")
    monkeypatch.setattr(family, "MAX_PROOF_STEPS", needed - 1)
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(text), "trn2")
    (diag,) = e.value.diagnostics
    assert (diag.rule, diag.op, diag.loc.line) == ("out-of-bounds", "nl.load", 18)
    assert diag.message == (
        f"proving that operand 'src' %x[128, 512] in 'hbm' stays inside %x f32[$N, 512] for every size of the family "
        f"(N in 1..65536, _0 = (N + 127) // 128, c999 = c998 + 1) takes more than {needed - 1} steps of the integer "
        f"search, the bound on a family proof's work (verify/family.MAX_PROOF_STEPS); simplify its masks and derived "
        f"dimensions, or publish concrete shapes")  # fmt: skip


def test_a_family_that_spends_the_whole_bound_is_refused_naming_it():
    # 1,000 floor divisions of N (unused, but tied to N in every question) put elimination past its row bound, and
    # propagation then crawls one row per pass over 2,000 constraints: refused at the bound, not after hours.
    lines = "\n".join(f"  symbol $e{k} = ($N + {k}) // 3" for k in range(1000))
    text = SOFTMAX.replace("  symbol $_0", lines + "\n  symbol $_0")
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(text), "trn2")
    assert f"takes more than {family.MAX_PROOF_STEPS} steps of the integer search" in str(e.value)
    assert len(e.value.diagnostics) == 1  # the bound is for the whole proof: no question after it is asked


def test_floor_divisions_of_the_size_used_nowhere_are_proved(monkeypatch):
    # Each is tied to N in every question (two rows with N, two of its range): eliminating N first, in the names'
    # order, made 40,000 rows, past elimination's bound, and the integer search then crawled to the step bound.
    # Eliminated first, each costs nothing.
    lines = "\n".join(f"  symbol $e{k} = ($N + {k}) // 3" for k in range(100))
    assert _steps(monkeypatch, SOFTMAX.replace("  symbol $_0", lines + "\n  symbol $_0")) < 1000
