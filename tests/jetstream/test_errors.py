"""The error table: nats-server's codes and texts, placeholders, and ApiError's wire form."""

from __future__ import annotations

import re

import pytest

from jetpy.jetstream import errors as E
from jetpy.jetstream.errors import BY_ERR_CODE, NAMES, ApiError, ErrorCode

# Every err_code listed in the reference inventory's section 2.1 that nats-server 2.10/2.11 have.
REFERENCE_CODES = {
    10003, 10008, 10013, 10014, 10025, 10026, 10027, 10037, 10039, 10076, 10047, 10028, 10023,
    10052, 10054, 10055, 10056, 10058, 10059, 10060, 10065, 10070, 10071, 10077, 10097, 10105,
    10109, 10110, 10111, 10127, 10128, 10148, 10149, 10157, 10158, 10164, 10165, 10166, 10167,
    10083, 10084, 10099, 10100, 10116, 10136, 10138,
}  # fmt: skip


def test_reference_codes_are_present() -> None:
    assert set(BY_ERR_CODE) >= REFERENCE_CODES


def test_every_code_from_10002_to_10167_is_known() -> None:
    # errors.json through 2.11 has no gaps in this range except 10001 (never used)
    missing = set(range(10002, 10168)) - set(BY_ERR_CODE)
    assert not missing


def test_table_is_consistent() -> None:
    for err_code, row in BY_ERR_CODE.items():
        assert row.err_code == err_code
        assert row.code in (400, 404, 409, 412, 429, 500, 503) or row is E.PERMISSIONS_VIOLATION
        assert row.description
        assert getattr(E, NAMES[err_code]) is row
        assert NAMES[err_code] in E.__all__
    assert E.INTERNAL is E.STREAM_GENERAL


@pytest.mark.parametrize(
    ("row", "code", "err_code", "description"),
    [
        (E.STREAM_NOT_FOUND, 404, 10059, "stream not found"),
        (E.CONSUMER_NOT_FOUND, 404, 10014, "consumer not found"),
        (E.STREAM_NAME_EXIST, 400, 10058, "stream name already in use with a different configuration"),
        (E.STREAM_REPLICAS_NOT_SUPPORTED, 500, 10074, "replicas > 1 not supported in non-clustered mode"),
        (
            E.CONSUMER_PULL_REQUIRES_ACK,
            400,
            10084,
            "consumer in pull mode requires explicit ack policy on workqueue stream",
        ),
        (E.CONSUMER_SMALL_HEARTBEAT, 400, 10083, "consumer idle heartbeat needs to be >= 100ms"),
        (E.NOT_ENABLED_FOR_ACCOUNT, 503, 10039, "JetStream not enabled for account"),
        (E.STREAM_NAME_CONTAINS_PATH_SEPARATORS, 400, 10128, "Stream name can not contain path separators"),
        (E.CONSUMER_OFFLINE_REASON, 500, 10195, "consumer is offline: {err}"),
        (E.STREAM_OFFLINE_REASON, 500, 10194, "stream is offline: {err}"),
    ],
)
def test_rows_match_nats_server(row: ErrorCode, code: int, err_code: int, description: str) -> None:
    assert (row.code, row.err_code, row.description) == (code, err_code, description)


def test_format_fills_placeholders() -> None:
    assert E.STREAM_WRONG_LAST_SEQUENCE.format(seq=5) == "wrong last sequence: 5"
    assert E.STREAM_STORE_FAILED.format(err="maximum messages exceeded") == "maximum messages exceeded"
    assert (
        E.STREAM_EXTERNAL_API_OVERLAP.format(prefix="$JS.x", subject="$JS.API")
        == "stream external api prefix $JS.x must not overlap with $JS.API"
    )
    assert E.STREAM_WRONG_LAST_SEQUENCE.placeholders == ("seq",)


def test_format_drops_missing_details() -> None:
    assert E.INVALID_JSON.format() == "invalid JSON"
    assert E.STREAM_NOT_FOUND.format(unused=1) == "stream not found"
    assert E.STREAM_STORE_FAILED.format() == ""


def test_format_never_leaves_braces_when_filled() -> None:
    for row in BY_ERR_CODE.values():
        filled = row.format(**{name: "X" for name in row.placeholders})
        assert not re.search(r"\{[a-z_]+\}", filled), row


def test_api_error() -> None:
    err = ApiError.of(E.STREAM_WRONG_LAST_MSG_ID, id="abc")
    assert err.to_wire() == {"code": 400, "err_code": 10070, "description": "wrong last msg ID: abc"}
    assert str(err) == "wrong last msg ID: abc"
    assert err.is_(E.STREAM_WRONG_LAST_MSG_ID)
    assert not err.is_(E.STREAM_NOT_FOUND)
    assert err == ApiError(400, 10070, "wrong last msg ID: abc")
    assert len({err, ApiError(400, 10070, "wrong last msg ID: abc")}) == 1
    assert "10070" in repr(err)
    with pytest.raises(ApiError):
        raise err
