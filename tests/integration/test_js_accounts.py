"""JetStream per account on one jetpy server, through nats-py: every account its own streams,
consumers, KV and object buckets and API (the same names in two accounts, kept apart on disk as
nats-server keeps them: ``<store>/jetstream/<account>/streams/<name>``, and back in the right
account after a restart), 10039 in an account without JetStream, the account limits with
nats-server's codes and ``$JS.API.INFO``'s report of them, the JetStream domain, and /jsz per
account."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.aio.client import Client as NATS

from jetpy.server.app import Server
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import apply_config

pytestmark = pytest.mark.timeout(60)

CONF = """
jetstream { store_dir: %(store)s, domain: HUB }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}], jetstream: enabled }
  L: {
    users: [{user: l, password: l}]
    jetstream: {max_mem: 1000, max_file: 1000, max_streams: 3, max_consumers: 1, max_ack_pending: 20,
                memory_max_stream_bytes: 900, store_max_stream_bytes: 800}
  }
  R: { users: [{user: r, password: r}], jetstream: {max_bytes_required: true} }
  N: { users: [{user: n, password: n}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


def options(store: Path, **overrides: Any) -> Any:
    opts, _ = apply_config(parse_config_text(CONF % {"store": store}))
    return dataclasses.replace(opts, host="127.0.0.1", port=0, http_port=-1, **overrides)


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(options(tmp_path / "store")) as s:
        yield s


async def login(srv: Server, user: str) -> NATS:
    return await nats.connect(srv.client_url.replace("//", f"//{user}:{user}@"))


async def api(nc: NATS, subject: str, body: Any = b"") -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply: dict[str, Any] = json.loads((await nc.request(subject, data, timeout=2)).data)
    return reply


def err(reply: dict[str, Any]) -> int | None:
    e = reply.get("error")
    return int(e["err_code"]) if e else None


async def test_streams_consumers_and_buckets_are_the_accounts(srv: Server, tmp_path: Path) -> None:
    a, b = await login(srv, "a"), await login(srv, "b")
    try:
        for nc, word in ((a, b"from a"), (b, b"from b")):
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            await js.publish("s.1", word)
            await js.add_consumer("S", durable_name="C", ack_policy="explicit")
            kv = await js.create_key_value(bucket="cfg")
            await kv.put("k", word)
        for nc, word in ((a, b"from a"), (b, b"from b")):
            js = nc.jetstream()
            assert (await js.get_msg("S", 1)).data == word
            assert (await (await js.key_value("cfg")).get("k")).value == word
            info = await js.stream_info("S")
            assert info.state.messages == 1 and info.state.consumer_count == 1
            assert sorted(str(s.config.name) for s in await js.streams_info()) == ["KV_cfg", "S"]
        root = tmp_path / "store" / "jetstream"
        for acc in ("A", "B"):
            assert (root / acc / "streams" / "S" / "obs" / "C").is_dir()
            assert (root / acc / "streams" / "KV_cfg").is_dir()
        assert not (root / "$G" / "streams" / "S").exists()
        # B deletes its S; A's is untouched
        await b.jetstream().delete_stream("S")
        assert (await a.jetstream().stream_info("S")).state.messages == 1
    finally:
        await a.close()
        await b.close()


async def test_each_account_recovers_its_own_streams(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with Server(options(store)) as srv:
        for user in ("a", "b"):
            nc = await login(srv, user)
            js = nc.jetstream()
            await js.add_stream(name="KEEP", subjects=["k"])
            for i in range(3 if user == "a" else 5):
                await js.publish("k", b"%d" % i)
            await nc.close()
    async with Server(options(store)) as srv:
        for user, n in (("a", 3), ("b", 5)):
            nc = await login(srv, user)
            assert (await nc.jetstream().stream_info("KEEP")).state.messages == n
            await nc.close()


async def test_an_account_without_jetstream_answers_10039(srv: Server) -> None:
    n = await login(srv, "n")
    try:
        for subject, body in (
            ("$JS.API.INFO", b""),
            ("$JS.API.STREAM.CREATE.X", {"name": "X"}),
            ("$JS.API.STREAM.NAMES", b""),
            ("$JS.API.CONSUMER.INFO.X.Y", b""),
            ("$JS.HUB.API.STREAM.LIST", b""),
        ):
            reply = await api(n, subject, body)
            assert err(reply) == 10039, subject
            assert reply["error"] == {
                "code": 503,
                "err_code": 10039,
                "description": "JetStream not enabled for account",
            }
        names = await api(n, "$JS.API.STREAM.NAMES")
        assert names["type"] == "io.nats.jetstream.api.v1.stream_names_response" and names["streams"] is None
    finally:
        await n.close()


async def test_account_limits_with_nats_servers_codes(srv: Server) -> None:
    lim, r = await login(srv, "l"), await login(srv, "r")
    try:
        info = await api(lim, "$JS.API.INFO")
        assert info["limits"] == {
            "max_memory": 1000,
            "max_storage": 1000,
            "max_streams": 3,
            "max_consumers": 1,
            "max_ack_pending": 20,
            "memory_max_stream_bytes": 900,
            "storage_max_stream_bytes": 800,
            "max_bytes_required": False,
        }
        assert info["domain"] == "HUB"
        create = "$JS.API.STREAM.CREATE."
        assert (
            err(await api(lim, create + "BIG", {"name": "BIG", "subjects": ["big"], "max_bytes": 801}))
            == 10122
        )
        assert (
            err(await api(lim, create + "C5", {"name": "C5", "subjects": ["c5"], "max_consumers": 5}))
            == 10026
        )
        assert err(await api(lim, create + "F", {"name": "F", "subjects": ["f"], "max_bytes": 600})) is None
        # the account's 1000 bytes of file storage: 600 reserved, 500 more do not fit
        assert err(await api(lim, create + "G", {"name": "G", "subjects": ["g"], "max_bytes": 500})) == 10047
        assert (
            err(await api(lim, create + "M", {"name": "M", "subjects": ["m"], "storage": "memory"})) is None
        )
        assert err(await api(lim, create + "U", {"name": "U", "subjects": ["u"]})) is None
        assert err(await api(lim, create + "X", {"name": "X", "subjects": ["x"]})) == 10027  # 3 streams
        # publishes past the account's memory: 10002 (a message counts 300 + 1 (subject) + 16 in memory)
        acks = [json.loads((await lim.request("m", b"x" * 300, timeout=2)).data) for _ in range(4)]
        assert [a.get("seq") for a in acks[:3]] == [1, 2, 3]
        assert acks[3]["error"]["err_code"] == 10002 and acks[3]["stream"] == "M"
        assert acks[0] == {"stream": "M", "domain": "HUB", "seq": 1}
        # consumers: the account's max_ack_pending as the default and the bound, max_consumers per stream
        c1 = await api(
            lim,
            "$JS.API.CONSUMER.CREATE.F.C1",
            {"stream_name": "F", "config": {"name": "C1", "ack_policy": "explicit"}},
        )
        assert c1["config"]["max_ack_pending"] == 20
        over = {"stream_name": "U", "config": {"name": "C2", "ack_policy": "explicit", "max_ack_pending": 21}}
        reply = await api(lim, "$JS.API.CONSUMER.CREATE.U.C2", over)
        assert reply["error"]["description"] == "consumer max ack pending exceeds system limit of 20"
        second = {"stream_name": "F", "config": {"name": "C3", "ack_policy": "explicit"}}
        assert err(await api(lim, "$JS.API.CONSUMER.CREATE.F.C3", second)) == 10026
        assert err(await api(lim, "$JS.API.CONSUMER.CREATE.U.C3", {**second, "stream_name": "U"})) is None
        used = await api(lim, "$JS.API.INFO")
        assert (used["streams"], used["consumers"], used["reserved_storage"], used["memory"]) == (
            3,
            2,
            600,
            951,
        )
        # an account that requires max_bytes
        assert err(await api(r, create + "Z", {"name": "Z", "subjects": ["z"]})) == 10113
        assert err(await api(r, create + "Z", {"name": "Z", "subjects": ["z"], "max_bytes": 1000})) is None
    finally:
        await lim.close()
        await r.close()


async def test_the_domain_api_and_jsz_per_account(srv: Server) -> None:
    a, b = await login(srv, "a"), await login(srv, "b")
    try:
        created = await api(a, "$JS.HUB.API.STREAM.CREATE.D", {"name": "D", "subjects": ["d"]})
        assert created["did_create"] is True
        info = await api(a, "$JS.HUB.API.STREAM.INFO.D")
        assert info["domain"] == "HUB" and info["config"]["name"] == "D"
        assert err(await api(b, "$JS.HUB.API.STREAM.INFO.D")) == 10059  # B has no stream D
        ack = json.loads((await a.request("d", b"x", timeout=2)).data)
        assert ack == {"stream": "D", "domain": "HUB", "seq": 1}
        for _ in range(2):  # a duplicate's ack names the domain too
            dup = json.loads((await a.request("d", b"y", timeout=2, headers={"Nats-Msg-Id": "m"})).data)
        assert dup == {"stream": "D", "domain": "HUB", "seq": 2, "duplicate": True}

        def fetch(path: str) -> Any:
            with urllib.request.urlopen(srv.monitor_url + path, timeout=5) as resp:
                return json.loads(resp.read())

        async def get(path: str) -> Any:
            return await asyncio.to_thread(fetch, path)

        jsz = await get("/jsz?accounts=true&streams=true")
        assert jsz["config"]["domain"] == "HUB" and jsz["streams"] == 1
        assert {d["name"] for d in jsz["account_details"]} == {"A", "B", "L", "R"}
        (one,) = (await get("/jsz?acc=A&streams=true"))["account_details"]
        assert one["name"] == "A" and [s["name"] for s in one["stream_detail"]] == ["D"]
        assert (await get("/accountz?acc=A"))["account_detail"]["jetstream_enabled"] is True
        assert (await get("/accountz?acc=N"))["account_detail"]["jetstream_enabled"] is False
    finally:
        await a.close()
        await b.close()
