"""A bounded JSON reader for request bodies: hostile JSON is a 400 with a message, never a 500 or a memory spike.

The standard `json` module is the wrong tool for untrusted bodies: deep nesting raises RecursionError, a
5,000-digit integer raises ValueError (Python's int-conversion limit), a lone surrogate `\\ud800` becomes a str
that fails later when encoded, and a commit line carrying a 100 MB file as one base64 string has to be held whole,
then decoded whole. This reader

- bounds nesting depth, number length and the bytes of everything it keeps in memory;
- refuses lone surrogates, raw control characters in strings, non-finite numbers and trailing data;
- hands the one string a caller names by its key path (a commit line's `value.content`) to a streaming sink
  piece by piece instead of building it, so a file of any size costs one 64 KiB buffer.

It reads one JSON value from a binary stream; for NDJSON the caller calls `read_line` until it returns
`END_OF_STREAM`. A raw newline never occurs inside a JSON value (strings must escape it), so it ends a line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import IO, Any, Protocol

from .errors import bad_request

CHUNK = 64 * 1024
MAX_NUMBER_CHARS = 40  # longer than any int64 or float repr; anything longer is not a count or a size
_STRING_STOP = re.compile(rb'["\\\x00-\x1f]')
_NUMBER_CHARS = frozenset(b"0123456789+-.eE")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WHITESPACE = frozenset(b" \t\r\n")
_LINE_WHITESPACE = frozenset(b" \t\r")  # in NDJSON a '\n' ends the value, so it is not whitespace there
_ESCAPES = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b", ord("f"): b"\f",
            ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"}  # fmt: skip
END_OF_STREAM = object()


class StringSink(Protocol):
    """Receives a streamed string's UTF-8 bytes in pieces; `close()` returns the value stored in its place."""

    def write(self, piece: bytes) -> None: ...

    def close(self) -> Any: ...


