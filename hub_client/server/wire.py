"""Reading a connection under deadlines, and a request body from it onto disk under a size limit.

The standard library's handler reads through a buffered socket file whose only bound is a per-`recv` timeout:
a client dripping one byte just inside that timeout keeps a thread forever, and the old body reader held the
whole body in memory before anything looked at it. `DeadlineReader` replaces that file: every `recv` is given
what is left of an absolute deadline, so a request head or a body either completes in time or ends with
`TimeoutError`. `read_body` copies the body in 64 KiB pieces into a spooled temporary file (memory up to 1 MiB,
then disk), refusing past a size limit (413), a malformed framing (400) or a stall (408).
"""

from __future__ import annotations

import re
import socket
import tempfile
import time
from pathlib import Path
from typing import IO

from .errors import HubError, bad_request

PIECE = 64 * 1024
SPOOL_IN_MEMORY = 1024 * 1024
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:[ \t]*;[^\r\n]*)?\r?\n")
_MAX_TRAILERS = 64


def body_timeout(message: str) -> HubError:
    return HubError(408, message, "RequestTimeout")


class DeadlineReader:
    """A read-only file over a socket whose reads fail with TimeoutError once `deadline` (monotonic) passes.

    Provides the `readline` the standard library's request parsing uses, `read_some` for bodies, and `arm` to set
    the deadline and the longest wait for any single `recv` (a stall).
    """

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._buf = bytearray()
        self._eof = False
        self.deadline: float | None = None
        self.stall: float | None = None

    def arm(self, deadline: float | None, stall: float | None) -> None:
        self.deadline, self.stall = deadline, stall

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def fill(self) -> bool:
        """One `recv` into the buffer, within the deadline; False at end of stream."""
        if self._eof:
            return False
        wait = self.stall
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("deadline passed")
            wait = left if wait is None else min(wait, left)
        self._sock.settimeout(wait)
        data = self._sock.recv(PIECE)
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    def readline(self, limit: int = -1) -> bytes:
        start = 0
        while True:
            end = self._buf.find(b"\n", start)
            if end >= 0 and (limit < 0 or end < limit):
                return self._cut(end + 1)
            if 0 <= limit <= len(self._buf):
                return self._cut(limit)
            start = len(self._buf)
            if not self.fill():
                return self._cut(len(self._buf))

    def read_some(self, size: int) -> bytes:
        """Up to `size` bytes, at most one `recv` (b"" at end of stream)."""
        if not self._buf:
            self.fill()
        return self._cut(min(size, len(self._buf)))

    def _cut(self, count: int) -> bytes:
        data = bytes(self._buf[:count])
        del self._buf[:count]
        return data

    def close(self) -> None:
        self._buf.clear()


def declared_length(headers) -> int | None:
    """The body length the headers promise: an int for Content-Length, None for chunked; 400 if ambiguous."""
    encodings = [value.strip().lower() for value in headers.get_all("Transfer-Encoding", [])]
    lengths = {value.strip() for value in headers.get_all("Content-Length", [])}
    if encodings:
        # Both framings at once is how request smuggling starts; and chunked is the only coding understood here.
        if lengths:
            raise bad_request("Both Transfer-Encoding and Content-Length given")
        if encodings != ["chunked"]:
            raise HubError(501, f"Transfer-Encoding {', '.join(encodings)!r} is not supported (only 'chunked')")
        return None
    if not lengths:
        return 0
    if len(lengths) > 1:
        raise bad_request("Conflicting Content-Length headers")
    (length,) = lengths
    if not length.isdigit() or not length.isascii() or len(length) > 19:
        raise bad_request(f"Invalid Content-Length {length[:32]!r}")
    return int(length)


def read_body(reader: DeadlineReader, length: int | None, limit: int, scratch: Path, read_timeout: float,
              min_rate: int) -> IO[bytes]:
    """The body (`length` bytes, or chunked if None) in a temporary file positioned at 0."""
    if length is not None and length > limit:
        raise HubError(413, f"Request body of {length} bytes is larger than the limit of {limit} bytes")
    spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY, dir=scratch)  # noqa: SIM115 - returned open
    try:
        started = time.monotonic()
        received = 0

        def copy(count: int) -> None:
            nonlocal received
            while count:
                # The stall bound is per recv; the overall schedule: `received` bytes by `read_timeout` plus
                # `received / min_rate` seconds after the body started, i.e. `min_rate` on average.
                reader.arm(started + read_timeout + received / min_rate, read_timeout)
                try:
                    piece = reader.read_some(min(count, PIECE))
                except TimeoutError:
                    raise body_timeout(f"Request body stalled: {received} bytes received, then nothing within "
                                      f"{read_timeout:g} s (or slower than {min_rate} bytes/s)") from None
                if not piece:
                    raise bad_request(f"Connection closed after {received} bytes of the request body")
                spool.write(piece)
                received += len(piece)
                count -= len(piece)

        if length is not None:
            copy(length)
        else:
            while True:
                size = _chunk_size(_line(reader, read_timeout))
                if size == 0:
                    break
                if received + size > limit:
                    raise HubError(413, f"Chunked request body is larger than the limit of {limit} bytes")
                copy(size)
                if _line(reader, read_timeout) not in (b"\r\n", b"\n"):
                    raise bad_request("Malformed chunked body: a chunk is not followed by CRLF")
            for _ in range(_MAX_TRAILERS):
                if _line(reader, read_timeout) in (b"\r\n", b"\n"):
                    break
            else:
                raise bad_request(f"Malformed chunked body: more than {_MAX_TRAILERS} trailer lines")
        spool.seek(0)
        return spool
    except BaseException:
        spool.close()
        raise


def _line(reader: DeadlineReader, read_timeout: float) -> bytes:
    reader.arm(time.monotonic() + read_timeout, read_timeout)
    try:
        line = reader.readline(1024)
    except TimeoutError:
        raise body_timeout(f"Chunked request body stalled (no chunk line within {read_timeout:g} s)") from None
    if not line.endswith(b"\n"):
        raise bad_request("Malformed chunked body: a chunk-size line is missing or longer than 1024 bytes")
    return line


def _chunk_size(line: bytes) -> int:
    match = _CHUNK_SIZE.fullmatch(line)
    if match is None:
        raise bad_request(f"Malformed chunked body: chunk-size line {line[:40]!r} is not a hexadecimal size")
    return int(match.group(1), 16)
