"""The lean path's hand-written protocol pieces agree with botocore's own implementation.

Signatures are compared with ``botocore.auth.SigV4Auth`` for the same request,
credentials and time; request bodies with botocore's JSON serializer; answers
with botocore's JSON parser. Nothing here talks to a server.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

import botocore.session
import pytest
from botocore.auth import SigV4Auth, _host_from_url
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.model import ServiceModel
from botocore.parsers import create_parser
from botocore.serialize import create_serializer
from hypothesis import given, settings
from hypothesis import strategies as st

from dynalease._engine.store import ConditionFailed
from dynalease._transport.codec import ENCODER, read_answer
from dynalease._transport.connections import Answer
from dynalease._transport.sign import CONTENT_TYPE, SigV4Signer, amz_date, host_header
from dynalease.exceptions import (
    AccessDeniedError,
    RequestFailedError,
    TableNotFoundError,
    ThrottledError,
    TransactionCanceledException,
    ValidationError,
)

_MODEL: ServiceModel = botocore.session.get_session().get_service_model("dynamodb")


def _botocore_signed(
    url: str, region: str, target: str, body: bytes, creds: Credentials
) -> dict[str, str]:
    request = AWSRequest(
        method="POST",
        url=url,
        data=body,
        headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": target},
    )
    SigV4Auth(creds, "dynamodb", region).add_auth(request)
    return dict(request.headers.items())


def _ours(url: str, region: str, target: str, body: bytes, creds: Credentials, date: str) -> dict:
    parts = urlsplit(url)
    assert parts.hostname is not None
    signer = SigV4Signer(host_header(parts.scheme, parts.hostname, parts.port), region)
    return signer.headers(target, body, creds.access_key, creds.secret_key, creds.token, date)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:5077",
        "https://dynamodb.eu-west-1.amazonaws.com",
        "https://dynamodb.us-east-1.amazonaws.com:443",
        "http://localhost:80",
        "https://Dynamodb-FIPS.us-gov-west-1.amazonaws.com",
        "https://[::1]:8443",
        "http://[fd00::5]",
    ],
)
def test_host_header_matches_botocore_for_ports_case_and_ipv6(url: str) -> None:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert host_header(parts.scheme, parts.hostname, parts.port) == _host_from_url(url)


@pytest.mark.parametrize(
    "token",
    [
        None,
        "FwoGZXIvYXdzEJr//////////wEaDK+token/with=chars",
        "  a token\twith   runs of white space  ",  # signed folded, sent as it is
    ],
)
@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1", "ap-southeast-2"])
def test_signature_matches_botocore_with_and_without_session_token(
    region: str, token: str | None
) -> None:
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    url = "https://dynamodb.us-east-1.amazonaws.com"
    body = json.dumps({"TableName": "locks", "Key": {"key": {"S": "a"}}}).encode()
    target = "DynamoDB_20120810.GetItem"
    theirs = _botocore_signed(url, region, target, body, creds)
    ours = _ours(url, region, target, body, creds, theirs["X-Amz-Date"])
    assert ours["Authorization"] == theirs["Authorization"]
    assert ours.get("X-Amz-Security-Token") == theirs.get("X-Amz-Security-Token")
    assert ours["Host"] == _host_from_url(url)


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=300),
    port=st.sampled_from([None, 443, 8000, 4566]),
    operation=st.sampled_from(["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"]),
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789+/", min_size=1),
)
def test_signature_matches_botocore_for_any_body_port_operation_and_secret(
    body: bytes, port: int | None, operation: str, secret: str
) -> None:
    creds = Credentials("AKIDEXAMPLE", secret, None)
    url = "https://dynamodb.eu-west-1.amazonaws.com" + (f":{port}" if port else "")
    target = f"DynamoDB_20120810.{operation}"
    theirs = _botocore_signed(url, "eu-west-1", target, body, creds)
    ours = _ours(url, "eu-west-1", target, body, creds, theirs["X-Amz-Date"])
    assert ours["Authorization"] == theirs["Authorization"]


def test_a_rotated_secret_signs_with_the_new_key_not_a_cached_one() -> None:
    url = "http://127.0.0.1:8000"
    signer = SigV4Signer("127.0.0.1:8000", "us-east-1")
    body = b"{}"
    target = "DynamoDB_20120810.DeleteItem"
    for secret in ("first-secret", "second-secret", "first-secret"):
        creds = Credentials("AKID", secret, "token")
        theirs = _botocore_signed(url, "us-east-1", target, body, creds)
        ours = signer.headers(target, body, "AKID", secret, "token", theirs["X-Amz-Date"])
        assert ours["Authorization"] == theirs["Authorization"]


def test_amz_date_uses_botocore_timestamp_format() -> None:
    assert amz_date(0) == "19700101T000000Z"
    assert amz_date(1_800_000_000.9) == "20270115T080000Z"


# --- request bodies and answers --------------------------------------------------


def _botocore_body(operation: str, params: dict[str, Any]) -> Any:
    serialized = create_serializer("json").serialize_to_request(
        params, _MODEL.operation_model(operation)
    )
    return json.loads(serialized["body"])


def _ours_body(params: dict[str, Any]) -> Any:
    return json.loads(ENCODER.encode(params))


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        (
            "PutItem",
            {
                "TableName": "locks",
                "Item": {"key": {"S": "k"}, "lease_ms": {"N": "3000"}, "blob": {"B": b"\x00\xff"}},
                "ConditionExpression": "attribute_not_exists(#k)",
                "ExpressionAttributeNames": {"#k": "key"},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                "ReturnConsumedCapacity": "TOTAL",
            },
        ),
        (
            "TransactWriteItems",
            {
                "TransactItems": [
                    {
                        "ConditionCheck": {
                            "TableName": "locks",
                            "Key": {"key": {"S": "k"}},
                            "ConditionExpression": "#o = :o",
                            "ExpressionAttributeNames": {"#o": "owner"},
                            "ExpressionAttributeValues": {":o": {"S": "me"}},
                        }
                    },
                    {
                        "Put": {
                            "TableName": "data",
                            "Item": {
                                "id": {"S": "1"},
                                "bits": {"BS": [b"a", b"b"]},
                                "nested": {"M": {"x": {"L": [{"B": b"z"}, {"NULL": True}]}}},
                            },
                        }
                    },
                ],
                "ReturnConsumedCapacity": "TOTAL",
            },
        ),
    ],
)
def test_request_bodies_match_botocore_serializer_including_binary(
    operation: str, params: dict[str, Any]
) -> None:
    assert _ours_body(params) == _botocore_body(operation, params)


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
def _botocore_parse(operation: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    return create_parser("json").parse(
        {"status_code": status, "headers": {}, "body": raw},
        _MODEL.operation_model(operation).output_shape,
    )


def test_answers_decode_like_botocore_including_binary_and_capacity() -> None:
    body = {
        "Item": {
            "key": {"S": "k"},
            "raw": {"B": base64.b64encode(b"\x01\x02").decode()},
            "m": {"M": {"l": {"L": [{"BS": [base64.b64encode(b"q").decode()]}]}}},
        },
        "ConsumedCapacity": {"TableName": "locks", "CapacityUnits": 1.0},
    }
    ours = read_answer("GetItem", Answer(200, json.dumps(body).encode(), None, None), "http://x")
    theirs = _botocore_parse("GetItem", 200, body)
    assert ours["Item"] == theirs["Item"]
    assert ours["ConsumedCapacity"] == theirs["ConsumedCapacity"]


def test_a_failed_condition_carries_the_current_row_from_the_answer() -> None:
    row = {"key": {"S": "k"}, "owner": {"S": "other"}, "version": {"S": "v"}}
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
        "message": "The conditional request failed",
        "Item": row,
    }
    with pytest.raises(ConditionFailed) as failed:
        read_answer("PutItem", Answer(400, json.dumps(body).encode(), None, None), "http://x")
    assert failed.value.item == row


@pytest.mark.parametrize(
    ("status", "kind", "expected", "may_have_committed"),
    [
        (400, "ProvisionedThroughputExceededException", ThrottledError, False),
        (400, "ThrottlingException", ThrottledError, False),
        (400, "ResourceNotFoundException", TableNotFoundError, False),
        (400, "AccessDeniedException", AccessDeniedError, False),
        (400, "UnrecognizedClientException", AccessDeniedError, False),
        (400, "ValidationException", ValidationError, False),
        (500, "InternalServerError", RequestFailedError, True),
        (503, "ServiceUnavailable", RequestFailedError, True),
    ],
)
def test_error_answers_map_to_the_same_errors_as_the_botocore_path(
    status: int, kind: str, expected: type[Exception], may_have_committed: bool
) -> None:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{kind}", "message": "no"}
    with pytest.raises(expected) as raised:
        read_answer("UpdateItem", Answer(status, json.dumps(body).encode(), None, None), "http://x")
    assert raised.value.code == kind  # type: ignore[attr-defined]
    assert getattr(raised.value, "may_have_committed", False) is may_have_committed


def test_a_cancelled_transaction_keeps_its_reasons() -> None:
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": "Transaction cancelled",
        "CancellationReasons": [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}],
    }
    with pytest.raises(TransactionCanceledException) as raised:
        read_answer(
            "TransactWriteItems", Answer(400, json.dumps(body).encode(), None, None), "http://x"
        )
    assert [r["Code"] for r in raised.value.reasons] == ["ConditionalCheckFailed", "None"]


def test_an_answer_whose_checksum_does_not_match_may_have_been_applied() -> None:
    with pytest.raises(RequestFailedError) as raised:
        read_answer("PutItem", Answer(200, b'{"ConsumedCapacity":{}}', 12345, None), "http://x")
    assert raised.value.may_have_committed


def test_an_empty_success_is_an_answer_not_a_failure() -> None:
    assert read_answer("PutItem", Answer(200, b"{}", None, None), "http://x")[
        "ResponseMetadata"
    ] == {"HTTPStatusCode": 200}


def test_a_success_that_is_not_json_may_have_been_applied() -> None:
    with pytest.raises(RequestFailedError) as raised:
        read_answer("PutItem", Answer(200, b"<html>", None, None), "http://x")
    assert raised.value.may_have_committed


def test_a_5xx_page_that_is_not_json_may_have_been_applied() -> None:
    with pytest.raises(RequestFailedError) as raised:
        read_answer("DeleteItem", Answer(502, b"<html>bad gateway</html>", None, None), "http://x")
    assert raised.value.may_have_committed


def test_a_token_signature_reads_the_same_with_the_cached_key_as_with_a_fresh_one() -> None:
    signer = SigV4Signer("127.0.0.1:8000", "us-east-1")
    request = ("DynamoDB_20120810.GetItem", b"{}", "AKID", "s3cret", "tok", "20260101T120000Z")
    first = signer.headers(*request)
    again = signer.headers(*request)
    fresh = SigV4Signer("127.0.0.1:8000", "us-east-1")
    assert first == again == fresh.headers(*request)


@pytest.mark.parametrize(
    ("host", "region"), [("h\r\nX-Evil: 1", "us-east-1"), ("127.0.0.1:8000", "us-east-1\n")]
)
def test_a_signer_refuses_a_host_or_region_with_a_line_break(host: str, region: str) -> None:
    with pytest.raises(ValueError, match="line break"):
        SigV4Signer(host, region)


@pytest.mark.parametrize(
    ("access_key", "token"), [("AKID\r\nX-Evil: 1", None), ("AKID", "tok\nX-Evil: 1")]
)
def test_a_key_or_token_with_a_line_break_is_never_signed_into_a_head(
    access_key: str, token: str | None
) -> None:
    signer = SigV4Signer("127.0.0.1:8000", "us-east-1")
    with pytest.raises(ValueError, match="line break"):
        signer.headers("DynamoDB_20120810.GetItem", b"{}", access_key, "s", token, amz_date())