class _Reader:
    def __init__(self, stream: IO[bytes], what: str, max_depth: int, budget: int,
                 stream_at: tuple[str, ...] | None, sink_factory: Callable[[], StringSink] | None,
                 whitespace: frozenset[int] = _WHITESPACE):
        self.stream = stream
        self.whitespace = whitespace
        self.what = what
        self.max_depth = max_depth
        self.budget = budget  # bytes of non-streamed input one value may use
        self.stream_at = stream_at
        self.sink_factory = sink_factory
        self.buf = b""
        self.pos = 0
        self.used = 0

    # -- buffer --------------------------------------------------------------------------------------------------

    def _fill(self) -> bool:
        if self.pos < len(self.buf):
            return True
        self.buf, self.pos = self.stream.read(CHUNK), 0
        return bool(self.buf)

    def _peek(self) -> int | None:
        return self.buf[self.pos] if self._fill() else None

    def _take(self) -> int:
        if not self._fill():
            raise self.error("unexpected end of input")
        byte = self.buf[self.pos]
        self.pos += 1
        return byte

    def _charge(self, count: int) -> None:
        self.used += count
        if self.used > self.budget:
            raise self.error(f"more than {self.budget} bytes of JSON outside file contents")

    def error(self, message: str):
        return bad_request(f"{self.what} is not valid JSON: {message}")

    def skip_whitespace(self) -> int | None:
        while True:
            byte = self._peek()
            if byte is None or byte not in self.whitespace:
                return byte
            self.pos += 1

    # -- values --------------------------------------------------------------------------------------------------

    def value(self, path: tuple, depth: int) -> Any:
        """The value at `path`, inside `depth` enclosing arrays and objects."""
        byte = self.skip_whitespace()
        if byte is None:
            raise self.error("unexpected end of input")
        if byte in (ord("{"), ord("[")):
            if depth >= self.max_depth:
                raise self.error(f"nested deeper than {self.max_depth} levels")
            return self._object(path, depth) if byte == ord("{") else self._array(path, depth)
        if byte == ord('"'):
            self.pos += 1
            if self.stream_at is not None and path == self.stream_at:
                return self._streamed_string()
            return self._string()
        if byte in _NUMBER_CHARS:
            return self._number()
        for word, result in ((b"true", True), (b"false", False), (b"null", None)):
            if byte == word[0]:
                for expected in word:
                    if self._take() != expected:
                        raise self.error(f"invalid literal (expected {word.decode()})")
                self._charge(len(word))
                return result
        raise self.error(f"unexpected character {chr(byte)!r}")

    def _object(self, path: tuple, depth: int) -> dict:
        self.pos += 1
        result: dict[str, Any] = {}
        if self.skip_whitespace() == ord("}"):
            self.pos += 1
            return result
        while True:
            if self.skip_whitespace() != ord('"'):
                raise self.error("object keys must be strings")
            self.pos += 1
            key = self._string()
            if self.skip_whitespace() != ord(":"):
                raise self.error("expected ':' after an object key")
            self.pos += 1
            result[key] = self.value((*path, key), depth + 1)
            self._charge(2)
            separator = self.skip_whitespace()
            self.pos += 1
            if separator == ord("}"):
                return result
            if separator != ord(","):
                raise self.error("expected ',' or '}' in an object")

    def _array(self, path: tuple, depth: int) -> list:
        self.pos += 1
        result: list[Any] = []
        if self.skip_whitespace() == ord("]"):
            self.pos += 1
            return result
        while True:
            result.append(self.value((*path, None), depth + 1))
            self._charge(2)
            separator = self.skip_whitespace()
            self.pos += 1
            if separator == ord("]"):
                return result
            if separator != ord(","):
                raise self.error("expected ',' or ']' in an array")

    def _number(self) -> int | float:
        chars = bytearray()
        while (byte := self._peek()) is not None and byte in _NUMBER_CHARS:
            chars.append(byte)
            self.pos += 1
            if len(chars) > MAX_NUMBER_CHARS:
                raise self.error(f"a number longer than {MAX_NUMBER_CHARS} characters")
        self._charge(len(chars))
        text = chars.decode()
        match = _NUMBER.fullmatch(text)
        if match is None:
            raise self.error(f"malformed number {text!r}")
        if match.group(1) is None and match.group(2) is None:
            return int(text)
        number = float(text)
        if not math.isfinite(number):
            raise self.error(f"number {text!r} is out of range")
        return number

    def _string_pieces(self, emit: Callable[[bytes], None]) -> None:
        """The bytes of a string whose opening quote is consumed, unescaped, in pieces, through `emit`."""
        while True:
            if not self._fill():
                raise self.error("unterminated string")
            stop = _STRING_STOP.search(self.buf, self.pos)
            end = len(self.buf) if stop is None else stop.start()
            if end > self.pos:
                emit(self.buf[self.pos:end])
                self.pos = end
            if stop is None:
                continue
            byte = self._take()
            if byte == ord('"'):
                return
            if byte != ord("\\"):
                raise self.error(f"raw control character U+{byte:04X} in a string (it must be escaped)")
            escape = self._take()
            if escape == ord("u"):
                emit(self._unicode_escape())
            elif escape in _ESCAPES:
                emit(_ESCAPES[escape])
            else:
                raise self.error(f"invalid escape \\{chr(escape)}")

    def _hex4(self) -> int:
        digits = bytes(self._take() for _ in range(4))
        return int(digits, 16) if all(byte in _HEX for byte in digits) else -1

    def _unicode_escape(self) -> bytes:
        code = self._hex4()
        if code < 0:
            raise self.error("invalid \\u escape")
        if 0xDC00 <= code <= 0xDFFF:
            raise self.error(f"lone surrogate \\u{code:04x}")
        if 0xD800 <= code <= 0xDBFF:
            if self._take() != ord("\\") or self._take() != ord("u"):
                raise self.error(f"lone surrogate \\u{code:04x}")
            low = self._hex4()
            if not 0xDC00 <= low <= 0xDFFF:
                raise self.error(f"lone surrogate \\u{code:04x}")
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        return chr(code).encode("utf-8")

    def _string(self) -> str:
        pieces: list[bytes] = []

        def keep(piece: bytes) -> None:
            self._charge(len(piece))
            pieces.append(piece)

        self._string_pieces(keep)
        try:
            return b"".join(pieces).decode("utf-8")
        except UnicodeDecodeError:
            raise self.error("a string is not valid UTF-8") from None

    def _streamed_string(self) -> Any:
        sink = self.sink_factory()
        self._string_pieces(sink.write)
        return sink.close()


def loads(data: IO[bytes], what: str = "Request body", max_depth: int = 32, budget: int = 16 * 1024 * 1024) -> Any:
    """One JSON document from a binary stream, with nothing but whitespace after it."""
    reader = _Reader(data, what, max_depth, budget, None, None)
    value = reader.value((), 0)
    if reader.skip_whitespace() is not None:
        raise reader.error("trailing data after the JSON value")
    return value


class LineReader:
    """NDJSON: one bounded value per line; the string at `stream_at` in each line goes to `sink_factory()`."""

    def __init__(self, stream: IO[bytes], what: str, max_depth: int, line_budget: int,
                 stream_at: tuple[str, ...], sink_factory: Callable[[], StringSink]):
        self._reader = _Reader(stream, what, max_depth, line_budget, stream_at, sink_factory, _LINE_WHITESPACE)
        self.line = 0

    def read_line(self) -> Any:
        """The next non-blank line's value, or END_OF_STREAM."""
        reader = self._reader
        while True:
            byte = reader.skip_whitespace()
            if byte is None:
                return END_OF_STREAM
            if byte != ord("\n"):
                break
            reader.pos += 1
        self.line += 1
        reader.used = 0
        reader.what = reader.what.split(" line ")[0] + f" line {self.line}"
        value = reader.value((), 0)
        end = reader.skip_whitespace()
        if end is not None and end != ord("\n"):
            raise reader.error("trailing data after the JSON value (one value per line)")
        return value
