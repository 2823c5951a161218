"""The fields of nats-server's ``JSApiMsgGetRequest`` on both ways of reading one message,
compared with the newest nats-server (2.15.1): ``STREAM.MSG.GET`` refuses a direct get's
``batch`` and ``max_bytes`` (10003, even for a stream that does not exist), ``no_hdr`` leaves the
headers out (a direct get then answers with the data alone; ``multi_last`` keeps them), and
``up_to_seq`` means nothing without a batch."""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout

from conftest import Proc

pytestmark = pytest.mark.differential

CASES: dict[str, dict[str, Any]] = {
    "seq": {"seq": 1},
    "seq batch": {"seq": 1, "batch": 2},
    "seq batch 0": {"seq": 1, "batch": 0},
    "seq max_bytes": {"seq": 1, "max_bytes": 5},
    "next max_bytes": {"next_by_subj": "m.b", "seq": 1, "max_bytes": 1},
    "start_time batch": {"start_time": "2000-01-01T00:00:00Z", "batch": 1},
    "multi_last": {"multi_last": ["m.a"]},
    "seq up_to_seq": {"seq": 1, "up_to_seq": 1},
    "no_hdr": {"seq": 1, "no_hdr": True},
    "no_hdr false": {"seq": 1, "no_hdr": False},
    "last no_hdr": {"last_by_subj": "m.b", "no_hdr": True},
    "batch no_hdr": {"seq": 1, "batch": 2, "no_hdr": True},
    "multi_last no_hdr": {"multi_last": ["m.a", "m.b"], "no_hdr": True},
}


async def _direct(nc: Client, body: dict[str, Any]) -> list[tuple[str | None, ...]]:
    """A direct get's messages: sequence, status, the message's own header, data."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$JS.API.DIRECT.GET.M", json.dumps(body).encode(), reply=inbox)
    got: list[tuple[str | None, ...]] = []
    batched = "batch" in body or "multi_last" in body
    try:
        while len(got) < 10:
            m = await sub.next_msg(timeout=1)
            h = m.headers or {}
            got.append((h.get("Nats-Sequence"), h.get("Status"), h.get("H"), m.data.decode()))
            if h.get("Status") or not batched:
                break
    except NatsTimeout:
        got.append(("<silence>",))
    await sub.unsubscribe()
    return got


async def _replies(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nc = await nats.connect(url)
    try:
        cfg = {"name": "M", "subjects": ["m.>"], "allow_direct": True, "storage": "memory"}
        await nc.request("$JS.API.STREAM.CREATE.M", json.dumps(cfg).encode(), timeout=3)
        for s in "abab":
            await nc.request(f"m.{s}", f"x{s}".encode(), timeout=3, headers={"H": "1"})
        for case, body in CASES.items():
            r = json.loads(
                (await nc.request("$JS.API.STREAM.MSG.GET.M", json.dumps(body).encode(), timeout=3)).data
            )
            msg, err = r.get("message") or {}, r.get("error") or {}
            out[f"get {case}"] = (msg.get("seq"), "hdrs" in msg, err.get("err_code"))
            out[f"direct {case}"] = await _direct(nc, body)
        missing = await nc.request("$JS.API.STREAM.MSG.GET.NOPE", b'{"seq": 1, "batch": 1}', timeout=3)
        out["get batch of a missing stream"] = json.loads(missing.data)["error"]["err_code"]
    finally:
        await nc.close()
    return out


async def test_msg_get_request_fields_as_nats_server(jetpy_proc: Proc, newest_proc: Proc) -> None:
    theirs = await _replies(newest_proc.url)
    assert theirs["get seq batch"] == (None, False, 10003) and theirs["get no_hdr"] == (1, False, None)
    assert theirs["direct no_hdr"] == [(None, None, None, "xa")], theirs
    assert await _replies(jetpy_proc.url) == theirs
