"""Can two different iterations of an affine loop touch the same element? An integer-set question, answered exactly.

Two accesses A (at iteration ``v1`` of loop L) and B (at iteration ``v2``) meet when there are values of their
variables, each inside its range, such that every tensor index of A equals the same index of B and ``v1 != v2``.
Loops that enclose L (and program ids) have one value shared by both sides; L's own index, the loops inside L and
the access axes ``d<N>`` are free on each side separately. A loop index ``i`` with start ``s`` and step ``t`` is
``s + t * k`` for an iteration number ``k`` in ``[0, trip_count)``, so every variable is an integer in a box.

Whether the linear equalities have such a point is ``verify/integer_sets.py``'s question; when its search runs out
of nodes the answer is "may meet", the verifier's safe side (it then refuses as it did before).
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.ir.affine import Affine, var_kind
from nki_dsl.ir.nodes import Access, Loop
from nki_dsl.verify.integer_sets import MAX_NODES, at_least, equal, has_point


@dataclass(frozen=True)
class Side:
    """One access and the loops that enclose it, outermost first."""

    access: Access
    loops: tuple[Loop, ...]


def meet_in_different_iterations(loop: Loop, a: Side, b: Side, grid: tuple[int, ...],
                                 max_nodes: int = MAX_NODES) -> bool:  # fmt: skip
    """True if iteration ``v1`` of ``loop`` running ``a`` and iteration ``v2 != v1`` running ``b`` may touch a
    common element of the tensor both access."""
    if len(a.access.index) != len(b.access.index):
        return True  # not the same view of one tensor: stay on the safe side
    ranges: dict[str, tuple[int, int]] = {}
    ea = _side(loop, a, "a", ranges, grid)
    eb = _side(loop, b, "b", ranges, grid)
    same_element = [equal(x - y) for x, y in zip(ea, eb)]
    ka, kb = Affine.var(_iteration("a", loop)), Affine.var(_iteration("b", loop))
    for first, second in ((ka, kb), (kb, ka)):  # v1 < v2, then v1 > v2
        if has_point(same_element + [at_least(second - first - 1)], ranges, max_nodes):
            return True
    return False


def _iteration(side: str, loop: Loop) -> str:
    return f"{loop.var}.{side}"


def _side(loop: Loop, s: Side, tag: str, ranges: dict[str, tuple[int, int]], grid) -> list[Affine]:
    """The access's index expressions over iteration numbers, with names private to this side where they must be."""
    inside = False
    env: dict[str, Affine | int] = {}
    for lp in s.loops:
        inside = inside or lp is loop
        name = f"{lp.var}.{tag}" if inside else f"{lp.var}.shared"
        ranges[name] = (0, max(lp.trip_count - 1, 0))
        env[lp.var] = Affine.var(name, lp.step) + lp.start
    for k, extent in enumerate(s.access.shape):
        name = f"d{k}.{tag}"
        ranges[name] = (0, max(extent - 1, 0))
        env[f"d{k}"] = Affine.var(name)
    out = []
    for e in s.access.index:
        for v in e.vars():
            if v not in env and var_kind(v) == "pid":
                n = int(v[3:])
                ranges[f"{v}.shared"] = (0, max((grid[n] if n < len(grid) else 1) - 1, 0))
                env[v] = Affine.var(f"{v}.shared")
        out.append(e.substitute(env))
    return out
