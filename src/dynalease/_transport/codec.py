"""Lock requests' JSON bodies, and DynamoDB's JSON answers as the dicts botocore would hand
over (binary attributes decoded, errors raised through :mod:`.errors`).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from .._redact import escaped
from .connections import Answer
from .errors import map_error_code, unreadable_answer

__all__ = ["ENCODER", "read_answer"]


def _encode_blob(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a value of type {type(value).__name__} cannot be sent to DynamoDB")


#: Made once: ``json.dumps`` with options builds a new encoder on every call.
ENCODER = json.JSONEncoder(separators=(",", ":"), default=_encode_blob)
_WITH_ITEMS = frozenset({"Item", "Attributes", "Responses", "CancellationReasons"})


def read_answer(operation: str, answer: Answer, url: str) -> dict[str, Any]:
    """The parsed answer, or the mapped error.

    Success is a 200 with a JSON object. Any other success status, a 200 without one, a
    1xx read as the answer or a checksum mismatch: the request arrived, its fate unknown.
    """
    status, payload, crc, request_id = answer
    metadata: dict[str, Any] = {"HTTPStatusCode": status}
    if request_id is not None:
        metadata["RequestId"] = request_id
    intact = crc is None or zlib.crc32(payload) == crc
    response = _json_object(payload) if intact else None
    if response is None and intact and 300 <= status <= 599:
        response = {}  # an error page that is not JSON (a proxy's HTML): the status speaks
    if response is None or not (status == 200 or 300 <= status <= 599):
        failure = unreadable_answer(url, operation)
        failure.request_id = request_id
        raise failure
    _decode_blobs(response)
    response["ResponseMetadata"] = metadata
    if status == 200:
        return response
    kind = str(response.pop("__type", "") or "")
    code = kind.rsplit("#", 1)[-1] or str(status)
    # The server's text goes into messages, logs and traces: no line of its own, no escapes.
    message = escaped(str(response.pop("message", "") or response.pop("Message", "") or ""))
    response["Error"] = {"Code": code, "Message": message}
    raise map_error_code(code, message, operation, status, response, request_id=request_id)


def _json_object(payload: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(payload.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError too; nested past the limit
        return None
    return parsed if isinstance(parsed, dict) else None


def _decode_blobs(response: dict[str, Any]) -> None:
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
    # A loop, not recursion: a map nested deeper than Python's recursion limit allows is
    # decoded like any other, never a RecursionError out of a lock's request.
    pending: list[Any] = list(item.values())
    while pending:
        value = pending.pop()
        if not isinstance(value, dict):
            continue
        try:
            if "B" in value:
                value["B"] = base64.b64decode(value["B"])
            elif "BS" in value:
                value["BS"] = [base64.b64decode(member) for member in value["BS"]]
            elif "M" in value:
                pending.extend(value["M"].values())
            elif "L" in value:
                pending.extend(value["L"])
        except (binascii.Error, TypeError, AttributeError):
            pass  # leave what cannot be decoded as it came
