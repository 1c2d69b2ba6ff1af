"""HTTP/1.1 for lock requests without I/O: framing a request, reading its answer.

Both drivers (asyncio on the runtime loop, blocking in a caller's thread) send
what :func:`frame_request` made and hand every received byte to a
:class:`ResponseReader`; nothing here touches a socket, so the rules below are
tested by feeding bytes (``tests/unit/transport/test_wire.py``, and against h11
as an oracle in ``test_wire_fuzz.py``).

Only what a DynamoDB answer needs is modelled: the status, a body framed by
``Content-Length``, chunked coding or the end of the connection, whether the
connection may carry the next request, and the ``x-amz-crc32`` header. Each
rule has one home, so hardening one is a change in one place: the head's
grammar (:data:`_HEAD`) and size cap (:data:`MAX_HEAD`), the ``Content-Length``
syntax (:func:`_number`), interim answers (:meth:`ResponseReader.complete`),
the chunked coding (:mod:`.chunked`), the body size cap
(:data:`MAX_BODY`) and bytes nobody asked for (:meth:`ResponseReader.feed`).
Whatever breaks a rule is :class:`.failures.Malformed`, raised as :class:`.Unanswered`:
the request may have been applied, so a write is reconciled, never assumed.

h11 (the sans-I/O state machine under httpcore) was measured as this core: about
80 to 100 us per PutItem exchange against about 6 us here, which would have taken
uncontended CPU per lock cycle past 0.8x pydynox's; so the core is our own.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .chunked import ChunkedBody
from .failures import Malformed, Stale, Unanswered, closed_early, unanswered

__all__ = ["MAX_BODY", "MAX_HEAD", "READ_SIZE", "Answered", "Malformed", "ResponseReader"]
__all__ += ["frame_request", "header_line"]

#: A response head longer than this is refused rather than buffered without end
#: (interim answers before it count too; so does a chunk-size line or the trailers).
MAX_HEAD = 64 * 1024
#: The largest body read, chunk framing included. A lock request's answer holds at
#: most one item (GetItem, or ALL_OLD on a failed condition), and an item is at
#: most 400 KB: about 0.55 MB as JSON with base64 blobs. 4 MiB is seven times that,
#: and a few of them in flight still fit a 128 MB Lambda. A larger
#: ``Content-Length`` is refused at once; a chunked or close-delimited body the
#: moment it passes the cap.
MAX_BODY = 4 * 1024 * 1024
#: How much one receive asks for.
READ_SIZE = 64 * 1024

#: An answer: (status, body, its ``x-amz-crc32`` if sent).
Answered = tuple[int, bytes, int | None]

# The head's grammar, as RFC 9112 and h11 (the tests' oracle) read it: a status
# line, then ``name: value`` lines, CRLF line ends only, no folded lines. A value
# is any bytes but NUL, CR, LF, VT and FF: h11's ``OWS field-content OWS``.
# Possessive quantifiers: a hostile head can never make the match backtrack. The
# value class is written as two ranges, the printable one first: most bytes match
# at the first test (a third less work per head than the negated class).
_TEXT = rb"[\x0e-\xff\x01-\x09]*+"
_FIELD = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]++:" + _TEXT + rb"\r\n"
_HEAD = re.compile(rb"HTTP/1\.[01] [0-9]{3}(?: " + _TEXT + rb")?+\r\n(?:" + _FIELD + rb")*+\r\n")
#: The trailers after a chunked body's last chunk: fields, then the blank line.
_TRAILERS = re.compile(rb"(?:" + _FIELD + rb")*+\r\n")


def header_line(name: str, value: str) -> str:
    """One request header's line: ``name: value`` and its CRLF.

    A name or value holding a line break (a Region or a token read from a
    damaged setting) is refused: it would end the head early and smuggle in
    headers of its own. Request heads are made only of such lines and of
    values the lean path writes itself (dates, digests, lengths).
    """
    line = f"{name}: {value}\r\n"
    if line.count("\n") != 1 or line.count("\r") != 1:
        raise ValueError("a request header holds a line break")
    return line


def frame_request(fields: str, body: bytes) -> bytes:
    """The bytes of a ``POST /`` carrying ``body``: the header lines ``fields``, then its length.

    Lock requests are always one JSON POST to ``/``; the length goes last so the
    signed headers come first, in the order they were signed. ``fields`` are
    lines made by :func:`header_line`.
    """
    head = f"POST / HTTP/1.1\r\n{fields}Content-Length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


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
    carry the next request. Memory stays bounded whatever arrives: a head of
    :data:`MAX_HEAD`, a body of :data:`MAX_BODY`, and nothing unasked.
    """

    __slots__ = (
        "_at",
        "_body_at",
        "_chunked",
        "_failure",
        "_head",
        "_scan",
        "_served",
        "awaiting",
        "buffer",
        "keep",
        "reused",
        "spoiled",
    )

    def __init__(self) -> None:
        #: Bytes received for the current answer (its unread part, once chunked).
        self.buffer = bytearray()
        self.keep = False
        #: The connection carried an answer before this request.
        self.reused = False
        #: A request is out and its answer not yet whole: received bytes are its.
        self.awaiting = False
        #: Bytes arrived that nobody asked for: the connection must not be reused.
        self.spoiled = False
        self._served = 0
        self._failure: Unanswered | None = None
        self._head: _Head | None = None
        self._at = 0  # where the current head starts (after interim answers)
        self._scan = 0  # where the search for the head's end goes on from
        self._body_at = 0
        self._chunked: ChunkedBody | None = None  # a chunked body being decoded

    @property
    def quiet(self) -> bool:
        """Nothing arrived that was not asked for: an idle connection may be reused."""
        return not self.spoiled and not self.buffer

    def start(self) -> None:
        """A request went out on this connection: read its answer from here on."""
        self.buffer.clear()
        self.keep = False
        self.awaiting = True
        self.reused = self._served > 0
        self._head = self._failure = None
        self._at = self._scan = self._body_at = 0

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
        """Take received bytes; the answer once it is complete, else None.

        Bytes that arrive while no answer is awaited (on an idle connection, or
        after the answer) were never asked for: they are dropped, not kept, and
        the connection is :attr:`spoiled`.
        """
        if not self.awaiting:
            self.spoiled = True
            self.keep = False
            return None
        if not self.buffer and self._head is None and self._failure is None:
            # The first bytes of an answer, which most often hold all of it: read
            # from ``data`` itself, with no copy into the buffer and back.
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                try:
                    head = _parse_head(data, 0, end + 4)
                except Malformed as error:
                    raise self._fail(Unanswered(error, timeout=False)) from None
                if head.status >= 200:
                    self._begin_body(head, end + 4)
                    if head.length is not None and len(data) == end + 4 + head.length:
                        self.keep = head.keep
                        self.awaiting = False
                        self._served += 1
                        return head.status, data[end + 4 :], head.crc
        self.buffer += data
        return self.complete()

    def complete(self) -> Answered | None:
        """The answer if the bytes received so far hold all of it, else None."""
        if self._failure is not None:
            raise self._failure
        try:
            head = self._head
            while head is None:
                buffer = self.buffer
                end = buffer.find(b"\r\n\r\n", self._scan)
                if end < 0:
                    # Interim answers count: a stream of them is refused at the cap too.
                    if len(buffer) > MAX_HEAD:
                        raise Malformed("response head too large")
                    self._scan = max(self._at, len(buffer) - 3)
                    return None
                head = _parse_head(buffer, self._at, end + 4)
                if head.status < 200:
                    # An interim answer (100 Continue, 103 Early Hints): the real one follows.
                    if head.status == 101:
                        raise Malformed("the server switched protocols")
                    self._at = self._scan = end + 4
                    head = None
                    continue
                self._begin_body(head, end + 4)
            return self._body(head)
        except Malformed as error:
            raise self._fail(Unanswered(error, timeout=False)) from None

    def _begin_body(self, head: _Head, at: int) -> None:
        """The head of the real answer ended at ``at``: its body comes next."""
        self._head, self._body_at = head, at
        self._chunked = ChunkedBody(MAX_BODY, MAX_HEAD, _TRAILERS) if head.chunked else None

    def _body(self, head: _Head) -> Answered | None:
        buffer = self.buffer
        start = self._body_at
        chunked = self._chunked
        if chunked is not None:
            end = chunked.decode(buffer, start)
            if end < 0:
                self._body_at = 0  # what was read left the buffer
                return None
            body, self._chunked = chunked.body(), None
        elif head.length is not None:
            end = start + head.length
            if len(buffer) < end:
                return None
            body = bytes(buffer[start:end])
        else:
            if len(buffer) - start > MAX_BODY:
                raise Malformed("answer body too large")
            return None  # the body runs to the end of the connection
        # Bytes after the answer were never asked for: do not reuse such a connection.
        self.keep = head.keep and len(buffer) == end
        self.awaiting = False
        self._served += 1
        buffer.clear()
        return head.status, body, head.crc

    def end(self, error: BaseException | None) -> Answered:
        """The answer when the connection ends now (``error`` if it broke).

        Raises :class:`.Stale` or :class:`.Unanswered` when the answer is not whole.
        """
        if self._failure is not None:
            raise self._failure
        if not self.awaiting:
            raise self._fail(closed_early())
        head = self._head
        if head is None and not self.buffer:
            self.awaiting = False
            if self.reused:
                raise Stale()
            raise self._fail(closed_early())
        if head is not None and head.length is None and not head.chunked:
            # No length and not chunked: the body runs to the end of the connection.
            self.keep = self.awaiting = False
            self._served += 1
            return head.status, bytes(self.buffer[self._body_at :]), head.crc
        if not isinstance(error, OSError):
            error = ConnectionResetError("connection closed mid-answer")
        raise self._fail(Unanswered(error, timeout=False))

    def _fail(self, failure: Unanswered) -> Unanswered:
        """Remember ``failure``: whatever comes after it cannot make an answer whole."""
        self._failure = failure
        self.awaiting = self.keep = False
        return failure


