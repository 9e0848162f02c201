"""The connection reader and the body reader on a socket pair: lines and sizes exactly as the standard library's
file reads them, deadlines that hold however the bytes arrive, and every framing error named."""

from __future__ import annotations

import socket
import threading
import time
from email.message import Message

import pytest

from hub_client.server import wire
from hub_client.server.errors import HubError


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield wire.DeadlineReader(ours), theirs
    ours.close()
    theirs.close()


def test_readline_matches_a_buffered_file(pair):
    reader, peer = pair
    peer.sendall(b"first\r\nsecond\nthird-without-end")
    peer.shutdown(socket.SHUT_WR)
    assert reader.readline() == b"first\r\n"
    assert reader.readline(3) == b"sec"  # a limit cuts the line, as io.BufferedReader.readline(limit) does
    assert reader.readline(100) == b"ond\n"
    assert reader.buffered == len(b"third-without-end")
    assert reader.read_some(5) == b"third"
    assert reader.readline() == b"-without-end"  # the end of the stream ends the last line
    assert reader.readline() == b"" and reader.read_some(10) == b"" and reader.buffered == 0


def test_readline_limit_exactly_at_the_newline(pair):
    reader, peer = pair
    peer.sendall(b"abc\nrest")
    peer.shutdown(socket.SHUT_WR)
    assert reader.readline(4) == b"abc\n"
    assert reader.readline(0) == b""
    assert reader.read_some(2) == b"re" and reader.read_some(100) == b"st"


def test_a_deadline_holds_against_a_byte_dripped_just_inside_the_stall_timeout(pair):
    reader, peer = pair
    stop = threading.Event()

    def drip():
        while not stop.is_set():
            try:
                peer.sendall(b"a")
            except OSError:
                return
            time.sleep(0.05)

    dripper = threading.Thread(target=drip)
    dripper.start()
    try:
        reader.arm(time.monotonic() + 0.5, 1.0)
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            reader.readline(65537)  # no newline ever comes; each recv succeeds well within the 1 s stall bound
        # Without the deadline the read would end at its 65537-byte limit, about an hour of drips away: any bound
        # far below that tells the two apart, and a wide one holds on a loaded machine.
        assert time.monotonic() - began < 30
    finally:
        stop.set()
        dripper.join()


def test_a_stall_bound_alone_ends_a_silent_read(pair):
    reader, _ = pair
    reader.arm(None, 0.2)
    with pytest.raises(TimeoutError):
        reader.read_some(10)
    reader.arm(time.monotonic() - 1, None)  # a deadline already past fails before any wait
    with pytest.raises(TimeoutError, match="deadline passed"):
        reader.fill()


def _headers(**values: str) -> Message:
    message = Message()
    for key, value in values.items():
        message[key.replace("_", "-")] = value
    return message


def test_declared_length():
    assert wire.declared_length(_headers()) == 0
    assert wire.declared_length(_headers(Content_Length="42")) == 42
    assert wire.declared_length(_headers(Content_Length=" 7 ")) == 7
    assert wire.declared_length(_headers(Transfer_Encoding="Chunked")) is None
    assert wire.declared_length(_headers(Content_Length="9" * 19)) == int("9" * 19)
    for bad in ("-1", "1e3", "0x10", "", "9" * 20, "١٢"):
        with pytest.raises(HubError) as caught:
            wire.declared_length(_headers(Content_Length=bad))
        assert caught.value.status == 400 and "Content-Length" in caught.value.message, bad
    both = _headers(Content_Length="5", Transfer_Encoding="chunked")
    assert "Both" in pytest.raises(HubError, wire.declared_length, both).value.message
    two = Message()
    two["Content-Length"], two["Content-Length"] = "5", "6"
    assert "Conflicting" in pytest.raises(HubError, wire.declared_length, two).value.message
    same = Message()
    same["Content-Length"], same["Content-Length"] = "5", "5"
    assert wire.declared_length(same) == 5
    assert pytest.raises(HubError, wire.declared_length, _headers(Transfer_Encoding="gzip, chunked")).value.status \
        == 501


