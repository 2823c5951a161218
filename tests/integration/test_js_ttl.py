"""Per-message TTL (nats-server 2.11's ``Nats-TTL``) and subject delete markers, through nats-py.

nats-server 2.9.10 (the installed reference) has neither, so these run against jetpy only; the
rules follow 2.11: ``allow_msg_ttl`` opts a stream in (10166 otherwise), a TTL is a Go duration of
at least 1s, a number of seconds, or ``never`` (10165 otherwise), and ``subject_delete_marker_ttl``
leaves a ``Nats-Marker-Reason: MaxAge`` marker when expiry empties a subject.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import pytest
from nats.js.api import StreamConfig
from nats.js.errors import APIError, NotFoundError

import jetpy
from jetpy.server.app import Server

STORAGES = ["file", "memory"]


async def gone(js: nats.js.JetStreamContext, stream: str, seq: int, within: float = 4.0) -> float:
    """Wait until message ``seq`` is gone; returns how long that took."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        try:
            await js.get_msg(stream, seq)
        except NotFoundError:
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"message {seq} of {stream} did not expire within {within}s")


@pytest.mark.parametrize("storage", STORAGES)
async def test_ttl_message_expires_and_leaves_a_marker(server: Server, storage: str) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(
        StreamConfig(
            name="T",
            subjects=["t.*"],
            storage=storage,  # type: ignore[arg-type]
            allow_msg_ttl=True,
            allow_rollup_hdrs=True,
            subject_delete_marker_ttl=1.0,
        )
    )
    keep = await js.publish("t.keep", b"k")
    short = await js.publish("t.short", b"s", headers={"Nats-TTL": "1s"})
    stored = await js.get_msg("T", short.seq)
    assert stored.headers is not None and stored.headers["Nats-TTL"] == "1s"
    took = await gone(js, "T", short.seq)
    assert took < 3.0
    marker = await js.get_last_msg("T", "t.short")
    assert marker.seq == 3 and marker.data in (b"", None)
    assert marker.headers is not None
    assert (marker.headers["Nats-Marker-Reason"], marker.headers["Nats-TTL"]) == ("MaxAge", "1s")
    # the marker expires too, without a marker of its own; the plain message stays
    await gone(js, "T", marker.seq)
    info = await js.stream_info("T")
    assert (info.state.messages, info.state.last_seq) == (1, 3)
    assert (await js.get_msg("T", keep.seq)).data == b"k"
    await nc.close()


async def test_ttl_header_rules(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="PLAIN", subjects=["plain"])
    with pytest.raises(APIError) as err:
        await js.publish("plain", b"x", headers={"Nats-TTL": "5s"})
    assert (err.value.code, err.value.err_code, err.value.description) == (
        400,
        10166,
        "per-message TTL is disabled",
    )
    with pytest.raises(APIError) as err:  # a bad value on a stream without TTLs: disabled, too
        await js.publish("plain", b"x", headers={"Nats-TTL": "0"})
    assert err.value.err_code == 10166

    await js.add_stream(StreamConfig(name="TT", subjects=["tt"], allow_msg_ttl=True))
    for bad in ("0", "500ms", "abc", "1x", "-1"):
        with pytest.raises(APIError) as err:
            await js.publish("tt", b"x", headers={"Nats-TTL": bad})
        assert (err.value.code, err.value.err_code, err.value.description) == (
            400,
            10165,
            "invalid per-message TTL",
        ), bad
    for good in ("2", "1m", "1h30m", "never", "NEVER"):
        await js.publish("tt", b"x", headers={"Nats-TTL": good})
    # checked before de-duplication: a refused TTL does not record the message id
    with pytest.raises(APIError):
        await js.publish("tt", b"x", headers={"Nats-TTL": "bad", "Nats-Msg-Id": "m1"})
    ack = await js.publish("tt", b"x", headers={"Nats-TTL": "1m", "Nats-Msg-Id": "m1"})
    assert not ack.duplicate
    assert (await js.stream_info("TT")).state.messages == 6
    await nc.close()


async def test_never_outlives_max_age(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="N", subjects=["n.*"], max_age=1.0, allow_msg_ttl=True))
    keep = await js.publish("n.schema", b"keep", headers={"Nats-TTL": "never"})
    tmp = await js.publish("n.tmp", b"t")
    await gone(js, "N", tmp.seq)
    assert (await js.get_msg("N", keep.seq)).data == b"keep"
    await nc.close()


async def test_marker_config_rules(server: Server) -> None:
    nc = await nats.connect(server.client_url)
    js = nc.jetstream()
    with pytest.raises(APIError) as err:
        await js.add_stream(StreamConfig(name="M", subjects=["m"], subject_delete_marker_ttl=0.5))
    assert err.value.err_code == 10052 and "at least 1 second" in (err.value.description or "")
    # markers need TTLs and rollups: the server turns both on
    info = await js.add_stream(StreamConfig(name="M", subjects=["m"], subject_delete_marker_ttl=2.0))
    assert info.config.allow_msg_ttl and info.config.allow_rollup_hdrs
    # and allow_msg_ttl cannot be turned off again
    with pytest.raises(APIError) as err:
        await js.update_stream(StreamConfig(name="M", subjects=["m"], allow_rollup_hdrs=True))
    assert "message TTL status can not be disabled" in (err.value.description or "")
    await nc.close()


async def test_ttl_survives_restart(tmp_path: Path) -> None:
    store = str(tmp_path / "js")
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="R", subjects=["r.*"], allow_msg_ttl=True))
        short = await js.publish("r.short", b"s", headers={"Nats-TTL": "2s"})
        stay = await js.publish("r.stay", b"v")
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        assert (await js.get_msg("R", short.seq)).data == b"s"
        await gone(js, "R", short.seq)
        assert (await js.get_msg("R", stay.seq)).data == b"v"
        await nc.close()
