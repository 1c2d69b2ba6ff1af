"""Lock requests' JSON bodies and DynamoDB's JSON answers, as botocore would read them.

The lean path's only serialising and parsing: bodies are encoded once with a
compact encoder, and answers become the dicts botocore would hand over (binary
attributes decoded, errors raised through :mod:`.errors`).
"""

from __future__ import annotations

import base64
import binascii
import json
import json.scanner
import zlib
from typing import Any

from .errors import map_error_code, map_transport_error

__all__ = ["ENCODER", "BodyTemplate", "read_answer"]


def _encode_blob(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a value of type {type(value).__name__} cannot be sent to DynamoDB")


#: Made once: ``json.dumps`` with options builds a new encoder on every call.
ENCODER = json.JSONEncoder(separators=(",", ":"), default=_encode_blob)
#: How :data:`ENCODER` writes a string: ASCII, quoted, escaped.
_STRING = json.encoder.encode_basestring_ascii


class BodyTemplate:
    """A request body encoded once with markers for the strings that vary, filled per request.

    Made from parameters that hold each of ``markers`` once as a string value;
    :meth:`fill` writes the values where the markers were, escaped exactly as
    :data:`ENCODER` escapes a string. So ``fill(*values)`` is byte for byte
    ``ENCODER.encode`` of the same parameters with the values in place
    (``tests/unit/transport/test_signing.py`` checks it), at a tenth of the CPU: a
    lock request's body is one shape with two or three strings that change.
    """

    __slots__ = ("_text",)

    def __init__(self, params: dict[str, Any], markers: tuple[str, ...]) -> None:
        text = ENCODER.encode(params).replace("%", "%%")
        quoted = [_STRING(marker) for marker in markers]
        places = [text.find(each) for each in quoted]
        if any(text.count(each) != 1 for each in quoted) or places != sorted(places):
            raise ValueError("each marker must stand once in the parameters, in their order")
        for each in quoted:
            text = text.replace(each, "%s")
        self._text = text

    def fill(self, *values: str) -> bytes:
        """The body with ``values`` in the places of the markers, in the same order."""
        return (self._text % tuple(map(_STRING, values))).encode("ascii")


#: botocore reads answers as UTF-8 text (``json.loads`` on bytes would guess an encoding first).
_DECODER = json.JSONDecoder()
#: The decoder's own scanner (what ``raw_decode`` calls): one JSON value at an index.
_SCAN = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]  # typeshed: any decoder
#: The answer members that may hold items, whose binary attributes are decoded.
_WITH_ITEMS = frozenset({"Item", "Attributes", "Responses", "CancellationReasons"})


def read_answer(
    operation: str, status: int, payload: bytes, crc: int | None, url: str
) -> dict[str, Any]:
    """The parsed answer, or the mapped error; as botocore would parse it."""
    garbled = crc is not None and zlib.crc32(payload) != crc
    if status == 200 and not garbled and payload[:1] == b"{":
        # Nearly every answer: exactly one JSON object, read by the decoder's own
        # scanner (``decode`` would match whitespace around it first, in Python).
        try:
            text = payload.decode("utf-8")
            parsed, end = _SCAN(text, 0)
        except (ValueError, StopIteration):  # UnicodeDecodeError too
            pass
        else:
            if end == len(text) and isinstance(parsed, dict):
                _decode_blobs(parsed)
                parsed["ResponseMetadata"] = {"HTTPStatusCode": 200}
                return parsed
    if 200 <= status < 300 and (status != 200 or not payload):
        # DynamoDB's success is a 200 with a JSON object: another 2xx, or a 200 with
        # no body, says the request arrived but not what became of it.
        garbled = True
    response: dict[str, Any] = {}
    if payload and not garbled:
        try:
            parsed = _DECODER.decode(payload.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError too
            parsed = None
        if isinstance(parsed, dict):
            response = parsed
        else:
            # A success must be a JSON object; an error page (a proxy's HTML) may not be.
            garbled = status == 200
    if garbled:
        # A damaged answer tells nothing about whether the request was applied.
        import botocore.exceptions  # a failure path: the message is botocore's

        error = botocore.exceptions.ConnectionClosedError(endpoint_url=url)
        raise map_transport_error(error, operation)
    _decode_blobs(response)
    if status == 200:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
        return response
    kind = str(response.pop("__type", "") or "")
    code = kind.rsplit("#", 1)[-1] or str(status)
    message = str(response.pop("message", "") or response.pop("Message", "") or "")
    response["Error"] = {"Code": code, "Message": message}
    response["ResponseMetadata"] = {"HTTPStatusCode": status}
    raise map_error_code(code, message, operation, status, response)


def _decode_blobs(response: dict[str, Any]) -> None:
    """Binary attributes arrive base64-encoded; botocore hands them over as bytes."""
    if response.keys().isdisjoint(_WITH_ITEMS):
        return  # most lock answers: only ConsumedCapacity
    for name in ("Item", "Attributes"):
        item = response.get(name)
        if isinstance(item, dict):
            _decode_item(item)
    for rows in (response.get("Responses") or {}).values():  # BatchGetItem
        for item in rows if isinstance(rows, list) else ():
            if isinstance(item, dict):
                _decode_item(item)
    for reason in response.get("CancellationReasons") or ():
        if isinstance(reason, dict) and isinstance(reason.get("Item"), dict):
            _decode_item(reason["Item"])


def _decode_item(item: dict[str, Any]) -> None:
    for value in item.values():
        _decode_value(value)


def _decode_value(value: Any) -> None:
    if not isinstance(value, dict):
        return
    try:
        if "B" in value:
            value["B"] = base64.b64decode(value["B"])
        elif "BS" in value:
            value["BS"] = [base64.b64decode(member) for member in value["BS"]]
        elif "M" in value:
            _decode_item(value["M"])
        elif "L" in value:
            for member in value["L"]:
                _decode_value(member)
    except (binascii.Error, TypeError, AttributeError):
        pass  # leave what cannot be decoded as it came
