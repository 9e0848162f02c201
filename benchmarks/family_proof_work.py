"""Proof time of hostile shape families (issue 14), with the integer search as it is and as it was.

    python benchmarks/family_proof_work.py [--links 10 50 200 1000] [--cap 60]

The family is the golden softmax family (N in 1..65536) with a chain of derived symbols ``$c_k = $c_{k-1} + 1``
its masks are written over (``tests/verify/hostile_families.chain``: a valid family). "before" runs the search
without what issue 14 added (no substitution of equalities, no elimination inside the search, elimination in
the names' order, no step bound), "after" as it is; each in a child process stopped after ``--cap`` seconds of
wall time. Prints the CPU seconds (``time.process_time``) of ``nki.prove_family``, their ratio, and the steps the
proof took after (``verify/family.MAX_PROOF_STEPS`` is the bound).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _prove(links: int, before: bool) -> None:
    """In the child: prove the chain family and print ``cpu_seconds steps``."""
    import nki_dsl as nki
    from nki_dsl.verify import family, integer_sets, rational_sets
    from tests.verify.hostile_families import chain

    if before:
        integer_sets.reduce = lambda constraints, ranges, charge: (constraints, dict(ranges))
        integer_sets.may_have_point = lambda constraints, ranges, charge=None: True
        rational_sets._cheapest = lambda rows, variables: min(variables)
        family.MAX_PROOF_STEPS = integer_sets.MAX_STEPS = 1 << 62
    made = []

    class Counted(integer_sets.Work):
        def __init__(self, steps):
            super().__init__(steps)
            made.append(self)

    family.Work = Counted
    text = chain(links)
    t = time.process_time()
    nki.prove_family(nki.parse_family(text), "trn2")
    print(time.process_time() - t, sum(w.limit - w.left for w in made))


def _run(links: int, before: bool, cap: float) -> tuple[float | None, int | None]:
    args = [sys.executable, __file__, "--child", str(links)] + (["--before"] if before else [])
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=cap, check=True, cwd=ROOT).stdout.split()
    except subprocess.TimeoutExpired:
        return None, None
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", type=int, nargs="+", default=[10, 50, 200, 1000])
    parser.add_argument("--cap", type=float, default=60.0, help="wall seconds per proof before it is stopped")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--before", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _prove(args.child, args.before)
        return
    print(f"{'links':>6} {'before s':>10} {'after s':>9} {'ratio':>8} {'steps after':>12}")
    for links in args.links:
        old, _ = _run(links, True, args.cap)
        new, steps = _run(links, False, args.cap)
        old_text = f"{old:10.3f}" if old is not None else f"{'>' + str(int(args.cap)):>10}"
        new_text = f"{new:9.3f}" if new is not None else f"{'>' + str(int(args.cap)):>9}"
        capped = f"{'>' + str(int(args.cap / new)) if new else '-':>8}"
        ratio = f"{old / new:8.0f}" if old is not None and new else capped
        print(f"{links:>6} {old_text} {new_text} {ratio} {steps if steps is not None else '-':>12}")


if __name__ == "__main__":
    main()
