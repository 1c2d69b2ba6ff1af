"""moto's DynamoDB in this process, answered one request at a time.

A request goes the way it would go to the local server, minus the socket:
botocore validates and serializes it exactly as an SDK client does, moto's
DynamoDB response handler (the code behind ``moto.server``) answers it, and
botocore parses the answer, error fields included. So validation, expressions,
error codes and capacity figures are moto's, as they are on the local server.

Each :class:`ServedDynamoDB` (the local server's, ``dynalease._tooling.local_server``)
and each :class:`InProcessDynamoDB` built on it owns moto backends of its own
(one per Region) that are never registered in moto's global backend registry:
``mock_aws`` neither sees their tables nor resets them, and nothing patches
botocore, so the caller's other boto3 calls are untouched.

Two things differ from moto's own backend, both to keep memory flat however
long it runs (moto itself is not edited):

- ``TransactWriteItems`` snapshots only the items it touches
  (:class:`SnapshotBackend`). moto deep-copies every table a transaction names,
  a whole table per ``check_in``, and keeps every copied item alive.
- moto records every model object it ever makes (``instances_tracked``, read
  only by its ``/moto-api`` data view); the objects a request makes here are
  forgotten once it is answered (:func:`_untracked`), or every replaced or
  deleted item would stay in memory for good.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import threading
import wsgiref.util
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import botocore.exceptions
import botocore.loaders
import botocore.model
import botocore.parsers
import botocore.serialize
import botocore.validate
from moto.core.model_instances import model_data
from moto.core.request import Request
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler

_REGION = "us-east-1"
_ACCOUNT = "123456789012"
_HOST = f"dynamodb.{_REGION}.amazonaws.com"

#: One request at a time, across every backend in the process. moto's
#: TransactWriteItems puts back snapshots of the tables it touched when it
#: cancels, undoing writes other requests committed meanwhile (see
#: ``dynalease._tooling.local_server``); and moto keeps process-wide state (IAM
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


class _Snapshot(NamedTuple):
    """One item a transaction touches, as it was before: put back if the transaction fails."""

    table: Table
    hash_key: DynamoType
    range_key: DynamoType | None
    item: Item | None
    #: The item's attributes then (a copy: an update changes them in place).
    attrs: Any

    def restore(self) -> None:
        items: dict[Any, Any] = self.table.items
        if self.range_key is not None:
            items = items[self.hash_key]
        place = self.hash_key if self.range_key is None else self.range_key
        if self.item is None:
            items.pop(place, None)
        else:
            self.item.attrs = self.attrs
            items[place] = self.item


def _itself(table: Table, memo: Any) -> Table:
    return table


class SnapshotBackend(DynamoDBBackend):
    """moto's DynamoDB backend whose transactions snapshot only the items they touch.

    A transaction's cost no longer grows with the tables it names: moto's
    whole-table copy is replaced by a reference, and the touched items'
    attributes are saved instead and put back if the transaction fails in any
    way (cancelled, invalid, or refused before it ran), so a failed
    transaction leaves every item as before, as DynamoDB's does.
    """

    def transact_write_items(self, transact_items: list[dict[str, Any]]) -> None:
        operations = [
            next(iter(item.items())) for item in transact_items if isinstance(item, dict) and item
        ]
        names = {op.get("TableName") for _, op in operations if isinstance(op, dict)}
        tables = [self.tables[name] for name in names if name in self.tables]
        saved = [snapshot for kind, op in operations if (snapshot := self._snapshot(kind, op))]
        for table in tables:
            # moto deep-copies each table to roll back; the items saved above do instead.
            table.__deepcopy__ = functools.partial(_itself, table)  # type: ignore[attr-defined]
        try:
            super().transact_write_items(transact_items)
        except BaseException:
            for snapshot in reversed(saved):  # the earliest state of an item is put back last
                snapshot.restore()
            raise
        finally:
            for table in tables:
                del table.__deepcopy__  # type: ignore[attr-defined]

    def _snapshot(self, kind: str, op: Any) -> _Snapshot | None:
        """The item ``op`` would change, as it is now; None when moto will refuse ``op``."""
        try:
            table = self.tables[op["TableName"]]
            if kind == "Put":
                attrs = op["Item"]
                keys = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    keys[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                keys = op["Key"]
            hash_key, range_key = self.get_keys_value(table, keys)
            item = table.get_item(hash_key, range_key)
        except Exception:  # moto's own checks refuse it before any change
            return None
        attrs = None if item is None else copy.deepcopy(item.attrs)
        return _Snapshot(table, hash_key, range_key, item, attrs)


@functools.cache
def _tracked_models() -> tuple[type, ...]:
    import moto.dynamodb.models  # noqa: F401  (registers the models)

    models = cast(dict[str, type], model_data.get("dynamodb", {}))
    return tuple(models.values())


@contextlib.contextmanager
def _untracked() -> Iterator[None]:
    """Forget the DynamoDB model objects moto records while the block runs.

    moto appends every model object it makes to its class's ``instances_tracked``
    and keeps it there for its data view; only the objects made inside the
    block are dropped, so nothing another user of moto made is touched.
    """
    models = _tracked_models()
    before = [len(model.instances_tracked) for model in models]  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for model, count in zip(models, before, strict=True):
            del model.instances_tracked[count:]  # type: ignore[attr-defined]


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
        "SERVER_NAME": _HOST,
        "wsgi.url_scheme": "https",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    for name, value in request["headers"].items():
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    wsgiref.util.setup_testing_defaults(environ)  # the rest: HTTP_HOST, SERVER_PORT...
    return environ


class _Handler(DynamoHandler):
    """moto's DynamoDB handler on the Region's backend of one :class:`ServedDynamoDB`.

    Not moto's global backend registry: see the module's documentation.
    """

    def __init__(self, backends: dict[str, SnapshotBackend]) -> None:
        super().__init__()
        self._backends = backends

    @property
    def dynamodb_backend(self) -> DynamoDBBackend:
        backend = self._backends.get(self.region)
        if backend is None:
            backend = self._backends[self.region] = SnapshotBackend(self.region, _ACCOUNT)
        return backend

    def get_current_account(self) -> str:
        # moto would read MOTO_ACCOUNT_ID or the access key; ours is fixed.
        return _ACCOUNT


class ServedDynamoDB:
    """moto's DynamoDB for a server: a :class:`SnapshotBackend` per Region, one request at a time.

    Only DynamoDB: no other moto service and none of moto's ``/moto-api``.
    """

    def __init__(self) -> None:
        self._backends: dict[str, SnapshotBackend] = {}

    def answer(self, environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body of one DynamoDB request (a WSGI environ)."""
        with _ONE_AT_A_TIME, _untracked():
            status, headers, body = _Handler(self._backends)._dispatch(Request(environ))
        return status, dict(headers), body.encode() if isinstance(body, str) else body

    def reset(self) -> None:
        """Drop every table in every Region."""
        with _ONE_AT_A_TIME:
            for backend in self._backends.values():
                backend.reset()
            self._backends.clear()


class InProcessDynamoDB(ServedDynamoDB):
    """Isolated moto DynamoDB, answering low-level (botocore-shaped) requests in this process.

    Example::

        db = InProcessDynamoDB()
        db.call("ListTables", {})  # {'TableNames': [], 'ResponseMetadata': {...}}
    """

    def __init__(self) -> None:
        super().__init__()
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
        if operation in TABLE_OPERATIONS:
            self.lock_tables.clear()
        status, headers, body = self.answer(_environ(request))
        answer = {"status_code": status, "headers": headers, "body": body}
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
        super().reset()
        self.lock_tables.clear()
