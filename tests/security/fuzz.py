"""A fuzzer over IR text: mutations of real kernels' IR (``corpus.py``) and garbage, each taken through parse ->
verify -> compile -> run on every backend, against the contract of untrusted input:

* every input ends in a clean ``NkiError`` (parse, budget, verifier, compile or run refusal) or a run whose outputs
  match the NumPy reference (the simulator's against the ``numpy`` backend's, on the same inputs);
* no other exception escapes (no MemoryError, RecursionError, SyntaxError, ValueError, KeyError, ...);
* no input takes longer than ``TIME_LIMIT`` seconds (a SIGALRM interrupts it and counts as a finding);
* nothing is written: each run happens in an empty directory that must stay empty;
* the fast reader (``ir/fastread.py``) never disagrees with lark: what it accepts, lark accepts, and both build
  kernels that print the same.

Mutations work on characters (delete, insert, replace, duplicate a span), on tokens (replace by another token of
the corpus or an interesting number, delete, swap, duplicate), on lines (splice lines of another seed, duplicate
or drop a block) or are garbage. Randomness comes from a ``Choices`` object: a seeded ``random.Random`` for the
long run, hypothesis draws in the default suite (so failures shrink).

Run the long campaign in the background: ``python -m tests.security.fuzz --inputs 1000000 --seed 1``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import nki_dsl as nki
from nki_dsl import dtypes
from nki_dsl.errors import NkiError
from nki_dsl.ir.budget import IRBudget

# Small enough that every accepted input runs in milliseconds; the budget is part of the API being fuzzed.
FUZZ_BUDGET = IRBudget(max_text_bytes=1 << 20, max_ops=4000, max_iterations=20_000, max_tensor_bytes=16 << 20,
                       max_hbm_bytes=64 << 20)  # fmt: skip
TIME_LIMIT = 20.0  # seconds per input, on a loaded 2-core machine
TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|%\w+|[0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?|\w+(?:\.\w+)*|->|[<>=]=|\S')
NUMBERS = ("0", "1", "-1", "2", "3", "127", "128", "129", "511", "512", "513", "1024", "65536", "2147483647",
           "2147483648", "4294967296", "999999999999999999", "9999999999999999999", "1e308", "1e309", "-0.0", "nan",
           "inf", "0.5")  # fmt: skip
CHARS = "%()[]{},;:=-+*<>.\"\\ \n#x0123456789dipaeflsn_\u2028\x00\x85\u00e9\u202e"


class Choices:
    """Random choices from a seeded RNG; ``HypothesisChoices`` draws the same from hypothesis."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def pick(self, items):
        return items[self.int(0, len(items) - 1)]


class HypothesisChoices(Choices):
    def __init__(self, data):
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self.data.draw(st.integers(lo, hi))


class FuzzFindingError(AssertionError):
    """An input that broke the contract; ``text`` reproduces it."""

    def __init__(self, message: str, text: str):
        super().__init__(f"{message}\n--- input ---\n{text[:4000]}")
        self.text = text


class _Timeout(BaseException):  # not an Exception: nothing under test may swallow it
    pass


# -- mutations ---------------------------------------------------------------------------------------------------


def mutate(text: str, corpus: list[str], c: Choices) -> str:
    for _ in range(c.pick((1, 1, 1, 2, 3))):  # mostly one mutation: more inputs get past the parser
        text = c.pick(_MUTATIONS)(text, corpus, c)
    return text


def _span(text: str, c: Choices) -> tuple[int, int]:
    a = c.int(0, len(text))
    return a, min(len(text), a + c.pick((1, 1, 2, 3, 8, 40)))


def _delete(text, corpus, c):
    a, b = _span(text, c)
    return text[:a] + text[b:]


def _insert(text, corpus, c):
    a = c.int(0, len(text))
    return text[:a] + "".join(c.pick(CHARS) for _ in range(c.int(1, 4))) + text[a:]


def _duplicate_span(text, corpus, c):
    a, b = _span(text, c)
    return text[:b] + text[a:b] + text[b:]


def _tokens(text):
    return [(m.start(), m.end()) for m in TOKEN.finditer(text)]


def _replace_token(text, corpus, c):
    toks = _tokens(text)
    if not toks:
        return text
    a, b = c.pick(toks)
    if c.int(0, 2) == 0:
        new = c.pick(NUMBERS)
    else:
        other = c.pick(corpus)
        spans = _tokens(other)
        x, y = c.pick(spans)
        new = other[x:y]
    return text[:a] + new + text[b:]


