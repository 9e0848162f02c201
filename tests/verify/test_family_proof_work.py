"""The family prover's work on hostile IR text (issue 14): a family proof is what lets untrusted IR run for a whole
range, so it must stay sound, and its work must be bounded whatever the text. Measured as work, not time."""

import pytest

import nki_dsl as nki
from tests.verify.hostile_families import chain


@pytest.mark.parametrize("links", [1, 20, 1000])
def test_a_chain_of_derived_symbols_in_a_mask_is_proved(links):
    nki.prove_family(nki.parse_family(chain(links)), "trn2")


@pytest.mark.parametrize("links", [1, 1000])
def test_a_chain_that_lets_a_row_past_the_end_is_refused(links):
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(chain(links, slack=1)), "trn2")
    assert "out-of-bounds" in {d.rule for d in e.value.diagnostics} and "may reach N" in str(e.value)
