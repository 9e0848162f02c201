"""The IR text fuzzer (``fuzz.py``): a few seconds of hypothesis-driven mutations in the default suite, and the
long seeded campaign as a slow test (``NKI_FUZZ_INPUTS`` sets its count; default 1,000,000)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import examples

from .corpus import seeds
from .fuzz import Choices, HypothesisChoices, Stats, campaign, check_one, mutate


@pytest.fixture(scope="module")
def workdir():
    """An empty working directory for the module's inputs (one must never write a file)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="nki-fuzz-") as tmp:
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(cwd)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_real_kernels_are_refused_cleanly_or_run_right(workdir, data):
    corpus = [s.text for s in seeds()]
    c = HypothesisChoices(data)
    check_one(mutate(c.pick(corpus), corpus, c), Stats(), workdir)


def test_the_seeds_themselves_run_on_every_backend(workdir):
    stats = Stats()
    for s in seeds():
        assert check_one(s.text, stats, workdir) == "ran", s.name


def test_mutations_change_the_text_and_reach_every_stage(workdir):
    """The mutator is not a no-op and its inputs end at every stage (parse and verifier refusals, runs): the
    fuzzer can find something anywhere along the way."""
    import random

    corpus = [s.text for s in seeds()]
    c = Choices(random.Random(3))
    texts = [mutate(c.pick(corpus), corpus, c) for _ in range(examples(300))]  # seeded: 100 reach every stage too
    assert sum(t not in corpus for t in texts) > 0.8 * len(texts)
    stats = Stats()
    for t in texts:
        check_one(t, stats, workdir, compare_readers=False)
    assert {"ran", "refused: NkiParseError", "refused: NkiVerificationError"} <= set(stats.outcomes)


@pytest.mark.slow
def test_long_fuzz_campaign():
    n = int(os.environ.get("NKI_FUZZ_INPUTS", "1000000"))
    stats = campaign(n, seed=int(os.environ.get("NKI_FUZZ_SEED", "1")))
    assert stats.inputs == n


FINDINGS = Path(__file__).parent / "findings"


@pytest.mark.parametrize("name", ["pid0_without_grid", "reads_of_poisoned_rows"])
def test_what_the_default_fuzz_run_found_runs_alike_on_every_backend(workdir, name):
    """Found by this test's hypothesis run (mutated softmax IR).

    ``pid0_without_grid``: a mask naming pid0 in a kernel without a grid ran on NumPy (one program, pid0 = 0) but
    the JAX backend refused it. ``reads_of_poisoned_rows``: a dma_copy masked down to one row leaves the rest of its
    tile poisoned; the NumPy reference's NaN rows came back from XLA as finite numbers (its fused CPU code clamps
    NaN), which the comparison now leaves undefined."""
    assert check_one((FINDINGS / f"{name}.nkir").read_text(), Stats(), workdir) == "ran"
