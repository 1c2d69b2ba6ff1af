"""The lean HTTP core read without a network: byte streams in, answers or failures out."""

from __future__ import annotations

import pytest

from dynalease._transport.http.failures import Stale, Unanswered
from dynalease._transport.http.wire import (
    MAX_BODY,
    MAX_HEAD,
    ResponseReader,
    frame_request,
    header_line,
)

BODY = b'{"ConsumedCapacity":{"CapacityUnits":1.0,"TableName":"locks"}}'
KEEP_ALIVE = (
    b"HTTP/1.1 200 OK\r\nServer: Server\r\nContent-Type: application/x-amz-json-1.0\r\n"
    b"Content-Length: %d\r\nx-amzn-RequestId: R1\r\nx-amz-crc32: 3253383209\r\n\r\n%s"
    % (len(BODY), BODY)
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'5\r\n{"Ite\r\n8;ext=1\r\nm":null}\r\n0\r\nTrailer: x\r\n\r\n'
)


def _read(*pieces: bytes) -> tuple[ResponseReader, tuple[int, bytes, int | None] | None]:
    reader = ResponseReader()
    reader.start()
    answer = None
    for piece in pieces:
        assert answer is None, "an answer came before all its bytes"
        answer = reader.feed(piece)
    return reader, answer


def _every_split(data: bytes) -> list[tuple[bytes, bytes]]:
    return [(data[:at], data[at:]) for at in range(1, len(data))]


