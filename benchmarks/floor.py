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


# --- the uncontended floor: one sync caller, signed, keep-alive, nothing else ---------


class _Signer:
    """SigV4 for DynamoDB's JSON API, the signing key made once a day (what a lean client does)."""

    def __init__(self, host: str, access_key: str, secret_key: str, region: str) -> None:
        self.host, self.access_key, self.secret_key, self.region = (
            host,
            access_key,
            secret_key,
            region,
        )
        self._day = ""
        self._key = b""

    def headers(self, target: str, body: bytes) -> str:
        import hashlib
        import hmac

        now = time.gmtime()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", now)
        day = stamp[:8]
        if day != self._day:
            key = ("AWS4" + self.secret_key).encode()
            for part in (day, self.region, "dynamodb", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._day, self._key = day, key
        signed = "content-type;host;x-amz-date;x-amz-target"
        canonical = (
            f"POST\n/\n\ncontent-type:application/x-amz-json-1.0\nhost:{self.host}\n"
            f"x-amz-date:{stamp}\nx-amz-target:{target}\n\n{signed}\n"
            f"{hashlib.sha256(body).hexdigest()}"
        )
        scope = f"{day}/{self.region}/dynamodb/aws4_request"
        to_sign = (
            f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        )
        signature = hmac.new(self._key, to_sign.encode(), hashlib.sha256).hexdigest()
        return (
            f"POST / HTTP/1.1\r\nHost: {self.host}\r\n"
            "Content-Type: application/x-amz-json-1.0\r\n"
            f"X-Amz-Date: {stamp}\r\nX-Amz-Target: {target}\r\n"
            f"Authorization: AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )


class _BlockingConnection:
    """One keep-alive socket, reopened when the server closes it; answers read by length."""

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.sock: Any = None

    def send(self, head: str, body: bytes) -> bytes:
        import socket

        if self.sock is None:
            self.sock = socket.create_connection(self.address)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(65536)
        top, _, rest = data.partition(b"\r\n\r\n")
        lines = top.decode("latin-1").lower().split("\r\n")
        length = next(int(line[15:]) for line in lines if line.startswith("content-length:"))
        while len(rest) < length:
            rest += self.sock.recv(65536)
        if any(line.startswith("connection:") and "close" in line for line in lines):
            self.sock.close()
            self.sock = None
        if " 200 " not in lines[0]:
            raise RuntimeError(f"the server answered {lines[0]!r}")
        return rest

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def floor_cycles(endpoint: str, table: str, key: str, cycles: int) -> float:
    """CPU milliseconds per signed PutItem + DeleteItem cycle from a bare sync client.

    The same two requests an uncontended lock cycle sends (the create with its
    condition, the owner-conditional delete), new UUIDs each cycle, answers
    parsed as JSON: what Python does at all for a cycle, without lock logic.
    """
    import os

    address = urlsplit(endpoint)
    host, port = address.hostname or "127.0.0.1", address.port or 80
    signer = _Signer(
        f"{host}:{port}",
        os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    )
    connection = _BlockingConnection(host, port)
    encoder = json.JSONEncoder(separators=(",", ":"))

    def send(target: str, params: dict[str, Any]) -> Any:
        body = encoder.encode(params).encode()
        return json.loads(
            connection.send(signer.headers(f"DynamoDB_20120810.{target}", body), body)
        )

    def cycle() -> None:
        owner = str(uuid.uuid4())
        send(
            "PutItem",
            {
                "TableName": table,
                "Item": {
                    "key": {"S": key},
                    "owner": {"S": owner},
                    "version": {"S": str(uuid.uuid4())},
                    "lease_ms": {"N": "30000"},
                    "protocol": {"N": "1"},
                },
                "ConditionExpression": "attribute_not_exists(#k)",
                "ExpressionAttributeNames": {"#k": "key"},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                "ReturnConsumedCapacity": "TOTAL",
            },
        )
        send(
            "DeleteItem",
            {
                "TableName": table,
                "Key": {"key": {"S": key}},
                "ConditionExpression": "#o = :o",
                "ExpressionAttributeNames": {"#o": "owner"},
                "ExpressionAttributeValues": {":o": {"S": owner}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                "ReturnConsumedCapacity": "TOTAL",
            },
        )

    try:
        cycle()  # warm: the first connection
        cpu = time.process_time()
        for _ in range(cycles):
            cycle()
        return (time.process_time() - cpu) / cycles * 1000
    finally:
        connection.close()