def _delete_token(text, corpus, c):
    toks = _tokens(text)
    if not toks:
        return text
    a, b = c.pick(toks)
    return text[:a] + text[b:]


def _swap_tokens(text, corpus, c):
    toks = _tokens(text)
    if len(toks) < 2:
        return text
    (a, b), (x, y) = sorted((c.pick(toks), c.pick(toks)))
    if b > x:
        return text
    return text[:a] + text[x:y] + text[b:x] + text[a:b] + text[y:]


def _duplicate_token(text, corpus, c):
    toks = _tokens(text)
    if not toks:
        return text
    a, b = c.pick(toks)
    return text[:b] + " " + text[a:b] + text[b:]


def _splice_lines(text, corpus, c):
    lines = text.splitlines(keepends=True)
    other = c.pick(corpus).splitlines(keepends=True)
    a = c.int(0, len(other) - 1)
    piece = other[a : a + c.int(1, 6)]
    k = c.int(0, len(lines))
    return "".join(lines[:k] + piece + lines[k:])


def _block(text, corpus, c):
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    a = c.int(0, len(lines) - 1)
    b = min(len(lines), a + c.int(1, 8))
    if c.int(0, 1):
        return "".join(lines[:a] + lines[b:])
    return "".join(lines[:b] + lines[a:b] + lines[b:])


def _garbage(text, corpus, c):
    if c.int(0, 3):
        return text
    return "".join(c.pick(CHARS) for _ in range(c.int(0, 60)))


_MUTATIONS = (_delete, _insert, _duplicate_span, _replace_token, _replace_token, _delete_token, _swap_tokens,
              _duplicate_token, _splice_lines, _block, _garbage)  # fmt: skip


# -- the contract ------------------------------------------------------------------------------------------------


