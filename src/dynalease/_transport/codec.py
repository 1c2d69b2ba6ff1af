"""Lock requests' JSON bodies and DynamoDB's JSON answers, as botocore would read them.

The lean path's only serialising and parsing: bodies are encoded with a
compact encoder made once, and answers become the dicts botocore would hand over (binary
attributes decoded, errors raised through :mod:`.errors`).
"""

from __future__ import annotations

import base64
import binascii
import json
import json.scanner
import zlib
from typing import Any

from ..exceptions import DynaleaseError
from .connections import Answer
from .errors import map_error_code, map_transport_error

__all__ = ["ENCODER", "read_answer"]


def _encode_blob(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a value of type {type(value).__name__} cannot be sent to DynamoDB")


#: Made once: ``json.dumps`` with options builds a new encoder on every call.
ENCODER = json.JSONEncoder(separators=(",", ":"), default=_encode_blob)
#: botocore reads answers as UTF-8 text (``json.loads`` on bytes would guess an encoding first).
_DECODER = json.JSONDecoder()
#: The decoder's own scanner (what ``raw_decode`` calls): one JSON value at an index.
_SCAN = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]  # typeshed: any decoder
#: The answer members that may hold items, whose binary attributes are decoded.
_WITH_ITEMS = frozenset({"Item", "Attributes", "Responses", "CancellationReasons"})


def read_answer(operation: str, answer: Answer, url: str) -> dict[str, Any]:
    """The parsed answer, or the mapped error (with its request id); as botocore would parse it."""
    status, payload, crc, request_id = answer
    metadata: dict[str, Any] = {"HTTPStatusCode": status}
    if request_id is not None:
        metadata["RequestId"] = request_id
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
                parsed["ResponseMetadata"] = metadata
                return parsed
    if status < 200 or status > 599 or (200 <= status < 300 and (status != 200 or not payload)):
        # DynamoDB's success is a 200 with a JSON object: another 2xx, a 200 with no
        # body, or a status no answer has (an interim 1xx read as the answer), says
        # the request arrived but not what became of it.
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
        failure = map_transport_error(error, operation)
        if isinstance(failure, DynaleaseError):
            failure.request_id = request_id
        raise failure
    _decode_blobs(response)
    if status == 200:
        response["ResponseMetadata"] = metadata
        return response
    kind = str(response.pop("__type", "") or "")
    code = kind.rsplit("#", 1)[-1] or str(status)
    message = str(response.pop("message", "") or response.pop("Message", "") or "")
    response["Error"] = {"Code": code, "Message": message}
    response["ResponseMetadata"] = metadata
    raise map_error_code(code, message, operation, status, response, request_id=request_id)


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
