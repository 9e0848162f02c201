"""Family IR text built to make the family prover work hard (a test helper, not a test): the golden softmax family
(``tests/ir/golden/softmax_family.nkir``, ``N in 1..65536``) with extra derived symbols its masks go through."""

from pathlib import Path

SOFTMAX = (Path(__file__).parents[1] / "ir" / "golden" / "softmax_family.nkir").read_text()
MASK = "mask[$N - d0 - 128*i0 >= 1]"


def chain(links: int, slack: int = 0) -> str:
    """``$c0 = $N + 1``, ``$c1 = $c0 + 1``, ... ``links`` derived symbols, each one more than the last, and every
    mask written over the last of them: ``$c{links-1} - d0 - 128*i0 >= links + 1 - slack``, the same rows as
    ``$N - d0 - 128*i0 >= 1`` (a valid family) at ``slack = 0``, ``slack`` rows past the end above it. Proving it
    in bounds once took interval propagation one pass per unit of N's range (29 s at 20 links, >120 s at 50)."""
    lines = "\n".join(f"  symbol $c{k} = ${'N' if k == 0 else f'c{k - 1}'} + 1" for k in range(links))
    text = SOFTMAX.replace("  symbol $_0", lines + "\n  symbol $_0")
    return text.replace(MASK, f"mask[$c{links - 1} - d0 - 128*i0 >= {links + 1 - slack}]")
