"""The lean path writes a request's head into http.client's buffer itself
(``Bounded.post``): the head is what ``http.client``'s own ``request()`` would send, and a
header value with a line break is refused before anything is sent."""

from __future__ import annotations

import pytest

from dynalease._transport.bounded import HTTPConnection

HEADERS = {
    "Host": "127.0.0.1:8000",
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": "DynamoDB_20120810.GetItem",
    "Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/dynamodb/aws4_request",
    "User-Agent": "dynalease-lean/3",
    "Accept-Encoding": "identity",
}


class _Recorded(HTTPConnection):
    """A connection that keeps what it would send instead of opening a socket."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1", 8000)
        self.sent = b""

    def send(self, data: object) -> None:
        assert isinstance(data, bytes)
        self.sent += data


class _ThroughRequest(_Recorded):
    """The same, sending through ``http.client``'s own ``request()``."""

    def post(self, path: str, headers: dict[str, str], body: bytes) -> None:
        self.request("POST", path, body, headers)


def _head(sent: bytes) -> tuple[bytes, set[bytes]]:
    head, _, body = sent.partition(b"\r\n\r\n")
    request_line, *lines = head.split(b"\r\n")
    return request_line + b"|" + body, set(lines)


def test_the_head_is_the_one_http_client_request_sends() -> None:
    ours, theirs = _Recorded(), _ThroughRequest()
    for connection in (ours, theirs):
        connection.post("/", HEADERS, b'{"TableName":"locks"}')
    assert _head(ours.sent) == _head(theirs.sent)
    assert b"Content-Length: 21" in _head(ours.sent)[1]


@pytest.mark.parametrize("value", ["AKID\r\nX-Evil: 1", "tok\nX-Evil: 1", "tok\r"])
def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent(
    value: str,
) -> None:
    connection = _Recorded()
    with pytest.raises(ValueError, match="line break"):
        connection.post("/", {**HEADERS, "X-Amz-Security-Token": value}, b"{}")
    assert connection.sent == b""
    assert connection.sock is None  # nothing was opened either
