"""The bounded JSON reader agrees with the standard `json` module on every valid document it accepts, however the
input is split into reads, streams the one string it is asked to, and refuses hostile input with a 400."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub_client.server import jsonstream
from hub_client.server.errors import HubError
from tests.examples import examples


class Trickle(io.RawIOBase):
    """A stream that returns at most `step` bytes per read: every token and escape straddles a read boundary."""

    def __init__(self, data: bytes, step: int = 1):
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        piece = self._data[self._pos:self._pos + min(self._step, size if size >= 0 else self._step)]
        self._pos += len(piece)
        return piece


# Finite floats and bounded ints: the reader refuses non-finite numbers and numbers past 40 characters by design.
_scalars = (st.none() | st.booleans() | st.integers(-(10 ** 30), 10 ** 30)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text())
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=examples(150), deadline=None)
@given(value=_values, ascii_only=st.booleans(), compact=st.booleans(), step=st.sampled_from([1, 2, 3, 7, 65536]))
def test_it_reads_what_json_writes(value, ascii_only, compact, step):
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":") if compact else None)
    assert jsonstream.loads(Trickle(text.encode(), step)) == json.loads(text)


@pytest.mark.parametrize("document", [
    b"  {\t\"a\" :\r[ 1 ,2\n]}  \n\n", b"\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\\"\\\\\"", b"-0", b"0.5e-3",
    b"1E+2", b"[true,false,null]", b"{}", b"[]", b'""', b"[[[]]]",
])
def test_edge_documents_agree_with_json(document):
    for step in (1, 4096):
        assert jsonstream.loads(Trickle(document, step)) == json.loads(document)


@pytest.mark.parametrize(("document", "reason"), [
    (b"", "unexpected end of input"),
    (b"   ", "unexpected end of input"),
    (b"[1,", "unexpected end of input"),
    (b'{"a":', "unexpected end of input"),
    (b'"abc', "unterminated string"),
    (b'"\\x"', "invalid escape"),
    (b'"\\u12"xx', "invalid \\u escape"),
    (b'"\\u12g4"', "invalid \\u escape"),
    (b'"\\udc00"', "lone surrogate"),
    (b'"\\ud800"', "lone surrogate"),
    (b'"\\ud800\\u0041"', "lone surrogate"),
    (b'"\\ud800x"', "lone surrogate"),
    (b'"a\tb"', "raw control character U+0009"),
    (b'"\xc3"', "not valid UTF-8"),
    (b"01", "malformed number"),
    (b"1.", "malformed number"),
    (b"-", "malformed number"),
    (b"1e", "malformed number"),
    (b"+1", "malformed number"),
    (b"1" * 41, "longer than 40 characters"),
    (b"1e400", "out of range"),
    (b"-1e400", "out of range"),
    (b"nul", "unexpected end of input"),
    (b"nulx", "invalid literal (expected null)"),
    (b"trUe", "invalid literal (expected true)"),
    (b"falsy", "invalid literal (expected false)"),
    (b"xyz", "unexpected character 'x'"),
    (b"{1:2}", "object keys must be strings"),
    (b'{"a" 1}', "expected ':'"),
    (b'{"a":1 "b":2}', "expected ',' or '}'"),
    (b"[1 2]", "expected ',' or ']'"),
    (b"[1,]", "unexpected character ']'"),
    (b"{} {}", "trailing data"),
    (b"[" * 33 + b"]" * 33, "nested deeper than 32 levels"),
])
def test_hostile_documents_are_400_with_the_reason(document, reason):
    for step in (1, 4096):
        with pytest.raises(HubError) as caught:
            jsonstream.loads(Trickle(document, step))
        assert caught.value.status == 400 and reason in caught.value.message, caught.value.message
        assert caught.value.message.startswith("Request body is not valid JSON: ")


def test_depth_and_budget_limits_are_exact():
    assert jsonstream.loads(io.BytesIO(b"[" * 32 + b"]" * 32), max_depth=32) is not None
    assert jsonstream.loads(io.BytesIO(b"[" * 3 + b"]" * 3), max_depth=3) == [[[]]]
    with pytest.raises(HubError, match="deeper than 2 levels"):
        jsonstream.loads(io.BytesIO(b"[[[]]]"), max_depth=2)
    assert jsonstream.loads(io.BytesIO(b'"' + b"a" * 10 + b'"'), budget=10) == "a" * 10
    with pytest.raises(HubError, match="more than 10 bytes"):
        jsonstream.loads(io.BytesIO(b'"' + b"a" * 11 + b'"'), budget=10)
    assert jsonstream.loads(io.BytesIO(b"1" * 40)) == int("1" * 40)
    with pytest.raises(HubError, match="what was sent is not valid JSON"):
        jsonstream.loads(io.BytesIO(b"[1"), what="what was sent")


class Collect:
    def __init__(self):
        self.pieces: list[bytes] = []
        self.closed = False

    def write(self, piece: bytes) -> None:
        assert not self.closed
        self.pieces.append(piece)

    def close(self):
        self.closed = True
        return ("streamed", b"".join(self.pieces))


def _lines(data: bytes, step: int, budget: int = 1 << 20):
    sinks: list[Collect] = []

    def factory():
        sinks.append(Collect())
        return sinks[-1]

    reader = jsonstream.LineReader(Trickle(data, step), "Commit payload", max_depth=8, line_budget=budget,
                                   stream_at=("value", "content"), sink_factory=factory)
    values = []
    while (value := reader.read_line()) is not jsonstream.END_OF_STREAM:
        values.append((reader.line, value))
    return values, sinks


@pytest.mark.parametrize("step", [1, 3, 65536])
def test_ndjson_lines_stream_the_named_string_and_keep_the_rest(step):
    big = "QUJD" * 5000 + "\\/x\\u00e9"  # escapes inside the streamed string are unescaped too
    data = (b'\n{"key": "header", "value": {"summary": "s"}}\n\n  \n'
            + b'{"value": {"content": "' + big.encode() + b'", "path": "p"}, "key": "file"}\r\n'
            + b'{"key": "x", "value": {"nested": {"content": "kept"}}, "content": "kept too"}')
    values, sinks = _lines(data, step)
    assert [number for number, _ in values] == [1, 2, 3]
    assert values[0][1] == {"key": "header", "value": {"summary": "s"}}
    assert values[1][1] == {"value": {"content": ("streamed", ("QUJD" * 5000 + "/xé").encode()), "path": "p"},
                            "key": "file"}
    assert values[2][1] == {"key": "x", "value": {"nested": {"content": "kept"}}, "content": "kept too"}
    assert len(sinks) == 1 and sinks[0].closed


def test_the_line_budget_counts_everything_but_the_streamed_string():
    content = "A" * 5000
    line = json.dumps({"key": "file", "value": {"content": content, "path": "p"}}).encode()
    values, _ = _lines(line, 65536, budget=200)  # 5,000 streamed bytes do not count against 200
    assert values[0][1]["value"]["path"] == "p"
    with pytest.raises(HubError, match="more than 20 bytes") as caught:
        _lines(line, 65536, budget=20)
    assert caught.value.message.startswith("Commit payload line 1 is not valid JSON: more than 20 bytes")
    # Each line has its own budget.
    two = b"\n".join(json.dumps({"key": key * 50, "value": {}}).encode() for key in "ab")
    assert len(_lines(two, 65536, budget=90)[0]) == 2


@pytest.mark.parametrize(("data", "reason"), [
    (b'{"key": "header", "value": {}} {"x": 1}\n', "one value per line"),
    (b'{"key": "header"}\n[' + b"[" * 8 + b"]" * 9 + b"\n", "nested deeper than 8 levels"),
    (b'{"key": "a", "value": {"content": "abc\n"}}', "raw control character U+000A"),
    (b'{"key": "a"}\n{"key": ', "unexpected end of input"),
])
def test_bad_ndjson_lines_are_refused_naming_the_line(data, reason):
    with pytest.raises(HubError) as caught:
        _lines(data, 1)
    assert reason in caught.value.message and caught.value.message.startswith("Commit payload line ")


def test_errors_name_the_line_they_are_on_and_each_line_has_the_whole_budget():
    # `{"a":"bc"}` costs exactly 5 bytes of budget: key 1, value 2, and 2 for the member.
    assert len(_lines(b'{"a":"bc"}\n{"a":"bc"}', 1, budget=5)[0]) == 2
    with pytest.raises(HubError, match="more than 4 bytes"):
        _lines(b'{"a":"bc"}', 1, budget=4)
    with pytest.raises(HubError) as caught:
        _lines(b'{"a": 1}\n\n{"a": 1} 2\n', 1)
    assert caught.value.message == ("Commit payload line 2 is not valid JSON: trailing data after the JSON value "
                                    "(one value per line)")
    eight = b"[" * 8 + b"]" * 8  # exactly the depth limit of a commit line
    assert _lines(eight, 1)[0] == [(1, [[[[[[[[]]]]]]]])]