def _body(pair, tmp_path, data: bytes, length, limit=1 << 20, timeout=2.0, rate=1 << 20, close=True):
    reader, peer = pair
    peer.sendall(data)
    if close:
        peer.shutdown(socket.SHUT_WR)
    with wire.read_body(reader, length, limit, tmp_path, timeout, rate) as body:
        return body.read()


def test_read_body_by_length_and_chunked(pair, tmp_path):
    assert _body(pair, tmp_path, b"hello world", 5, close=False) == b"hello"
    assert pair[0].read_some(6) == b" world"  # nothing past the body was taken from the connection


@pytest.mark.parametrize(("data", "expected"), [
    (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
    (b"5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n", b"hello"),
    (b"A\r\n0123456789\n0\n\n", b"0123456789"),  # bare LF line ends, uppercase hex
    (b"0\r\n\r\n", b""),
])
def test_chunked_bodies(pair, tmp_path, data, expected):
    assert _body(pair, tmp_path, data, None) == expected


@pytest.mark.parametrize(("data", "status", "reason"), [
    (b"-5\r\nhello\r\n0\r\n\r\n", 400, "not a hexadecimal size"),
    (b"\r\n", 400, "not a hexadecimal size"),
    (b"1" * 17 + b"\r\n", 400, "not a hexadecimal size"),
    (b"5\r\nhelloXX\r\n0\r\n\r\n", 400, "not followed by CRLF"),
    (b"5\r\nhel", 400, "Connection closed after 3 bytes"),
    (b"5", 400, "missing or longer than 1024 bytes"),
    (b"0\r\n" + b"T: x\r\n" * 65, 400, "more than 64 trailer lines"),
    (b"8\r\n12345678\r\n8\r\n12345678\r\n", 413, "larger than the limit of 10 bytes"),
])
def test_malformed_or_oversized_chunked_bodies(pair, tmp_path, data, status, reason):
    with pytest.raises(HubError) as caught:
        _body(pair, tmp_path, data, None, limit=10)
    assert caught.value.status == status and reason in caught.value.message, caught.value.message


def test_a_declared_length_past_the_limit_is_413_before_reading(pair, tmp_path):
    with pytest.raises(HubError) as caught:
        _body(pair, tmp_path, b"", 11, limit=10)
    assert caught.value.status == 413 and "11 bytes" in caught.value.message


def test_a_body_exactly_at_the_limit_is_read(pair, tmp_path):
    assert _body(pair, tmp_path, b"0123456789", 10, limit=10) == b"0123456789"


def test_an_empty_body_is_read_without_waiting(pair, tmp_path):
    assert _body(pair, tmp_path, b"", 0, limit=10, close=False) == b""


def test_a_stalled_body_is_408_naming_what_arrived(pair, tmp_path):
    with pytest.raises(HubError) as caught:
        _body(pair, tmp_path, b"abc", 10, timeout=0.2, close=False)
    assert caught.value.status == 408 and caught.value.code == "RequestTimeout"
    assert "3 bytes received" in caught.value.message
    with pytest.raises(HubError) as chunked:
        _body(pair, tmp_path, b"", None, timeout=0.2, close=False)
    assert chunked.value.status == 408


def test_a_body_behind_its_minimum_rate_is_408(pair, tmp_path):
    reader, peer = pair
    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            try:
                peer.sendall(b"x")
            except OSError:
                return
            time.sleep(0.02)

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        began = time.monotonic()
        with pytest.raises(HubError) as caught:  # 50 bytes/s against 1,000 bytes/s after a 0.3 s grace
            wire.read_body(reader, 10_000, 1 << 20, tmp_path, 0.3, 1000)
        # Without the rate check the 10,000 bytes would take 200 s to trickle in: 60 s tells the two apart on a
        # loaded machine.
        assert caught.value.status == 408 and time.monotonic() - began < 60
    finally:
        stop.set()
        sender.join()


def test_large_bodies_spill_to_disk_and_keep_every_byte(pair, tmp_path):
    reader, peer = pair
    data = bytes(range(256)) * 8192  # 2 MiB: past the 1 MiB kept in memory
    sender = threading.Thread(target=peer.sendall, args=(data,))
    sender.start()
    with wire.read_body(reader, len(data), 4 << 20, tmp_path, 5.0, 1 << 20) as body:
        sender.join()
        assert body._rolled and body.read() == data  # SpooledTemporaryFile moved to a real file


def test_readline_stops_at_its_limit_before_a_newline_just_past_it(pair):
    reader, peer = pair
    peer.sendall(b"abcd\nxy")
    peer.shutdown(socket.SHUT_WR)
    assert reader.readline(4) == b"abcd"
    assert reader.readline(4) == b"\n"
    assert reader.readline(2) == b"xy"


def test_the_stall_bound_and_the_deadline_each_end_a_wait_on_their_own(pair):
    reader, _ = pair
    began = time.monotonic()
    reader.arm(time.monotonic() + 30, 0.2)  # the stall bound is the shorter: it decides
    with pytest.raises(TimeoutError):
        reader.read_some(1)
    reader.arm(time.monotonic() + 0.2, None)  # no stall bound: the deadline alone decides
    with pytest.raises(TimeoutError):
        reader.read_some(1)
    assert time.monotonic() - began < 5


def test_a_body_stalls_into_408_even_when_its_rate_schedule_is_far_away(pair, tmp_path):
    began = time.monotonic()
    with pytest.raises(HubError) as caught:  # min_rate 1 byte/s would allow hours; the 0.2 s stall bound does not
        _body(pair, tmp_path, b"abc", 10_000, timeout=0.2, rate=1, close=False)
    assert caught.value.status == 408 and time.monotonic() - began < 5


def test_a_body_just_above_its_minimum_rate_is_read(pair, tmp_path):
    reader, peer = pair
    data = b"y" * 2000

    def send():  # 2,000 bytes/s against a 1,000 bytes/s minimum
        for start in range(0, len(data), 100):
            peer.sendall(data[start:start + 100])
            time.sleep(0.05)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        # A 1 s grace (not 0.3 s): the sender thread may be held up a few hundred ms on a loaded machine, which
        # must not turn the test into one of the scheduler.
        with wire.read_body(reader, len(data), 1 << 20, tmp_path, 1.0, 1000) as body:
            assert body.read() == data
    finally:
        sender.join()


def test_chunk_sizes_are_hexadecimal_and_add_up_against_the_limit(pair, tmp_path):
    assert _body(pair, tmp_path, b"10\r\n" + b"z" * 16 + b"\r\n0\r\n\r\n", None) == b"z" * 16


def test_many_small_chunks_still_reach_the_limit(pair, tmp_path):
    with pytest.raises(HubError) as caught:
        _body(pair, tmp_path, b"4\r\naaaa\r\n" * 3 + b"0\r\n\r\n", None, limit=10)
    assert caught.value.status == 413


def test_chunks_exactly_at_the_limit_are_read(pair, tmp_path):
    assert _body(pair, tmp_path, b"5\r\naaaaa\r\n5\r\nbbbbb\r\n0\r\n\r\n", None, limit=10) == b"aaaaabbbbb"


def test_framing_messages():
    both = _headers(Content_Length="5", Transfer_Encoding="chunked")
    assert pytest.raises(HubError, wire.declared_length, both).value.message == \
        "Both Transfer-Encoding and Content-Length given"
    gzip = _headers(Transfer_Encoding="gzip, chunked")
    assert pytest.raises(HubError, wire.declared_length, gzip).value.message == \
        "Transfer-Encoding 'gzip, chunked' is not supported (only 'chunked')"
    long_value = "x" * 40
    assert pytest.raises(HubError, wire.declared_length, _headers(Content_Length=long_value)).value.message == \
        f"Invalid Content-Length {long_value[:32]!r}"
