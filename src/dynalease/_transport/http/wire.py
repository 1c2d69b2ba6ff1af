"""HTTP/1.1 for lock requests without I/O: framing a request, reading its answer.

Both drivers (asyncio on the runtime loop, blocking in a caller's thread) send
what :func:`frame_request` made and hand every received byte to a
:class:`ResponseReader`; nothing here touches a socket, so the rules below are
tested by feeding bytes (``tests/unit/transport/test_wire.py``).

Only what a DynamoDB answer needs is modelled: the status, a body framed by
``Content-Length``, chunked coding or the end of the connection, whether the
connection may carry the next request, and the ``x-amz-crc32`` header. Each
rule has one home, so hardening one is a change in one place: the head size cap
(:data:`MAX_HEAD`), the ``Content-Length`` syntax (:func:`_number`),
interim answers (:meth:`ResponseReader.complete`), the chunked coding
(:func:`_dechunk`) and a body size cap (:meth:`ResponseReader._body`).

h11 (the sans-I/O state machine under httpcore) was measured as this core: about
80 to 100 us per PutItem exchange against about 6 us here, which would have taken
uncontended CPU per lock cycle past 0.8x pydynox's; so the core is our own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .failures import Stale, Unanswered, closed_early, unanswered

__all__ = ["MAX_HEAD", "READ_SIZE", "Answered", "Malformed", "ResponseReader", "frame_request"]

#: A response head longer than this is refused rather than buffered without end.
MAX_HEAD = 64 * 1024
#: How much one receive asks for.
READ_SIZE = 64 * 1024

#: An answer: (status, body, its ``x-amz-crc32`` if sent).
Answered = tuple[int, bytes, int | None]


class Malformed(ValueError):
    """The bytes received are not an HTTP/1.1 answer this core reads."""


def frame_request(headers: Iterable[tuple[str, str]], body: bytes) -> bytes:
    """The bytes of a ``POST /`` carrying ``body``, with ``headers`` then its length.

    Lock requests are always one JSON POST to ``/``; the length goes last so the
    signed headers come first, in the order they were signed.
    """
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    framed = f"POST / HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n"
    return framed.encode("latin-1") + body


class _Head(NamedTuple):
    """What a response head says about its body and its connection."""

    status: int
    length: int | None  # Content-Length, None when absent
    chunked: bool
    keep: bool  # the server lets the connection carry another request
    crc: int | None  # x-amz-crc32


class ResponseReader:
    """The answers on one connection, read from the bytes it receives.

    :meth:`start` when a request went out, then :meth:`feed` what arrives until
    it returns the answer, or :meth:`end` when the connection ends first. Fails
    only with :class:`.Unanswered` (the request may have been applied) or
    :class:`.Stale` (a reused connection that closed before a byte of its
    answer). After an answer, :attr:`keep` says whether the connection may
    carry the next request.
    """

    __slots__ = ("_at", "_body_at", "_head", "_served", "buffer", "keep", "reused")

    def __init__(self) -> None:
        #: Bytes received for the current answer (or unasked, between answers).
        self.buffer = bytearray()
        self.keep = False
        #: The connection carried an answer before this request.
        self.reused = False
        self._served = 0
        self._head: _Head | None = None
        self._at = 0  # where the current head starts (after interim answers)
        self._body_at = 0

    @property
    def quiet(self) -> bool:
        """Nothing arrived that was not asked for: an idle connection may be reused."""
        return not self.buffer

    def start(self) -> None:
        """A request went out on this connection: read its answer from here on."""
        self.buffer.clear()
        self.keep = False
        self.reused = self._served > 0
        self._head = None
        self._at = self._body_at = 0

    def hand_over(self) -> None:
        """The caller stopped waiting: whoever reads on learns how the request ended.

        An early close then means "no answer", never "resend it".
        """
        self.reused = False

    def send_failed(self, error: OSError) -> Exception:
        """What a failed send means: a dropped idle connection, or maybe applied."""
        if self.reused and not isinstance(error, TimeoutError):
            return Stale()
        return unanswered(error)

    def feed(self, data: bytes) -> Answered | None:
        """Take received bytes; the answer once it is complete, else None."""
        self.buffer += data
        return self.complete()

    def complete(self) -> Answered | None:
        """The answer if the bytes received so far hold all of it, else None."""
        try:
            head = self._head
            while head is None:
                end = self.buffer.find(b"\r\n\r\n", self._at)
                if end < 0:
                    if len(self.buffer) - self._at > MAX_HEAD:
                        raise Malformed("response head too large")
                    return None
                head = _parse_head(bytes(self.buffer[self._at : end + 4]))
                if 100 <= head.status < 200:
                    # An interim answer (100 Continue, 103 Early Hints): the real one follows.
                    if head.status == 101:
                        raise Malformed("the server switched protocols")
                    self._at, head = end + 4, None
                    continue
                self._head, self._body_at = head, end + 4
            return self._body(head)
        except Malformed as error:
            raise Unanswered(error, timeout=False) from None

    def _body(self, head: _Head) -> Answered | None:
        buffer = self.buffer
        start = self._body_at
        if head.chunked:
            dechunked = _dechunk(buffer, start)
            if dechunked is None:
                return None
            body, end = dechunked
        elif head.length is not None:
            end = start + head.length
            if len(buffer) < end:
                return None
            body = bytes(buffer[start:end])
        else:
            return None  # the body runs to the end of the connection
        # Bytes after the answer were never asked for: do not reuse such a connection.
        self.keep = head.keep and len(buffer) == end
        self._served += 1
        buffer.clear()
        return head.status, body, head.crc

    def end(self, error: BaseException | None) -> Answered:
        """The answer when the connection ends now (``error`` if it broke).

        Raises :class:`.Stale` or :class:`.Unanswered` when the answer is not whole.
        """
        head = self._head
        if head is None and not self.buffer:
            if self.reused:
                raise Stale()
            raise closed_early()
        if head is not None and head.length is None and not head.chunked:
            # No length and not chunked: the body runs to the end of the connection.
            self.keep = False
            self._served += 1
            return head.status, bytes(self.buffer[self._body_at :]), head.crc
        if not isinstance(error, OSError):
            error = ConnectionResetError("connection closed mid-answer")
        raise Unanswered(error, timeout=False)


def _parse_head(head: bytes) -> _Head:
    """The parts of a response head that matter; ``head`` ends with the blank line.

    Only the four headers that matter are looked up (case-insensitively), not
    every header split and decoded.
    """
    line_end = head.find(b"\r\n")
    first = head[:line_end].decode("latin-1")
    version, _, rest = first.partition(" ")
    if not version.startswith("HTTP/") or len(rest) < 3 or not rest[:3].isdigit():
        raise Malformed(f"not an HTTP response: {first[:80]!r}")
    lower = head.lower()
    encoding = _header(lower, head, b"transfer-encoding")
    chunked = encoding is not None and "chunked" in encoding.lower()
    keep = version == "HTTP/1.1"
    connection = _header(lower, head, b"connection")
    if connection is not None:
        token = connection.lower()
        keep = token == "keep-alive" or (keep and token != "close")
    crc_text = _header(lower, head, b"x-amz-crc32")
    crc = _number(crc_text, "x-amz-crc32")
    length = _number(_header(lower, head, b"content-length"), "Content-Length")
    return _Head(int(rest[:3]), length, chunked, keep, crc)


def _number(text: str | None, name: str) -> int | None:
    """A header's whole-number value, ASCII digits only; None when absent."""
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        # int() would take "+5", "-1" or "5_0": a negative length would read nothing.
        raise Malformed(f"bad {name}: {text[:40]!r}")
    return int(text)


def _header(lower: bytes, head: bytes, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) in ``head``, or None when absent."""
    at = lower.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    return head[start : head.find(b"\r\n", start)].strip().decode("latin-1")


def _dechunk(buffer: bytearray, start: int) -> tuple[bytes, int] | None:
    """(body, end offset) of a complete chunked body starting at ``start``, else None."""
    parts: list[bytes] = []
    position = start
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size_text = bytes(buffer[position:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise Malformed(f"bad chunk size: {size_text[:40]!r}") from None
        position = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n\r\n", position - 2)
            return None if trailer_end < 0 else (b"".join(parts), trailer_end + 4)
        if len(buffer) < position + size + 2:
            return None
        parts.append(bytes(buffer[position : position + size]))
        position += size + 2