def test_a_request_is_one_post_with_its_headers_then_its_length_then_the_body() -> None:
    fields = header_line("Host", "h") + header_line("X-Amz-Target", "DynamoDB_20120810.GetItem")
    framed = frame_request(fields, b"{}")
    assert framed == (
        b"POST / HTTP/1.1\r\nHost: h\r\nX-Amz-Target: DynamoDB_20120810.GetItem\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )


@pytest.mark.parametrize("stream", [KEEP_ALIVE, CHUNKED], ids=["length", "chunked"])
def test_an_answer_split_at_any_byte_is_read_the_same(stream: bytes) -> None:
    _, whole = _read(stream)
    assert whole is not None
    for head, tail in _every_split(stream):
        reader, answer = _read(head, tail)
        assert answer == whole
        assert reader.keep


def test_an_answer_fed_one_byte_at_a_time_is_read_whole() -> None:
    _, answer = _read(*(KEEP_ALIVE[at : at + 1] for at in range(len(KEEP_ALIVE))))
    assert answer == (200, BODY, 3253383209)


def test_a_chunked_body_is_joined_and_its_extensions_and_trailers_ignored() -> None:
    _, answer = _read(CHUNKED)
    assert answer == (200, b'{"Item":null}', None)


def test_http_1_1_keeps_the_connection_unless_the_server_says_close() -> None:
    reader, _ = _read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
    assert not reader.keep
    reader, _ = _read(b"HTTP/1.1 200 OK\r\nconnection: Keep-Alive\r\ncontent-length: 2\r\n\r\n{}")
    assert reader.keep


def test_http_1_0_closes_the_connection_unless_the_server_says_keep_alive() -> None:
    reader, _ = _read(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert not reader.keep
    reader, _ = _read(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}")
    assert reader.keep


def test_bytes_after_the_answer_make_the_connection_unfit_for_reuse() -> None:
    reader, answer = _read(KEEP_ALIVE + b"HTTP/1.1 200 OK\r\n")
    assert answer == (200, BODY, 3253383209)
    assert not reader.keep


def test_an_answer_without_length_runs_to_the_end_of_the_connection() -> None:
    reader, answer = _read(b"HTTP/1.0 200 OK\r\nX-Amz-Crc32: 7\r\n\r\n", b'{"Item"', b":null}")
    assert answer is None
    assert reader.end(None) == (200, b'{"Item":null}', 7)
    assert not reader.keep


@pytest.mark.parametrize("cut", [1, 20, len(KEEP_ALIVE) - len(BODY), len(KEEP_ALIVE) - 1])
def test_a_truncated_answer_is_unanswered_not_an_answer(cut: int) -> None:
    reader, answer = _read(KEEP_ALIVE[:cut])
    assert answer is None
    with pytest.raises(Unanswered) as raised:
        reader.end(None)
    assert not raised.value.timeout
    assert isinstance(raised.value.cause, ConnectionResetError)


def test_a_truncated_chunked_answer_is_unanswered() -> None:
    reader, answer = _read(CHUNKED[:-2])
    assert answer is None
    with pytest.raises(Unanswered):
        reader.end(ConnectionResetError("reset"))


def test_a_connection_closed_before_any_byte_is_stale_only_when_it_was_reused() -> None:
    reader = ResponseReader()
    reader.start()
    with pytest.raises(Unanswered):
        reader.end(None)  # a new connection: the request may have arrived
    reader = ResponseReader()
    reader.start()
    assert reader.feed(KEEP_ALIVE) is not None
    reader.start()
    assert reader.reused
    with pytest.raises(Stale):
        reader.end(None)  # a reused one: maybe dropped while idle, never read
    reader.hand_over()
    with pytest.raises(Unanswered):
        reader.end(None)  # whoever reads a late answer learns it was not answered


def test_a_failed_send_on_a_reused_connection_is_stale_and_a_timeout_is_not() -> None:
    reader = ResponseReader()
    reader.start()
    reader.feed(KEEP_ALIVE)
    reader.start()
    assert isinstance(reader.send_failed(BrokenPipeError()), Stale)
    timed_out = reader.send_failed(TimeoutError())
    assert isinstance(timed_out, Unanswered) and timed_out.timeout


def test_interim_answers_are_skipped_before_the_real_one() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
    for head, tail in _every_split(interim + KEEP_ALIVE):
        _, answer = _read(head, tail)
        assert answer == (200, BODY, 3253383209)


@pytest.mark.parametrize(
    "head",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx-amz-crc32: abc\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    ],
    ids=["not-http", "status", "negative", "plus", "underscore", "crc", "chunk-size", "101"],
)
def test_a_malformed_answer_is_unanswered(head: bytes) -> None:
    with pytest.raises(Unanswered) as raised:
        _read(head)
    assert isinstance(raised.value.cause, ValueError)


_GRAMMAR_BREAKS = {
    "bare-lf-in-value": b"X: a\nb\r\n",
    "bare-cr-in-value": b"X: a\rb\r\n",
    "nul-in-value": b"X: a\x00b\r\n",
    "vt-in-value": b"X: a\x0bb\r\n",
    "ff-in-value": b"X: a\x0cb\r\n",
    "no-colon": b"X a\r\n",
    "space-before-colon": b"X : a\r\n",
    "folded": b"X: a\r\n b\r\n",
    "empty-name": b": a\r\n",
}


@pytest.mark.parametrize("field", _GRAMMAR_BREAKS.values(), ids=_GRAMMAR_BREAKS.keys())
@pytest.mark.parametrize("where", ["first", "last", "only"])
def test_a_head_breaking_the_field_grammar_anywhere_is_refused(field: bytes, where: str) -> None:
    fields = {
        "first": field + b"Content-Length: 2\r\n",
        "last": b"Content-Length: 2\r\n" + field,
        "only": field,
    }[where]
    with pytest.raises(Unanswered, match=r"not an HTTP/1\.1 answer head"):
        _read(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n{}")


@pytest.mark.parametrize(
    "status_line",
    [b"HTTP/1.1 200 O\x00K", b"HTTP/1.1 200 O\rK", b"HTTP/1.1 200 O\x0bK", b"HTTP/1.1 200OK"],
)
def test_a_status_line_breaking_the_grammar_is_refused(status_line: bytes) -> None:
    with pytest.raises(Unanswered, match=r"not an HTTP/1\.1 answer head"):
        _read(status_line + b"\r\nContent-Length: 2\r\n\r\n{}")


def test_a_head_of_only_a_status_line_is_read() -> None:
    _, answer = _read(b"HTTP/1.0 200 OK\r\n\r\n{}")
    assert answer is None  # HTTP/1.0 without a length: the body runs to the close


def test_a_head_without_end_is_refused_past_its_cap() -> None:
    reader, answer = _read(b"HTTP/1.1 200 OK\r\n", b"X: " + b"a" * (MAX_HEAD - 100))
    assert answer is None
    with pytest.raises(Unanswered, match="too large"):
        reader.feed(b"a" * 200)


def test_one_reader_reads_successive_answers_on_a_kept_connection() -> None:
    reader = ResponseReader()
    for index in range(3):
        reader.start()
        assert reader.reused == (index > 0)
        assert reader.feed(KEEP_ALIVE) == (200, BODY, 3253383209)
        assert reader.keep and reader.quiet


def test_a_content_length_over_the_cap_is_refused_before_any_body_byte() -> None:
    with pytest.raises(Unanswered, match="too large"):
        _read(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1))
    _, answer = _read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert answer == (200, b"{}", None)


def test_a_chunk_over_the_cap_is_refused_at_its_size_line() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    with pytest.raises(Unanswered, match="too large"):
        _read(head + b"%x\r\n" % (150 * 2**20))


def test_a_body_without_length_is_refused_as_it_passes_the_cap() -> None:
    reader, _ = _read(b"HTTP/1.1 200 OK\r\n\r\n", b"x" * MAX_BODY)
    with pytest.raises(Unanswered, match="too large"):
        reader.feed(b"x")
    with pytest.raises(Unanswered):  # and the end of the connection cannot make it whole
        reader.end(None)


def test_a_chunked_body_in_small_reads_is_decoded_as_it_arrives() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    framed = b"".join(b"10\r\n%s\r\n" % body[at : at + 16] for at in range(0, len(body), 16))
    reader = ResponseReader()
    reader.start()
    assert reader.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") is None
    for at in range(0, len(framed), 4096):
        assert reader.feed(framed[at : at + 4096]) is None
        assert len(reader.buffer) < 64  # what was read is gone: nothing is read twice
    assert reader.feed(b"0\r\n\r\n") == (200, body, None)


def test_bytes_nobody_asked_for_are_dropped_and_spoil_the_connection() -> None:
    reader, answer = _read(KEEP_ALIVE)
    assert answer is not None and reader.keep and reader.quiet
    assert reader.feed(b"J" * 100_000) is None
    assert not reader.buffer and not reader.keep and not reader.quiet


@pytest.mark.parametrize(
    ("name", "value"),
    [("X-Amz-Date", "20260101T000000Z\r\nX-Evil: 1"), ("Auth\n", "x"), ("X", "us-east-1\n")],
)
def test_a_header_with_a_line_break_is_never_made_into_a_line(name: str, value: str) -> None:
    with pytest.raises(ValueError, match="line break"):
        header_line(name, value)
