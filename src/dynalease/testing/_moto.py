"""moto's DynamoDB in this process, one request at a time: botocore validates, serializes
and parses as an SDK client does and moto's DynamoDB handler (the code behind
``moto.server``) answers, so everything is moto's, as on the local server minus the socket.

Each :class:`ServedDynamoDB` owns moto backends of its own (one per Region), never in
moto's global registry: ``mock_aws`` neither sees nor resets them, and nothing patches
botocore. Memory stays flat however long it runs: transactions snapshot only the items
they touch (:class:`SnapshotBackend`), and the model objects moto records for its
``/moto-api`` data view are forgotten once a request is answered (:func:`_untracked`).
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

from .._transport.errors import map_error_code

_REGION = "us-east-1"
_ACCOUNT = "123456789012"
_HOST = f"dynamodb.{_REGION}.amazonaws.com"

#: Across every backend in the process: a cancelled TransactWriteItems puts back what it
#: touched, undoing writes other requests committed meanwhile, and moto keeps process-wide
#: state (IAM bookkeeping, id generators) that no two backends should touch at once.
_ONE_AT_A_TIME = threading.Lock()

#: Schema checks must be redone after these.
TABLE_OPERATIONS = frozenset({"CreateTable", "DeleteTable", "UpdateTable"})


class _Snapshot(NamedTuple):
    """An item as it was before a transaction: put back if the transaction fails."""

    table: Table
    hash_key: DynamoType
    range_key: DynamoType | None
    item: Item | None
    #: A copy: an update changes them in place.
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
    """Transactions snapshot only the items they touch, not moto's copy of each whole table,
    and put them back however they fail (cancelled, invalid, refused before running)."""

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
        """None when moto will refuse ``op``."""
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
    # The models registered themselves as this module imported moto.dynamodb.models.
    models = cast(dict[str, type], model_data.get("dynamodb", {}))
    return tuple(models.values())


@contextlib.contextmanager
def _untracked() -> Iterator[None]:
    """Forget the model objects moto records in ``instances_tracked`` while the block runs
    (only those: nothing another user of moto made is touched)."""
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
    """On the Region's backend of one :class:`ServedDynamoDB`, not moto's registry."""

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
    """Only DynamoDB: no other moto service and none of moto's ``/moto-api``."""

    def __init__(self) -> None:
        self._backends: dict[str, SnapshotBackend] = {}

    def answer(self, environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        with _ONE_AT_A_TIME, _untracked():
            status, headers, body = _Handler(self._backends)._dispatch(Request(environ))
        return status, dict(headers), body.encode() if isinstance(body, str) else body

    def reset(self) -> None:
        with _ONE_AT_A_TIME:
            for backend in self._backends.values():
                backend.reset()
            self._backends.clear()


class InProcessDynamoDB(ServedDynamoDB):
    """Answers low-level (botocore-shaped) requests in this process."""

    def __init__(self) -> None:
        super().__init__()
        #: Tables whose key schema a lock transport has checked.
        self.lock_tables: set[str] = set()

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        model, serializer, parser = _wire()
        try:
            operation_model = model.operation_model(operation)
        except botocore.model.OperationNotFoundError:
            message = f"DynamoDB has no operation {operation}"
            raise map_error_code("UnknownOperationException", message, operation, 400, {}) from None
        try:
            request = serializer.serialize_to_request(params, operation_model)
        except botocore.exceptions.ParamValidationError as error:
            # An SDK refuses these before sending; the closest DynamoDB answer.
            raise map_error_code("ValidationException", str(error), operation, 400, {}) from None
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
        # Mapped here, as the lean transport maps an answer: no exception to map again.
        raise map_error_code(code, str(failure.get("Message", "")), operation, status, parsed)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """Every table's items, in AttributeValue form."""
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
        super().reset()
        self.lock_tables.clear()