def _arrays(traced: nki.TracedKernel, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for p in traced.ir.params:
        d = dtypes.get(p.type.dtype)
        if d.is_float:
            values = rng.standard_normal(p.type.shape)
        elif d.kind == "bool":
            values = rng.integers(0, 2, p.type.shape)
        else:
            values = rng.integers(-8, 8, p.type.shape)
        out[p.name] = values.astype(d.np_dtype)
    return out


def _as_tuple(result) -> tuple:
    if result is None:
        return ()
    return tuple(result) if isinstance(result, tuple) else (result,)


def _matches(got: tuple, ref: tuple, backend: str) -> bool:
    from tests.security.corpus import close_to_reference

    if len(got) != len(ref):
        return False
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return False
        exact = g.dtype == np.float32 or g.dtype.kind in "iub"
        if exact and not close_to_reference(g, r, backend):
            return False
        if not exact and not np.allclose(g.astype(np.float64), r.astype(np.float64), rtol=1e-2, atol=1e-3,
                                         equal_nan=True):  # fmt: skip
            return False
    return True


def _reader_agrees_with_lark(text: str) -> None:
    """The fast reader accepts only what lark accepts, building a kernel that prints the same."""
    from lark.exceptions import UnexpectedInput

    from nki_dsl.ir import parser
    from nki_dsl.ir.fastread import FallbackError, Reader
    from nki_dsl.ir.printer import print_kernel

    try:
        fast = Reader(text).start()
    except FallbackError:
        return
    try:
        slow = parser._lark().parse(text)
    except UnexpectedInput as e:
        raise FuzzFindingError(f"the fast reader accepted text lark refuses: {e}", text) from None

    def build(tree) -> str:
        try:
            return print_kernel(parser._Builder("<nkir>", FUZZ_BUDGET).kernel(tree))
        except NkiError as e:
            return f"error: {e}"

    a, b = build(fast), build(slow)
    if a != b:
        raise FuzzFindingError(f"the fast reader and lark build different kernels:\n{a}\n---\n{b}", text)


@dataclass
class Stats:
    inputs: int = 0
    outcomes: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    slowest: float = 0.0
    findings: list = field(default_factory=list)


def check_one(text: str, stats: Stats, workdir: Path, compare_readers: bool = True, seed: int = 0) -> str:
    """Run one input through the whole contract; returns its outcome, raises ``FuzzFindingError`` on a violation."""
    start = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        outcome = _contract(text, compare_readers, seed)
    except _Timeout:
        raise FuzzFindingError(f"no result within {TIME_LIMIT} s", text) from None
    except FuzzFindingError:
        raise
    except BaseException as e:  # noqa: BLE001 - anything else that escapes is the finding
        raise FuzzFindingError(f"raw {type(e).__name__} escaped: {e}\n{traceback.format_exc()}", text) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    written = list(workdir.iterdir())
    if written:
        raise FuzzFindingError(f"the input wrote files: {written}", text)
    elapsed = time.perf_counter() - start
    stats.inputs += 1
    stats.outcomes[outcome] += 1
    stats.seconds += elapsed
    stats.slowest = max(stats.slowest, elapsed)
    return outcome


def _raise_timeout(signum, frame):
    raise _Timeout


def _contract(text: str, compare_readers: bool, seed: int) -> str:
    if compare_readers:
        _reader_agrees_with_lark(text)
    try:
        traced = nki.parse_ir(text, budget=FUZZ_BUDGET)
    except NkiError as e:
        return f"refused: {type(e).__name__}"
    arrays = _arrays(traced, seed)
    results = {}
    for backend in nki.backend_names():
        try:
            results[backend] = _as_tuple(traced.compile(backend=backend).run(arrays))
        except NkiError as e:
            results[backend] = f"refused at run: {type(e).__name__}"
    ref = results.get("numpy")
    for backend, got in results.items():
        if isinstance(got, tuple) and isinstance(ref, tuple) and not _matches(got, ref, backend):
            raise FuzzFindingError(f"{backend} outputs differ from the NumPy reference's", text)
        if isinstance(got, tuple) != isinstance(ref, tuple):
            raise FuzzFindingError(f"numpy: {ref if isinstance(ref, str) else 'ran'}; {backend}: "
                              f"{got if isinstance(got, str) else 'ran'}", text)  # fmt: skip
    return "ran" if isinstance(ref, tuple) else ref


def campaign(n: int, seed: int, compare_readers: bool = True, report_every: float = 60.0, log=print,
             keep_going: bool = False, max_seconds: float | None = None) -> Stats:
    """``n`` inputs from a seeded RNG (fewer if ``max_seconds`` of wall time run out first). Raises the first
    ``FuzzFindingError``, or with ``keep_going`` logs each one (``stats.findings``) and goes on."""
    from tests.security.corpus import seeds

    corpus = [s.text for s in seeds()]
    c = Choices(random.Random(seed))
    stats = Stats()
    last = began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nki-fuzz-") as tmp:
        workdir = Path(tmp)
        cwd = os.getcwd()
        os.chdir(workdir)
        try:
            for k in range(n):
                if max_seconds is not None and time.perf_counter() - began > max_seconds:
                    log(f"stopped after {max_seconds:.0f} s of wall time")
                    break
                text = c.pick(corpus)
                text = _garbage("", corpus, c) if c.int(0, 50) == 0 else mutate(text, corpus, c)
                try:
                    check_one(text, stats, workdir, compare_readers, seed=k)
                except FuzzFindingError as e:
                    if not keep_going:
                        raise
                    stats.findings.append(e)
                    log(f"FINDING at input {k}: {e}")
                    for leftover in workdir.iterdir():
                        leftover.unlink()
                if time.perf_counter() - last > report_every:
                    last = time.perf_counter()
                    log(_progress(stats))
        finally:
            os.chdir(cwd)
    return stats


def _progress(stats: Stats) -> str:
    rate = stats.inputs / stats.seconds if stats.seconds else 0.0
    top = ", ".join(f"{k}: {v}" for k, v in stats.outcomes.most_common(6))
    return (f"{stats.inputs} inputs in {stats.seconds:.0f} s ({rate:.1f}/s), slowest {stats.slowest:.2f} s; {top}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-reader-check", action="store_true")
    ap.add_argument("--report-every", type=float, default=60.0)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this much wall time")
    args = ap.parse_args()
    t0 = time.time()
    stats = campaign(args.inputs, args.seed, not args.no_reader_check, args.report_every,
                     log=lambda s: print(s, flush=True), keep_going=True, max_seconds=args.seconds)  # fmt: skip
    print("done:", _progress(stats), f"wall {time.time() - t0:.0f} s, findings {len(stats.findings)}", flush=True)


if __name__ == "__main__":
    main()
