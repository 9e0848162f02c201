"""What the verifier and the allocator each say of one kernel, for the tests that check the placing rules
(``sbuf-capacity``, ``psum-banks``) refuse exactly what the allocator cannot place."""

from __future__ import annotations

from hypothesis import strategies as st

from nki_dsl.errors import NkiVerificationError
from nki_dsl.passes.allocate import allocate, live_ranges
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.targets import get_target

TRN2 = get_target("trn2")


def outcome(kernel, args, rule: str, valid) -> tuple[list, bool]:
    """(the verifier's diagnostics, all of ``rule``; whether the allocator placed the lowered kernel). A placement
    is checked by ``valid(lowered kernel, allocation)``."""
    import nki_dsl as nki

    refused = []
    try:
        nki.trace(kernel, *args, target="trn2")
    except NkiVerificationError as e:
        refused = e.diagnostics
        assert {d.rule for d in refused} == {rule}, str(e)
    (entry,) = next(iter(kernel._traced.values()))  # the traced IR, verified or not
    low = LOWER_LANGUAGE(entry.kernel, TRN2)  # what the pipeline runs the allocator on, verified or not
    try:
        alloc = allocate(low, TRN2)
    except NkiVerificationError as e:
        assert e.diagnostics[0].rule == "allocate"
        return refused, False
    valid(low, alloc)
    return refused, True


def disjoint_while_live(low, alloc, buffer: str, capacity: int, span) -> None:
    """Every ``buffer`` placement ends inside ``capacity``, and tensors live at once share no unit
    (``span(placement)``: the half-open range of bytes or banks it takes, ``(first, end)``)."""
    lives = {lv.tensor.name: lv for lv in live_ranges(low)}
    placed = [p for p in alloc.placements.values() if p.buffer == buffer]
    assert all(p.byte_offset + p.footprint <= capacity for p in placed)
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            la, lb = lives[a.tensor].interval(a.buffers), lives[b.tensor].interval(b.buffers)
            if not (la[1] < lb[0] or lb[1] < la[0]):
                (a0, a1), (b0, b1) = span(a), span(b)
                assert a1 <= b0 or b1 <= a0, (a, b)


@st.composite
def plans(draw, sizes, most: int):
    """Events for the tests' kernel builders: up to ``most`` tensors of a size drawn from ``sizes``, made and ended
    in any order, some in a two-iteration loop (made and ended there, or made outside and used there)."""
    n = draw(st.integers(2, most))
    events, live, made = [], [], 0
    while made < n or live:
        choices = (["def"] if made < n else []) + (["end"] if live else []) + (["loop"] if made < n else [])
        kind = draw(st.sampled_from(choices))
        if kind == "def":
            events.append(("def", made, draw(sizes)))
            live.append(made)
            made += 1
        elif kind == "end":
            events.append(("end", live.pop(draw(st.integers(0, len(live) - 1)))))
        else:
            body = [("use", k) for k in draw(st.lists(st.sampled_from(live), max_size=2, unique=True))] if live else []
            body.insert(draw(st.integers(0, len(body))), ("def", made, draw(sizes)))
            body.append(("end", made))
            events.append(("loop", body))
            made += 1
    return events
