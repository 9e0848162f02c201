"""IR text is data: code-shaped payloads in every string and name of a kernel's IR never run, on any backend.

Design. A hostile bundle controls every byte of its IR text. Seeds are real kernels' IR (``corpus.py``: tutorials
and the kernel library, traced and lowered). Hypothesis puts a payload into every place of the text that holds a
string or a name: the kernel's name and source file, every tensor's name, every loc (as its own file name), a
constant's key and value, the lowered IR's ``zero_first`` string attribute. String payloads are sequences of
fragments that would break out of a Python comment, string or line (newlines, CR, U+2028, U+2029, U+0085, NUL,
quotes, backslashes, ``#``, indentation, brackets, bidi overrides, terminal escapes) around code that leaves a
trace if it ever runs (writes a marker file, sets a builtin); they are written JSON-escaped (as the printer would)
or raw. Names are identifier-shaped payloads: Python keywords, builtins, the names of the generated code's own
helpers and locals, and letters Python folds into others (NFKC: fullwidth ``ｅｘｅｃ`` is ``exec``).

Each text goes parse -> verify -> compile -> run on every backend (``nki.backend_names()``). It must either be
refused with an ``NkiError`` or run with outputs identical to the seed's (names and file names change nothing);
the generated source must not contain the payload's code; and afterwards neither the marker file nor the builtin
may exist.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nki_dsl as nki
from nki_dsl import backends
from nki_dsl.errors import NkiError, NkiParseError, SourceLoc
from tests.examples import examples

from .corpus import same_outputs, seeds

MARKER = Path(tempfile.gettempdir()) / f"nki-ir-payload-ran-{os.getpid()}"
FLAG = "NKI_PAYLOAD_RAN"
CODE = (f"open({str(MARKER)!r}, 'w').write('ran')", f"__import__('builtins').{FLAG} = 1",
        f"setattr(__builtins__, {FLAG!r}, 1)", f"globals().__setitem__({FLAG!r}, 1)")  # fmt: skip
BREAKOUTS = ("\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x00", "\t", "\x0b", "\x0c", "\x1b[2J", "\u202e",
             '"', "'", "\\", "#", '"""', "'''", ")", "(", "]", "[", ":", ";", ",", "{", "}", "    ", "\n    ", "%",
             "{0}", "\\n", "\\u2028")  # fmt: skip
NAMES = ("__import__", "exec", "eval", "open", "np", "ROUND", "fn", "rng", "alloc_on_chip", "_kernel", "_v1", "_lo0",
         "_value", "t_a", "tx_61", "pid0", "i0", "d0", "None", "True", "def", "lambda", "import", "print", "unroll",
         "step", "_hits", "_LW", "T0", "M0", "_t", "_rd", "_wr",
         "ｅｘｅｃ", "ｏｐｅｎ", "ſ", "ﬁ", "µ", "Ω", "K")  # fmt: skip

payloads = st.lists(st.sampled_from(BREAKOUTS + CODE), min_size=1, max_size=8).map("".join)
# printable payloads pass the parser: half the texts carry only those, so the backends' own defence is what holds
printable_payloads = st.lists(st.sampled_from([f for f in BREAKOUTS + CODE if f.isprintable()]), min_size=1,
                              max_size=8).map("".join)  # fmt: skip
SEEDS = seeds()


def _quote(payload: str, raw: bool) -> str:
    """The payload as an IR string literal: JSON-escaped as the printer writes, or raw (only quote and backslash
    escaped) as a hand-made bundle might."""
    if raw:
        return '"' + payload.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return json.dumps(payload)


@st.composite
def hostile_texts(draw):
    seed = SEEDS[draw(st.integers(0, len(SEEDS) - 1))]
    text = seed.text
    raw = draw(st.booleans())
    strings = printable_payloads if draw(st.booleans()) else payloads

    def string() -> str:
        return _quote(draw(strings), raw)

    def name() -> str:
        return NAMES[draw(st.integers(0, len(NAMES) - 1))]

    # names: the kernel's, then every tensor's (distinct payload names, numbered once the list runs out)
    text = re.sub(r"^kernel \w+", lambda m: f"kernel {name()}", text, count=1)
    tensors = list(dict.fromkeys(re.findall(r"%(\w+)", text)))
    start = draw(st.integers(0, len(NAMES) - 1))
    renamed = {t: NAMES[(start + k) % len(NAMES)] + (f"_{k}" if k >= len(NAMES) else "") for k, t in
               enumerate(tensors)}  # fmt: skip
    text = re.sub(r"%(\w+)", lambda m: "%" + renamed[m[1]], text)
    # strings: the source file, every loc, a constant, zero_first
    text = re.sub(r'source "(?:\\.|[^"\\])*"', lambda m: f"source {string()}", text, count=1)
    text = re.sub(r"loc\((?:\"(?:\\.|[^\"\\])*\":)?(\d+)\)", lambda m: f"loc({string()}:{m[1]})", text)
    text = re.sub(r"^(  source .*)$", lambda m: f"{m[1]}\n  const {string()} = {string()}", text, count=1,
                  flags=re.M)  # fmt: skip
    text = re.sub(r'zero_first = "\w*"', lambda m: f"zero_first = {string()}", text)
    return seed, text, {renamed[name]: array for name, array in seed.arrays.items()}


