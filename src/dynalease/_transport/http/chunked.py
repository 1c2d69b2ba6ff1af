"""The chunked transfer coding of an answer's body, decoded as its bytes arrive.

:class:`.wire.ResponseReader` hands each piece of the body to
:meth:`ChunkedBody.decode`; nothing here touches a socket. Every byte is looked
at once, and what is read leaves the caller's buffer, so a body sent in many
small reads costs time in proportion to its size, not its square. The caps are
the reader's: a chunk that would take the body past ``max_body`` is refused at
its size line, before any of its bytes are read; a size line or the trailers
longer than ``max_line`` are refused, and trailers that ``trailers`` (the
head's field grammar, the reader's) does not match.
"""

from __future__ import annotations

import re

from .failures import Malformed

__all__ = ["ChunkedBody"]

#: A chunk-size line: hex digits, any extensions, CRLF.
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\r\n]*+)?+[ \t]*+\r\n")

# Where the decoding stands.
_SIZE, _DATA, _DATA_END, _TRAILER = range(4)


class ChunkedBody:
    """One answer's chunked body: the bytes decoded so far and where the decoding stands."""

    __slots__ = ("_decoded", "_left", "_max_body", "_max_line", "_phase", "_taken", "_trailers")

    def __init__(self, max_body: int, max_line: int, trailers: re.Pattern[bytes]) -> None:
        self._max_body = max_body
        self._max_line = max_line
        self._trailers = trailers
        self._decoded = bytearray()
        self._phase = _SIZE
        self._left = 0  # bytes of the current chunk still to come (in _TRAILER: searched)
        self._taken = 0  # bytes of the body read and dropped from the buffer

    def body(self) -> bytes:
        """The decoded body, once :meth:`decode` found its end."""
        return bytes(self._decoded)

    def decode(self, buffer: bytearray, at: int) -> int:
        """Decode what arrived in ``buffer`` from ``at``: the body's end once whole, else -1.

        When the body is not whole yet, the bytes read are deleted from
        ``buffer``, so the next call starts at 0. Raises :class:`.Malformed`.
        """
        decoded, phase, left = self._decoded, self._phase, self._left
        start, size = at, len(buffer)
        while True:
            if phase == _SIZE:
                line_end = buffer.find(b"\r\n", at)
                if line_end < 0:
                    if size - at > self._max_line:
                        raise Malformed("chunk-size line too long")
                    break
                match = _CHUNK_SIZE.fullmatch(buffer, at, line_end + 2)
                if match is None:
                    raise Malformed(f"bad chunk size: {bytes(buffer[at:line_end])[:40]!r}")
                left = int(match[1], 16)
                at = line_end + 2
                # Refused at once, framing included: nothing of a chunk too large is read.
                if self._taken + at - start + left > self._max_body:
                    raise Malformed("answer body too large")
                phase = _DATA if left else _TRAILER
            elif phase == _DATA:
                take = min(left, size - at)
                if take <= 0:
                    break
                decoded += buffer[at : at + take]
                at += take
                left -= take
                if not left:
                    phase = _DATA_END
            elif phase == _DATA_END:
                tail = buffer[at : at + 2]
                if tail != b"\r\n"[: len(tail)]:
                    raise Malformed("a chunk is not followed by CRLF")
                if len(tail) < 2:
                    break
                at += 2
                phase = _SIZE
            else:  # the trailers, up to the blank line
                if buffer.startswith(b"\r\n", at):
                    return at + 2
                # ``left`` is how far past ``at`` the search for the blank line got.
                end = buffer.find(b"\r\n\r\n", at + left)
                if end < 0:
                    if size - at > self._max_line:
                        raise Malformed("trailers too large")
                    left = max(0, size - at - 3)
                    break
                if self._trailers.fullmatch(buffer, at, end + 4) is None:
                    raise Malformed("malformed trailers")
                return end + 4
        # Not whole yet: keep only the bytes not read.
        self._phase, self._left = phase, left
        self._taken += at - start
        del buffer[:at]
        return -1
