"""The fault proxy itself: it forwards faithfully, keeps connections alive, and each rule
does what it says to exactly the requests it picks."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import pytest
from support.fault_proxy import FaultProxy, key_is

TARGET = "DynamoDB_20120810."


_SESSION = boto3.Session(
    aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
)
_NO_RETRIES = botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"})


def _boto(url: str) -> Any:
    """A plain boto3 client (SDK retries off), to see exactly what the proxy answers."""
    return _SESSION.client("dynamodb", endpoint_url=url, config=_NO_RETRIES)


def _put(client: Any, table: str, key: str) -> None:
    client.put_item(TableName=table, Item={"key": {"S": key}, "owner": {"S": "o"}})


def _code(call: Callable[[], object]) -> tuple[str, int]:
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        call()
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_requests_on_one_keep_alive_connection_are_all_forwarded(
    proxy: FaultProxy, table: str
) -> None:
    host, port = proxy.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    body = json.dumps({"TableName": table}).encode()
    headers = {
        "X-Amz-Target": TARGET + "DescribeTable",
        "Content-Type": "application/x-amz-json-1.0",
        # moto routes by the credential scope's service name; it does not check signatures
        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/"
        "aws4_request, SignedHeaders=host, Signature=0",
    }
    for _ in range(3):
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["Table"]["TableName"] == table
    connection.close()
    assert proxy.connections == 1
    assert [seen.operation for seen in proxy.seen()] == ["DescribeTable"] * 3


def test_a_throttle_rule_answers_in_dynamodbs_error_shape_and_stops_after_its_budget(
    proxy: FaultProxy, table: str
) -> None:
    client = _boto(proxy.url)
    rule = proxy.throttle("PutItem", times=1)
    assert _code(lambda: _put(client, table, "a")) == (
        "ProvisionedThroughputExceededException",
        400,
    )
    _put(client, table, "a")
    assert rule.fired == 1 and rule.forwarded == 0
    assert [seen.status for seen in proxy.seen("PutItem")] == [400, 200]


@pytest.mark.parametrize(
    ("install", "expected"),
    [
        (lambda proxy: proxy.server_error("GetItem"), ("InternalServerError", 500)),
        (lambda proxy: proxy.server_error("GetItem", status=502), ("InternalServerError", 502)),
        (lambda proxy: proxy.partition("GetItem"), ("ServiceUnavailableException", 503)),
    ],
    ids=["500", "502", "partition-503"],
)
def test_error_rules_answer_without_reaching_the_server(
    proxy: FaultProxy, endpoint: str, table: str, install: Any, expected: tuple[str, int]
) -> None:
    client = _boto(proxy.url)
    install(proxy)
    get = {"TableName": table, "Key": {"key": {"S": "a"}}}
    assert _code(lambda: client.get_item(**get)) == expected
    _put(client, table, "a")  # other operations pass untouched
    assert _boto(endpoint).get_item(**get)["Item"]["owner"] == {"S": "o"}


def test_a_reset_partition_fails_the_request_and_the_row_is_never_written(
    proxy: FaultProxy, endpoint: str, table: str
) -> None:
    client = _boto(proxy.url)
    proxy.partition("PutItem", how="reset")
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        _put(client, table, "a")
    assert "Item" not in _boto(endpoint).get_item(TableName=table, Key={"key": {"S": "a"}})


def test_a_lost_response_is_committed_on_the_server_but_never_reaches_the_client(
    proxy: FaultProxy, endpoint: str, table: str
) -> None:
    client = _boto(proxy.url)
    rule = proxy.lose_response("PutItem", when=key_is("a"))
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        _put(client, table, "a")
    _put(client, table, "b")  # the predicate spares other keys
    direct = _boto(endpoint)
    for key in ("a", "b"):
        assert "Item" in direct.get_item(TableName=table, Key={"key": {"S": key}})
    assert (rule.fired, rule.forwarded) == (1, 1)


def test_a_lost_response_answered_with_500_still_commits(
    proxy: FaultProxy, endpoint: str, table: str
) -> None:
    client = _boto(proxy.url)
    proxy.lose_response("PutItem", how="500")
    assert _code(lambda: _put(client, table, "a")) == ("InternalServerError", 500)
    assert "Item" in _boto(endpoint).get_item(TableName=table, Key={"key": {"S": "a"}})


def test_a_held_request_reaches_the_server_only_when_released(
    proxy: FaultProxy, endpoint: str, table: str
) -> None:
    client, direct = _boto(proxy.url), _boto(endpoint)
    rule = proxy.hold("PutItem")
    sender = threading.Thread(target=_put, args=(client, table, "a"))
    sender.start()
    assert rule.wait_fired()
    assert "Item" not in direct.get_item(TableName=table, Key={"key": {"S": "a"}})
    rule.release()
    sender.join(10)
    assert rule.forwarded == 1
    assert "Item" in direct.get_item(TableName=table, Key={"key": {"S": "a"}})


def test_closing_the_proxy_abandons_held_requests_without_forwarding(
    endpoint: str, table: str
) -> None:
    proxy = FaultProxy(endpoint)
    rule = proxy.hold("PutItem")
    failures: list[BaseException] = []

    def send() -> None:
        try:
            _put(_boto(proxy.url), table, "a")
        except BaseException as error:
            failures.append(error)

    sender = threading.Thread(target=send)
    sender.start()
    assert rule.wait_fired()
    proxy.close()
    sender.join(10)
    assert rule.forwarded == 0 and len(failures) == 1
    assert "Item" not in _boto(endpoint).get_item(TableName=table, Key={"key": {"S": "a"}})


def test_bad_rule_options_are_rejected(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="how must be"):
        proxy.lose_response("PutItem", how="drop")
    with pytest.raises(ValueError, match="how must be"):
        proxy.partition(how="404")
    with pytest.raises(ValueError, match="5xx"):
        proxy.server_error(status=404)
    with pytest.raises(ValueError, match="upstream"):
        FaultProxy("localhost:1")