def _generated_sources(traced: nki.TracedKernel) -> list[str]:
    sources = [backends.load("numpy").emit_source(traced.ir)]
    from nki_dsl.backends.simulator.prepared import prepare
    from nki_dsl.targets import get_target

    sources.append(prepare(traced.ir, get_target("trn2")).stream().source)
    return sources


def _assert_nothing_ran() -> None:
    assert not MARKER.exists(), "a payload in IR text ran: it wrote the marker file"
    assert not hasattr(builtins, FLAG), "a payload in IR text ran: it set a builtin"


@pytest.fixture(autouse=True)
def _clean_marker():
    MARKER.unlink(missing_ok=True)
    yield
    _assert_nothing_ran()


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_texts())
def test_payloads_in_strings_and_names_never_run(case):
    seed, text, arrays = case
    try:
        traced = nki.parse_ir(text)
    except NkiError:
        _assert_nothing_ran()
        return
    for source in _generated_sources(traced):
        # (tensor names may say __import__: they reach the source as t___import__)
        assert FLAG not in source and str(MARKER) not in source
    for backend in nki.backend_names():
        try:
            out = traced.compile(backend=backend).run(arrays)
        except NkiError:
            continue
        assert same_outputs(out, seed.expected, backend), f"{seed.name} on {backend}: names and files changed outputs"
    _assert_nothing_ran()


def test_the_reported_exploit_is_a_parse_error_naming_line_and_column():
    seed = SEEDS[0]
    exploit = json.dumps(f"k.py\n    {CODE[0]}\n    #")
    text = re.sub(r'source "(?:\\.|[^"\\])*"', lambda m: f"source {exploit}", seed.text, count=1)
    with pytest.raises(NkiParseError) as info:
        nki.parse_ir(text, path="bundle/k.nkir")
    assert info.value.loc == SourceLoc("bundle/k.nkir", 3)
    assert "the string at column 10 holds U+000A (LINE FEED, a control character)" in str(info.value)


@pytest.mark.parametrize("char", ["\x00", "\n", "\r", "\x85", "\u2028", "\u2029", "\u202e", "\ud800", "\x7f"])
def test_strings_that_are_not_printable_text_are_refused_escaped_or_raw(char):
    seed = SEEDS[0]
    for literal in (json.dumps(f"a{char}b"), f'"a{char}b"'):
        text = seed.text.replace("loc(", f"loc({literal}:", 1)
        with pytest.raises(NkiParseError, match=r"the string at column \d+ holds U\+|bad string literal|unexpected"):
            nki.parse_ir(text)


def test_printable_code_in_every_string_runs_nowhere():
    """Printable payloads pass the parser; the backends must keep them out of the code they generate."""
    seed = next(s for s in SEEDS if "lowered" not in s.name and " mask[" in s.text)
    code = json.dumps(f'"); {CODE[1]}; #'.replace("\n", " "))
    text = re.sub(r'source "(?:\\.|[^"\\])*"', lambda m: f"source {code}", seed.text, count=1)
    text = re.sub(r"loc\((\d+)\)", lambda m: f"loc({code}:{m[1]})", text)
    traced = nki.parse_ir(text)
    assert all(FLAG not in source for source in _generated_sources(traced))
    for backend in nki.backend_names():
        assert same_outputs(traced.compile(backend=backend).run(seed.arrays), seed.expected, backend)


def test_the_backends_write_no_ir_text_even_for_ir_that_skipped_the_parser():
    """The emitters' own defence: a Kernel built in Python with control characters in its names and locations."""
    from nki_dsl.ir.parser import parse_kernel

    seed = SEEDS[0]
    kernel = parse_kernel(seed.text)
    evil = f"x\n{CODE[1]}\n#"
    kernel.name = evil
    kernel.source_file = evil
    for stmt, _ in kernel.walk():
        stmt.loc = SourceLoc(evil, stmt.loc.line)
    for t in kernel.params:
        t.name = "p\n" + CODE[1] + "\n" + t.name
    arrays = {t.name: seed.arrays[t.name.rsplit("\n", 1)[1]] for t in kernel.params}
    for backend in nki.backend_names():
        out = backends.load(backend).compile_kernel(kernel, nki.get_target("trn2")).run(arrays)
        assert same_outputs(out, seed.expected, backend)
    _assert_nothing_ran()


def test_an_index_variable_that_is_code_is_refused_even_without_the_verifier():
    from nki_dsl.ir.affine import Affine
    from nki_dsl.ir.nodes import Access, Op
    from nki_dsl.ir.parser import parse_kernel

    seed = SEEDS[0]
    kernel = parse_kernel(seed.text)
    load = next(s for s, _ in kernel.walk() if isinstance(s, Op) and s.name == "nl.load")
    src = load.operands["src"]
    evil = Affine.var(f"(__import__('builtins').__setattr__({FLAG!r}, 1) or 0)")
    load.operands["src"] = Access(src.tensor, (src.index[0] + evil, *src.index[1:]), src.shape)
    for backend in nki.backend_names():
        with pytest.raises(NkiError):
            backends.load(backend).compile_kernel(kernel, nki.get_target("trn2")).run(seed.arrays)
    _assert_nothing_ran()
