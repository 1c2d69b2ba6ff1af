"""The lean path reads answer heads itself (``_transport/heads.py``): every head must come
out as ``http.client``'s own ``HTTPResponse`` reads it (status, fields, and how the body
ends), and the body must read the same, whatever a server or a proxy sends."""

from __future__ import annotations

import http.client
import io
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dynalease._transport import heads
from dynalease._transport.heads import Response

#: An answer as moto sends it (a DynamoDB answer has the same fields, fewer extras).
MOTO_ANSWER = (
    b"HTTP/1.1 200 OK\r\n"
    b"Server: Werkzeug/3.1.3 Python/3.11.7\r\n"
    b"Date: Mon, 07 Dec 2026 23:00:00 GMT\r\n"
    b"Content-Type: application/x-amz-json-1.0\r\n"
    b"x-amzn-RequestId: 0S8VU9ZD4BV3OFHPGAFGD6XDK7XY3KQNC8WB5W1RZBVHT3L7TYQX\r\n"
    b"x-amz-crc32: 2745614147\r\n"
    b"Content-Length: 2\r\n"
    b"Connection: close\r\n"
    b"\r\n"
    b"{}"
)


class _Trickle(io.RawIOBase):
    """A connection's bytes, at most ``each`` at a time (a head split over packets)."""

    def __init__(self, data: bytes, each: int) -> None:
        self.data, self.each = data, each

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        part, self.data = self.data[: self.each], self.data[self.each :]
        buffer[: len(part)] = part
        return len(part)


class _Socket:
    """What HTTPResponse needs of a socket: a file to read the answer from."""

    def __init__(self, data: bytes, each: int = 1 << 20) -> None:
        self.data, self.each = data, each

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_Trickle(self.data, self.each))


def _read(
    kind: type[http.client.HTTPResponse], data: bytes, method: str, each: int
) -> dict[str, Any]:
    """Everything a reader of the answer sees, or the error it gets first."""
    response = kind(_Socket(data, each), method=method)  # type: ignore[arg-type]
    try:
        response.begin()
    except Exception as error:
        return {"error": type(error)}
    seen: dict[str, Any] = {
        "status": response.status,
        "reason": response.reason,
        "version": response.version,
        "fields": response.headers.items(),
        "lengths": response.msg.get_all("content-length"),
        "chunked": response.chunked,
        "length": response.length,
        "will_close": response.will_close,
    }
    # Each field by name: ours as Response keeps them, http.client's by get_all and getheader.
    names = {name.lower() for name, _ in response.headers.items()} | {"x-absent"}
    if isinstance(response, Response):
        seen["by_name"] = {
            name: (response.fields.get(name), response.field(name)) for name in names
        }
    else:
        seen["by_name"] = {
            name: (response.msg.get_all(name), response.getheader(name)) for name in names
        }
    try:
        seen["body"] = response.read()
    except Exception as error:
        seen["body"] = type(error)
    return seen


def _same(data: bytes, method: str = "POST", each: int = 1 << 20) -> dict[str, Any]:
    ours = _read(Response, data, method, each)
    assert ours == _read(http.client.HTTPResponse, data, method, each)
    return ours


def test_a_plain_head_is_read_without_the_mail_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a plain head went to http.client's parser")

    monkeypatch.setattr(http.client, "parse_headers", refuse)
    seen = _read(Response, MOTO_ANSWER, "POST", 1 << 20)
    assert seen["fields"][3] == (
        "x-amzn-RequestId",
        "0S8VU9ZD4BV3OFHPGAFGD6XDK7XY3KQNC8WB5W1RZBVHT3L7TYQX",
    )
    assert (seen["length"], seen["will_close"], seen["body"]) == (2, True, b"{}")


def test_a_moto_answer_reads_as_http_client_reads_it() -> None:
    assert _same(MOTO_ANSWER)["status"] == 200