def _parse_head(buffer: bytes | bytearray, start: int, end: int) -> _Head:
    """What the head in ``buffer[start:end]`` says; it ends with the blank line.

    The whole head is checked against its grammar first; then one search of the
    lower-cased head finds the headers that matter, not every header split and
    decoded. Every answer passes here, and it runs with the caches cold (the
    server ran meanwhile), where each distinct operation costs: the common
    case (one length, digits only, no coding, ``close`` or nothing) takes the
    fewest, the rest goes through :func:`_repeated`, :func:`_number` and
    :func:`_keeps`.
    """
    head = buffer[start:end]
    if type(head) is not bytes:
        head = bytes(head)
    if _HEAD.fullmatch(head) is None:
        line = head[: head.find(b"\r\n")]
        raise Malformed(f"not an HTTP/1.1 answer head: {line[:80]!r}")
    status = int(head[9:12])
    if status < 100:
        raise Malformed(f"bad status {status}")
    found = _WANTED.findall(head.lower())
    fields = dict(found)
    if len(fields) < len(found):
        fields = _repeated(found)
    length = None
    text = fields.get(b"content-length")
    if text is not None:
        length = int(text) if text.isdigit() and len(text) <= 20 else _number(text)
    chunked = False
    encoding = fields.get(b"transfer-encoding")
    if encoding is not None:
        if encoding.rstrip(b" \t") != b"chunked":
            raise Malformed(f"unsupported Transfer-Encoding: {encoding[:40]!r}")
        if length is not None:
            # RFC 9112 6.3: both at once may be an attempt to smuggle an answer in.
            raise Malformed("both Content-Length and Transfer-Encoding")
        chunked = True
    if length is not None and length > MAX_BODY:
        raise Malformed(f"answer body too large (Content-Length {length})")
    if status == 204 or status == 304:
        length, chunked = 0, False  # never a body, whatever the headers say
    keep = head[5:8] == b"1.1"
    connection = fields.get(b"connection")
    if connection == b"close":
        keep = False
    elif connection is not None:
        keep = _keeps(connection, keep)
    crc = None
    text = fields.get(b"x-amz-crc32")
    if text is not None:
        crc = int(text) if text.isdigit() and len(text) <= 20 else _number(text, "x-amz-crc32")
    return _Head(status, length, chunked, keep, crc)


