"""moto's DynamoDB in this process, answered one request at a time.

A request goes the way it would go to the local server, minus the socket:
botocore validates and serializes it exactly as an SDK client does, moto's
DynamoDB response handler (the code behind ``moto.server``) answers it, and
botocore parses the answer, error fields included. So validation, expressions,
error codes and capacity figures are moto's, as they are on the local server.

Each :class:`InProcessDynamoDB` owns a moto backend of its own that is never
registered in moto's global backend registry: ``mock_aws`` neither sees its
tables nor resets them, and nothing patches botocore, so the caller's other
boto3 calls are untouched.
"""

from __future__ import annotations

import functools
import io
import sys
import threading
from typing import Any, cast

import botocore.exceptions
import botocore.loaders
import botocore.model
import botocore.parsers
import botocore.serialize
import botocore.validate
from moto.core.request import Request
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.responses import DynamoHandler

_REGION = "us-east-1"
_ACCOUNT = "123456789012"
_HOST = f"dynamodb.{_REGION}.amazonaws.com"

#: One request at a time, across every backend in the process. moto's
#: TransactWriteItems puts back snapshots of the tables it touched when it
#: cancels, undoing writes other requests committed meanwhile (see
#: ``dynalease._local_server``); and moto keeps process-wide state (IAM
#: bookkeeping, id generators) that no two backends should touch at once.
_ONE_AT_A_TIME = threading.Lock()

#: Operations that change a table's definition (schema checks must be redone).
TABLE_OPERATIONS = frozenset({"CreateTable", "DeleteTable", "UpdateTable"})


class DynamoDBAnswer(Exception):
    """An error answer: DynamoDB's error code, message, HTTP status and parsed fields."""

    def __init__(self, code: str, message: str, status: int, response: dict[str, Any]) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.response = response


class _Handler(DynamoHandler):
    """moto's DynamoDB handler, bound to one backend instead of the global registry."""

    def __init__(self, backend: DynamoDBBackend) -> None:
        super().__init__()
        self._backend = backend

    @property
    def dynamodb_backend(self) -> DynamoDBBackend:
        return self._backend

    def get_current_account(self) -> str:
        # moto would read MOTO_ACCOUNT_ID or the access key; ours is fixed.
        return self._backend.account_id


@functools.cache
def _wire() -> tuple[
    botocore.model.ServiceModel,
    botocore.validate.ParamValidationDecorator,
    botocore.parsers.ResponseParser,
]:
    """DynamoDB's service model with botocore's JSON serializer and parser (built once)."""
    loader = botocore.loaders.create_loader()
    model = botocore.model.ServiceModel(
        loader.load_service_model("dynamodb", "service-2"), service_name="dynamodb"
    )
    serializer = botocore.validate.ParamValidationDecorator(
        botocore.validate.ParamValidator(),
        botocore.serialize.JSONSerializer(),
    )
    return model, serializer, botocore.parsers.create_parser("json")


def _environ(request: dict[str, Any]) -> dict[str, Any]:
    """The WSGI environ of a serialized request, as the local server would build it."""
    body: bytes = request["body"]
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "SERVER_NAME": _HOST,
        "SERVER_PORT": "443",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": _HOST,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "https",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in request["headers"].items():
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    return environ


class InProcessDynamoDB:
    """One isolated moto DynamoDB backend, answering low-level (botocore-shaped) requests.

    Example::

        db = InProcessDynamoDB()
        db.call("ListTables", {})  # {'TableNames': [], 'ResponseMetadata': {...}}
    """

    def __init__(self) -> None:
        self._backend = DynamoDBBackend(_REGION, _ACCOUNT)
        #: Tables whose key schema a lock transport has checked (see TABLE_OPERATIONS).
        self.lock_tables: set[str] = set()

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run one operation (e.g. ``"PutItem"``); raise :class:`DynamoDBAnswer` on an error."""
        model, serializer, parser = _wire()
        try:
            operation_model = model.operation_model(operation)
        except botocore.model.OperationNotFoundError:
            raise DynamoDBAnswer(
                "UnknownOperationException", f"DynamoDB has no operation {operation}", 400, {}
            ) from None
        try:
            request = serializer.serialize_to_request(params, operation_model)
        except botocore.exceptions.ParamValidationError as error:
            # An SDK refuses these before sending; the closest DynamoDB answer.
            raise DynamoDBAnswer("ValidationException", str(error), 400, {}) from None
        environ = _environ(request)
        with _ONE_AT_A_TIME:
            if operation in TABLE_OPERATIONS:
                self.lock_tables.clear()
            status, headers, body = _Handler(self._backend)._dispatch(Request(environ))
        answer = {
            "status_code": status,
            "headers": headers,
            "body": body.encode() if isinstance(body, str) else body,
        }
        output: Any = operation_model.output_shape  # every DynamoDB operation has one
        parsed: dict[str, Any] = parser.parse(answer, output)
        if status < 300:
            return parsed
        failure = parsed.get("Error", {})
        code = str(failure.get("Code", "")).rsplit("#", 1)[-1]
        # botocore's client adds the error's modeled fields (a failed condition's
        # Item, a transaction's CancellationReasons) the same way.
        shape = model.shape_for_error_code(cast(Any, code))  # the stubs say int; it is the code
        if shape is not None:
            parsed.update(parser.parse(answer, shape))
        raise DynamoDBAnswer(code, str(failure.get("Message", "")), status, parsed)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """Every table's items (AttributeValue form), read with Scan."""
        names: list[str] = []
        page: dict[str, Any] = {}
        while True:
            listed = self.call("ListTables", page)
            names.extend(listed["TableNames"])
            if "LastEvaluatedTableName" not in listed:
                break
            page = {"ExclusiveStartTableName": listed["LastEvaluatedTableName"]}
        return {name: self._scan(name) for name in names}

    def _scan(self, table: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        while True:
            answer = self.call("Scan", params)
            items.extend(answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                return items
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def reset(self) -> None:
        """Drop every table and item."""
        with _ONE_AT_A_TIME:
            self._backend.reset()
            self.lock_tables.clear()
