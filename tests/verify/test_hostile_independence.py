"""Independence (``verify/independent.py``) read from hostile family IR text, as a loader reads it: parsed, its form
checked, never proved (a loader does not prove; it verifies each instance). Text one character away from the
golden softmax family (rows ``128*i0 + d0`` under ``128*i0 + d0 < N``, blocks of 128) that reads across blocks is
refused along N, naming the access or mask; and the analysis's work is bounded by the outputs' rank, not by how
many dimensions the text declares."""

import re

import pytest

import nki_dsl as nki
from nki_dsl.verify import independent
from tests.verify.hostile_families import MASK, SOFTMAX

LOAD = "%1 = nl.load(src=%x[d0 + 128*i0, d1 ; 128x512]) mask[$N - d0 - 128*i0 >= 1]"


def _independence(text: str):
    return nki.parse_family(text).independence


def test_the_golden_family_is_independent_in_blocks_of_128():
    proved, refused = _independence(SOFTMAX)
    assert proved["N"].block == 128 and refused == {}


@pytest.mark.parametrize("old, new, why", [
    (LOAD, LOAD.replace("128*i0, d1", "128*i0 + 1, d1").replace(">= 1]", ">= 2]"),
     "line 18 reads or writes %x along N at d0 + 128*i0 + 1, not at 128*i + p (p in 0..127)"),  # off by one row
    (LOAD, LOAD.replace("128*i0, d1", "128*i0 + 128, d1").replace(">= 1]", ">= 129]"),
     "along N at d0 + 128*i0 + 128, not at 128*i + p"),  # the next block
    (LOAD, LOAD.replace("d0 + 128*i0, d1", "d0 + 128*i0 - 128, d1"),
     "along N at d0 + 128*i0 - 128, not at 128*i + p"),  # the block before
    (MASK, "mask[$N - d0 - 128*i0 >= 0]",
     "depends on N other than as 128*i0 + p (p in 0..127) < N: $N - d0 - 128*i0 >= 0"),  # 128*i + p <= N
    (MASK, "mask[$N - d0 - 128*i0 >= 2]",
     "depends on N other than as 128*i0 + p (p in 0..127) < N: $N - d0 - 128*i0 - 2 >= 0"),  # 128*i + p + 1 < N
    (MASK, "mask[$N - 2*d0 - 128*i0 >= 1]", "depends on N other than as 128*i0 + p"),  # twice the row
    ("($N + 127) // 128", "($N + 126) // 127", "not at 127*i + p (p in 0..126)"),  # blocks of 127 over tiles of 128
    ("($N + 127) // 128", "($N + 255) // 128", "the size _0 is computed from N"),  # one block too many
])  # fmt: skip
def test_text_that_reads_across_blocks_is_not_independent_along_them(old, new, why):
    assert old in SOFTMAX
    proved, refused = _independence(SOFTMAX.replace(old, new))
    assert "N" not in proved
    assert why in refused["N"], refused["N"]


def _many_dimensions(declared: int, copies: int) -> str:
    """The golden family's loop ``copies`` times (one output each) and ``declared`` extra parameters, each with a
    dimension of its own that no output has."""
    lines = SOFTMAX.split("\n")
    bodies = [re.sub(r"%(\d+)", rf"%\1_c{c}", "\n".join(lines[5:16])).replace("i0", f"i{c}") for c in range(copies)]
    params = ", ".join(["%x: f32[$N, 512] hbm"] + [f"%y{k}: f32[$M{k}, 4] hbm" for k in range(declared)])
    symbols = "\n".join(["  symbol $N in [1, 65536]"] + [f"  symbol $M{k} in [1, 100]" for k in range(declared)])
    outs = ", ".join(f"%0_c{c}" for c in range(copies))
    return (f"kernel k({params}) -> ({outs}) {{\n{symbols}\n  symbol $_0 = ($N + 127) // 128\n  grid ()\n"
            f"  source \"kernels/softmax/kernel.py\"\n" + "\n".join(bodies) + "\n}\n")  # fmt: skip


def test_a_thousand_declared_dimensions_cost_one_walk_of_the_body(monkeypatch):
    # Every dimension was walked over every op (three walks each): 1,000 of them over 2,000 ops took 47 s. One no
    # output has is refused from the outputs' types alone; only N, which every output has, is walked.
    walked = []
    monkeypatch.setattr(independent, "_block_stops", lambda kernel, name, f=independent._block_stops: (
        walked.append(name), f(kernel, name))[1])  # fmt: skip
    proved, refused = _independence(_many_dimensions(1000, 200))
    assert proved["N"].block == 128 and walked == ["$N"]
    assert len(refused) == 1000 and refused["M7"] == ("output %0_c0 has no dimension M7, so instances over slices "
                                                      "cannot be joined")  # fmt: skip
