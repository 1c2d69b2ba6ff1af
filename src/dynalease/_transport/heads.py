"""An answer's head read without the ``email`` package's parser.

``http.client`` hands every answer's header lines to ``email``'s feed parser, built for
mail: a generator per message, a policy object per field, and checks for multipart
bodies. For the two answers of a lock cycle that was about a tenth of the cycle's CPU
(docs/benchmarks.md, "Reading answer heads"). :class:`Response` reads a plain head (every
line ``name: value``) into the same ``HTTPMessage`` itself and gives any other head
(folded lines, a line that is not a field, stray line breaks) to ``http.client``'s
parser unchanged. The status line, the head's lines and the body (chunked or not) are
still read by ``http.client``; the rules by which a head says how its body ends are
``HTTPResponse.begin``'s, restated in :meth:`Response.begin`, and
``tests/unit/transport/test_answer_heads.py`` checks everything a reader sees against
``http.client``'s own on every answer it generates.
"""

from __future__ import annotations

import http.client
import io
import re

__all__ = ["Response", "read_head"]

#: A field's name as the ``email`` parser takes it: visible ASCII up to the colon.
_FIELD = re.compile(r"([\x21-\x39\x3b-\x7e]+):[ \t]*(.*)")
#: Statuses whose answers have no body, whatever their head says (as 1xx and HEAD's).
_NO_BODY = (http.client.NO_CONTENT, http.client.NOT_MODIFIED)


def read_head(lines: list[bytes]) -> http.client.HTTPMessage:
    """The fields of a head's ``lines`` (as ``http.client`` reads them, the blank line
    last), as ``http.client.parse_headers`` gives them."""
    # str.splitlines breaks a line wherever the mail parser does (CR, LF), and at a few
    # more characters: a plain head gives one row per line read, the blank line last.
    rows = b"".join(lines).decode("iso-8859-1").splitlines()
    fields = [match.groups() for match in map(_FIELD.fullmatch, rows[:-1]) if match]
    if len(rows) != len(lines) or rows[-1:] != [""] or len(fields) != len(rows) - 1:
        # Anything the mail parser reads its own way: http.client's parser.
        return http.client.parse_headers(io.BytesIO(b"".join(lines)))
    message = http.client.HTTPMessage()
    for name, value in fields:
        message.set_raw(name, value)  # as the mail parser stores a field it has read
    return message


class Response(http.client.HTTPResponse):
    """``http.client``'s answer with its head read by :func:`read_head`, and its fields
    also by lower-case name (:attr:`fields`, :meth:`field`): a lookup in ``msg`` runs the
    ``email`` package's code for every field it passes."""

    #: Every field's values in the order they came, by lower-case name.
    fields: dict[str, list[str]]

    def field(self, name: str) -> str | None:
        """The field ``name`` (lower case) as ``getheader`` gives it: its values joined."""
        values = self.fields.get(name)
        return ", ".join(values) if values else None

    def begin(self) -> None:
        """Read the status line and the head, and how the body ends, as
        ``HTTPResponse.begin`` does."""
        if self.headers is not None:  # a second call: the head is read already
            return
        version, status, reason = self._read_status()
        while status == http.client.CONTINUE:  # an interim answer: the real one follows
            http.client._read_headers(self.fp)
            version, status, reason = self._read_status()
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = read_head(http.client._read_headers(self.fp))
        self.fields = {}
        for name, value in self.headers.raw_items():
            self.fields.setdefault(name.lower(), []).append(value)
        # As HTTPResponse.begin reads them: the first value of each.
        coding = _first(self.fields, "transfer-encoding")
        self.chunked = bool(coding) and coding.lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._check_close()
        self.length = _length(_first(self.fields, "content-length"), self.chunked)
        if status in _NO_BODY or status < 200 or self._method == "HEAD":
            self.length = 0
        if self.length is None and not self.chunked:
            self.will_close = True  # the body ends when the connection does


def _first(fields: dict[str, list[str]], name: str) -> str | None:
    values = fields.get(name)
    return values[0] if values else None


def _length(value: str | None, chunked: bool) -> int | None:
    """The body's length by ``Content-Length``: none when chunked, absent, not a number
    or negative."""
    if not value or chunked:
        return None
    try:
        length = int(value)
    except ValueError:
        return None
    return length if length >= 0 else None