#: The headers an answer is read by, with their values, in a lower-cased head whose
#: grammar was checked (so a value runs to its line's CR).
_WANTED = re.compile(
    rb"\r\n(content-length|transfer-encoding|connection|x-amz-crc32):[ \t]*+([^\r]*+)"
)


def _repeated(found: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The headers of :data:`_WANTED` when one came more than once.

    Two lengths or codings are refused: they would leave the body's end to
    whichever reader one trusts. ``Connection`` headers are one list; the
    first ``x-amz-crc32`` counts.
    """
    fields: dict[bytes, bytes] = {}
    for name, value in found:
        if name not in fields:
            fields[name] = value
        elif name == b"connection":
            fields[name] += b"," + value
        elif name != b"x-amz-crc32":
            raise Malformed(f"{name.decode()} sent twice")
    return fields


def _number(text: bytes, name: str = "Content-Length") -> int:
    """A header's whole-number value, ASCII digits only (spaces and tabs around it dropped)."""
    text = text.strip(b" \t")
    # int() would take "+5", "-1" or "5_0" (a negative length would read nothing),
    # and raise its own error past 4,300 digits.
    if not text.isdigit() or len(text) > 20:
        raise Malformed(f"bad {name}: {text[:40].decode('latin-1')!r}")
    return int(text)


def _keeps(connection: bytes, keep: bool) -> bool:
    """Whether the ``Connection`` header's tokens let the connection carry on.

    ``keep`` is the version's default: HTTP/1.1 keeps, HTTP/1.0 closes.
    """
    tokens = {token.strip(b" \t") for token in connection.split(b",")}
    return b"close" not in tokens and (keep or b"keep-alive" in tokens)