@pytest.mark.parametrize(
    "head",
    [
        b"X-Folded: one\r\n two\r\n",  # an obsolete folded line
        b"Broken line without a colon\r\nContent-Length: 2\r\n",
        b": no name\r\n",
        b"X-Odd: a\rb\r\n",  # a lone CR: the mail parser ends the line there
        b"X-Odd: a\x85b\r\n",  # NEL, a line break to str.splitlines only
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
    ],
)
def test_heads_the_mail_parser_reads_its_own_way_read_the_same(head: bytes) -> None:
    _same(b"HTTP/1.1 200 OK\r\n" + head + b"\r\n{}")


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Length: 9\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\nConnection: keep-alive\r\n\r\n{}",
        b"HTTP/1.0 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nConnection: TE, Close\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 200 OK\r\nProxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nX-A: b\rContent-Length: 2\r\n",  # the head ends at EOF
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b",
        b"HTTP/1.1 200 OK\r\n\r\nA: b\r\n\r\n",  # no fields; the body looks like a head
        b"HTTP/1.1 200 OK\r\n\nA: b\n\n",
    ],
)
def test_how_a_body_ends_is_read_the_same(answer: bytes) -> None:
    _same(answer)
    _same(answer, "HEAD")
    _same(answer, each=3)  # the head over several reads


def test_a_head_of_too_many_lines_gets_http_client_s_error() -> None:
    for count in (98, 99, 100, 101):
        _same(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * count + b"Content-Length: 2\r\n\r\n{}")


_NAMES = st.sampled_from(
    [
        "Content-Length",
        "content-length",
        "Transfer-Encoding",
        "Connection",
        "Keep-Alive",
        "Proxy-Connection",
        "x-amz-crc32",
        "X-Amzn-RequestId",
        "Server",
        "From",
        "X",
    ]
) | st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), min_size=0, max_size=6)
_VALUES = st.sampled_from(
    [
        "2",
        " 2 ",
        "-1",
        "0",
        "x",
        "1_0",
        "chunked",
        "CHUNKED",
        "gzip",
        "close",
        "Close",
        "keep-alive",
    ]
) | st.text(st.characters(min_codepoint=0, max_codepoint=0xFF), max_size=8)
_LINE = st.builds(
    lambda name, sep, value, end: (name + sep + value).encode("iso-8859-1") + end,
    _NAMES,
    st.sampled_from([": ", ":", ":\t ", " : ", ""]),
    _VALUES,
    st.sampled_from([b"\r\n", b"\n"]),
) | st.sampled_from([b" folded\r\n", b"\tfolded\r\n", b"X-A: b\rc\r\n", b"no colon\r\n"])


@settings(max_examples=400, deadline=None)
@given(
    status=st.sampled_from(
        [
            b"HTTP/1.1 200 OK",
            b"HTTP/1.1 204 No Content",
            b"HTTP/1.1 304 Not Modified",
            b"HTTP/1.1 101 Switching",
            b"HTTP/1.1 400",
            b"HTTP/1.0 200 OK",
            b"HTTP/0.9 200 OK",
            b"HTTP/2 200 OK",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
            b"HTTP/1.1 2000 Big",
            b"ICY 200 OK",
        ]
    ),
    lines=st.lists(_LINE, max_size=8),
    end=st.sampled_from([b"\r\n", b"\n", b""]),
    body=st.sampled_from([b"", b"{}", b"2\r\n{}\r\n0\r\n\r\n", b"zz\r\n"]),
    method=st.sampled_from(["POST", "HEAD"]),
    each=st.sampled_from([1, 5, 40, 1 << 20]),
)
@example(
    status=b"HTTP/1.1 200 OK",
    lines=[b"Content-Length: 2\r\n"],
    end=b"\r\n",
    body=b"{}",
    method="POST",
    each=1,
)
def test_any_answer_reads_as_http_client_reads_it(
    status: bytes, lines: list[bytes], end: bytes, body: bytes, method: str, each: int
) -> None:
    _same(status + b"\r\n" + b"".join(lines) + end + body, method, each)


def test_a_head_without_fields_is_empty() -> None:
    assert heads.read_head([b"\r\n"]).items() == []
    assert heads.read_head([b""]).items() == []
