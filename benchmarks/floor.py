"""The server's floor: the ``independent`` workload sent by a client that does nothing else.

No lock library, no signing (moto does not check signatures), no retries and
no parsing beyond the status line and ``Content-Length``: the same PutItem and
DeleteItem requests the two libraries send, written as bytes and read back over
plain asyncio streams. Its elapsed time is what the server itself allows;
a library at ``elapsed / floor`` close to 1 spends its time waiting on the
server, not on itself.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

_AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=testing/20000101/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64
)


class _Connection:
    """One contender's connection, reopened whenever the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def send(self, target: str, body: dict[str, Any]) -> None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        head = (
            f"POST / HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/x-amz-json-1.0\r\n"
            f"X-Amz-Target: DynamoDB_20120810.{target}\r\n"
            f"X-Amz-Date: {time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}\r\n"
            f"Authorization: {_AUTHORIZATION}\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        writer.write(head + payload)
        status = await reader.readline()
        length, close = 0, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "connection" and "close" in value.lower():
                close = True
        await reader.readexactly(length)
        if close:
            writer.close()
            self.streams = None
        if b" 200 " not in status:
            raise RuntimeError(f"the server answered {target} with {status!r}")

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


async def _run(endpoint: str, table: str, keys: list[str], each: int, hold: float) -> None:
    address = urlsplit(endpoint)
    host, port = address.hostname or "127.0.0.1", address.port or 80

    async def contender(key: str) -> None:
        connection = _Connection(host, port)
        try:
            for _ in range(each):
                owner = str(uuid.uuid4())
                await connection.send(
                    "PutItem",
                    {
                        "TableName": table,
                        "Item": {
                            "key": {"S": key},
                            "owner": {"S": owner},
                            "version": {"S": str(uuid.uuid4())},
                            "lease_ms": {"N": "3000"},
                            "protocol": {"N": "1"},
                        },
                        "ConditionExpression": "attribute_not_exists(#k)",
                        "ExpressionAttributeNames": {"#k": "key"},
                        "ReturnConsumedCapacity": "TOTAL",
                    },
                )
                await asyncio.sleep(hold)
                await connection.send(
                    "DeleteItem",
                    {
                        "TableName": table,
                        "Key": {"key": {"S": key}},
                        "ConditionExpression": "#o = :o",
                        "ExpressionAttributeNames": {"#o": "owner"},
                        "ExpressionAttributeValues": {":o": {"S": owner}},
                        "ReturnConsumedCapacity": "TOTAL",
                    },
                )
        finally:
            connection.close()

    await asyncio.gather(*(contender(key) for key in keys))


def floor_elapsed(endpoint: str, table: str, keys: list[str], each: int, hold: float) -> float:
    """Seconds the bare requests of ``each`` create-hold-delete cycles per key take."""
    start = time.perf_counter()
    asyncio.run(_run(endpoint, table, keys, each, hold))
    return time.perf_counter() - start
