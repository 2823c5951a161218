"""Accounts, jetpy against nats-server 2.9.10 and 2.15.1: one configuration with accounts,
exports and imports (streams and services, public and private), JetStream limits per account and
per-user permissions, the same clients doing the same things on both, and every reply compared.

Each server runs the configuration below as a process on free ports with its own store. A
scenario step goes to both; JetStream API replies are compared field by field once volatile
values (times, ``created``, ``cluster``) are dropped, and fields one version writes and the
other does not know (:data:`ONE_SIDED`: 2.10+'s ``compression``, ``consumer_limits``,
``reserved_*``, ``api.level``, 2.12+'s ``metadata`` ...) are left out only where one side lacks
them. Core messages are compared as (subject, reply?, data, headers) with the request info's
round trip time dropped; protocol errors by their -ERR text.

Deliberate differences, asserted where they show:

* an identical STREAM.CREATE at the account's ``max_streams``: 2.9.10 answers 10027, 2.15.1
  and jetpy answer with the existing stream (jetpy checks an existing stream first);
* publishes into a memory stream near the account's ``max_mem``: 2.9.10 refuses (10002) the
  fifth message already and takes later ones again (its memory accounting), 2.15.1 and jetpy
  refuse exactly those that would pass the limit; compared with 2.15.1 only, with what follows
  from them (the account's memory, the stream's state).
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, REFERENCE, REFERENCE_NEWEST, Proc, start_process

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

CONF = """
jetstream { store_dir: %(store)s }
accounts {
  A: {
    users: [
      {user: a, password: a}
      {user: ar, password: ar, permissions: {publish: {deny: "secret.>"}, subscribe: {deny: "secret.>"}}}
      {user: resp, password: resp, permissions: {publish: "none", subscribe: "svc.>", allow_responses: true}}
    ]
    jetstream: {max_mem: 2000, max_file: 100000, max_streams: 3, max_consumers: 2, max_ack_pending: 50,
                memory_max_stream_bytes: 1500, store_max_stream_bytes: 50000}
    exports: [
      {stream: "feed.>"}
      {stream: "private.>", accounts: [B]}
      {service: "svc.>"}
    ]
  }
  B: {
    users: [{user: b, password: b}]
    jetstream: enabled
    imports: [
      {stream: {account: A, subject: "feed.>"}, prefix: "a"}
      {stream: {account: A, subject: "private.>"}}
      {service: {account: A, subject: "svc.echo"}, to: "echo"}
    ]
  }
  C: { users: [{user: c, password: c}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""

# times and leaders, and the API level (2.9.10 writes none, 2.15.1 its 5, jetpy 2.11's 1)
VOLATILE = frozenset({"created", "first_ts", "last_ts", "time", "ts", "cluster", "level"})
# fields one version writes and another does not know: compared only when both sides have them
ONE_SIDED = frozenset(
    {
        "compression",
        "consumer_limits",
        "allow_msg_ttl",
        "reserved_memory",
        "reserved_storage",
        "level",
        "metadata",
        "allow_atomic",
        "allow_msg_counter",
        "allow_msg_schedules",
        "persist_mode",
        "allow_batched",
        "priority_timeout",
        "inactive_threshold",
    }
)

REFERENCES = {"2.9.10": REFERENCE, "2.15.1": REFERENCE_NEWEST}


def compare(ref: Any, jp: Any, path: str = "") -> list[str]:
    """Where ``jp`` differs from ``ref`` (see the module for what is not compared)."""
    if isinstance(ref, dict) and isinstance(jp, dict):
        out: list[str] = []
        for k in sorted(set(ref) | set(jp)):
            if k in VOLATILE:
                continue
            if k not in ref or k not in jp:
                if k not in ONE_SIDED:
                    out.append(f"{path}.{k}: {'missing' if k not in jp else 'extra'} in jetpy")
                continue
            out += compare(ref[k], jp[k], f"{path}.{k}")
        return out
    if isinstance(ref, list) and isinstance(jp, list) and len(ref) == len(jp):
        return [
            d for i, (r, j) in enumerate(zip(ref, jp, strict=True)) for d in compare(r, j, f"{path}[{i}]")
        ]
    return [] if ref == jp else [f"{path}: {ref!r} (reference) != {jp!r} (jetpy)"]


async def start(binary: list[str], tmp: Path, name: str) -> Proc:
    conf = tmp / f"{name}.conf"
    conf.write_text(CONF % {"store": tmp / f"{name}-store"})
    return await asyncio.to_thread(
        start_process, [*binary, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], tmp / f"{name}.log"
    )


class Side:
    """One server and its clients, by user name; what its clients were told asynchronously."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.clients: dict[str, Client] = {}
        self.errors: dict[str, list[str]] = {}

    async def client(self, user: str) -> Client:
        if user not in self.clients:
            errors = self.errors.setdefault(user, [])

            async def on_error(e: Exception) -> None:
                errors.append(str(e))

            self.clients[user] = await nats.connect(
                self.proc.url.replace("//", f"//{user}:{user}@"), error_cb=on_error, allow_reconnect=False
            )
        return self.clients[user]

    async def close(self) -> None:
        for nc in self.clients.values():
            await nc.close()


async def request(side: Side, user: str, subject: str, body: Any = b"", wait: float = 2.0) -> Any:
    nc = await side.client(user)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        msg = await nc.request(subject, raw, timeout=wait)
    except nats.errors.NoRespondersError:
        return {"_status": 503}
    except nats.errors.TimeoutError:
        return None
    try:
        return json.loads(msg.data)
    except ValueError:
        return {"_data": msg.data.decode(errors="replace"), "_headers": _headers(msg.headers)}


def _headers(headers: dict[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(headers or {})
    info = out.get("Nats-Request-Info")
    if info is not None:  # the requester's round trip time differs by nature
        out["Nats-Request-Info"] = {k: v for k, v in json.loads(info).items() if k != "rtt"}
    return out


@pytest.fixture(params=list(REFERENCES))
async def sides(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, Side, Side]]:
    version = request.param
    binary = REFERENCES[version]
    if binary is None:
        pytest.skip(f"nats-server {version} is not installed")
    ref = Side(await start([binary], tmp_path, "ref"))
    jp = Side(await start(JETPY_SERVER, tmp_path, "jetpy"))
    try:
        yield version, ref, jp
    finally:
        for side in (ref, jp):
            await side.close()
            side.proc.stop(signal.SIGKILL)


Step = Callable[[Side], Any]


async def both(ref: Side, jp: Side, step: Step) -> tuple[Any, Any]:
    return await asyncio.gather(step(ref), step(jp))


async def test_accounts_behave_like_nats_server(sides: tuple[str, Side, Side]) -> None:
    version, ref, jp = sides
    problems: list[str] = []

    async def same(
        label: str, user: str, subject: str, body: Any = b"", wait: float = 2.0, newest_only: bool = False
    ) -> Any:
        r, j = await asyncio.gather(
            request(ref, user, subject, body, wait), request(jp, user, subject, body, wait)
        )
        if not (newest_only and version == "2.9.10"):
            problems.extend(f"{label}: {d}" for d in compare(r, j))
        return r

    # -- JetStream per account: INFO, 10039, the same names in two accounts ---------------------------
    for user in ("a", "b", "c"):
        await same(f"INFO as {user}", user, "$JS.API.INFO")
    await same("C has no JetStream", "c", "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s"]})
    await same("C NAMES", "c", "$JS.API.STREAM.NAMES")
    for user in ("a", "b"):
        await same(f"{user} creates S", user, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
        await same(f"{user} publishes", user, "s.1", b"from " + user.encode())
    await same("A reads its S", "a", "$JS.API.STREAM.MSG.GET.S", {"seq": 1})
    await same("B reads its S", "b", "$JS.API.STREAM.MSG.GET.S", {"seq": 1})
    await same("A NAMES", "a", "$JS.API.STREAM.NAMES")
    await same("B deletes its S", "b", "$JS.API.STREAM.DELETE.S")
    await same("A's S is untouched", "a", "$JS.API.STREAM.INFO.S")
    await same("B's S is gone", "b", "$JS.API.STREAM.INFO.S")

    # -- A's limits, in nats-server's order -----------------------------------------------------------------
    create = "$JS.API.STREAM.CREATE."
    await same(
        "stream bytes over the account's",
        "a",
        create + "BIG",
        {"name": "BIG", "subjects": ["big"], "max_bytes": 50001},
    )
    await same(
        "memory stream bytes",
        "a",
        create + "MB",
        {"name": "MB", "subjects": ["mb"], "storage": "memory", "max_bytes": 1501},
    )
    await same(
        "max_consumers over the account's",
        "a",
        create + "MC",
        {"name": "MC", "subjects": ["mc"], "max_consumers": 3},
    )
    await same("memory stream", "a", create + "M", {"name": "M", "subjects": ["m"], "storage": "memory"})
    await same("reservation", "a", create + "R", {"name": "R", "subjects": ["r"], "max_bytes": 40000})
    await same("a fourth stream", "a", create + "X", {"name": "X", "subjects": ["x"]})
    for i in range(7):  # 300 bytes + subject + 16 each: the sixth and seventh pass the account's 2000
        await same(f"publish {i} into memory", "a", "m", b"x" * 300, newest_only=True)
    await same(
        "consumer defaults to the account's max_ack_pending",
        "a",
        "$JS.API.CONSUMER.CREATE.S.C1",
        {"stream_name": "S", "config": {"name": "C1", "ack_policy": "explicit"}},
    )
    await same(
        "max_ack_pending over the account's",
        "a",
        "$JS.API.CONSUMER.CREATE.S.C2",
        {"stream_name": "S", "config": {"name": "C2", "ack_policy": "explicit", "max_ack_pending": 51}},
    )
    await same(
        "second consumer", "a", "$JS.API.CONSUMER.CREATE.S.C3", {"stream_name": "S", "config": {"name": "C3"}}
    )
    await same(
        "third consumer", "a", "$JS.API.CONSUMER.CREATE.S.C4", {"stream_name": "S", "config": {"name": "C4"}}
    )
    await same("A's INFO after", "a", "$JS.API.INFO", newest_only=True)
    identical = await asyncio.gather(
        request(ref, "a", create + "M", {"name": "M", "subjects": ["m"], "storage": "memory"}),
        request(jp, "a", create + "M", {"name": "M", "subjects": ["m"], "storage": "memory"}),
    )
    assert identical[1]["did_create"] is True  # the existing stream, whatever max_streams says
    if version != "2.9.10":
        problems.extend(f"identical create: {d}" for d in compare(*identical))

    # -- a user of B reaches none of A's streams by any API path --------------------------------------------
    for subject, body in (
        ("$JS.API.STREAM.INFO.M", b""),
        ("$JS.API.STREAM.MSG.GET.M", {"seq": 1}),
        ("$JS.API.STREAM.PURGE.M", b""),
        ("$JS.API.STREAM.DELETE.M", b""),
        ("$JS.API.CONSUMER.CREATE.M.X", {"stream_name": "M", "config": {"name": "X"}}),
        ("$JS.API.CONSUMER.INFO.S.C1", b""),
        ("$JS.API.CONSUMER.DELETE.S.C1", b""),
    ):
        await same(f"B asks for A's {subject}", "b", subject, body)
    await same("A's M still there", "a", "$JS.API.STREAM.INFO.M", newest_only=True)

    # -- core: stream imports, a private export, a service, per-user permissions ---------------------------
    got: dict[str, list[Any]] = {"ref": [], "jp": []}

    async def subscribe(side: Side, key: str) -> None:
        b = await side.client("b")
        c = await side.client("c")

        async def on_msg(m: Any) -> None:
            got[key].append((m.subject, m.data, _headers(m.headers)))

        await b.subscribe("a.feed.>", cb=on_msg)
        await b.subscribe("private.>", cb=on_msg)
        await c.subscribe(">", cb=on_msg)  # C imports nothing
        await b.flush()
        await c.flush()

        async def echo(m: Any) -> None:
            await resp.publish(
                m.reply, m.data[::-1], headers={"Seen-Request-Info": json.dumps(_headers(m.headers))}
            )

        resp = await side.client("resp")
        await resp.subscribe("svc.>", cb=echo)
        await resp.flush()

    await asyncio.gather(subscribe(ref, "ref"), subscribe(jp, "jp"))

    async def publish(side: Side) -> None:
        a = await side.client("a")
        await a.publish("feed.1", b"public")
        await a.publish("private.1", b"private")
        await a.publish("other", b"not exported")
        await a.flush()

    await both(ref, jp, publish)
    await asyncio.sleep(0.3)
    problems.extend(f"stream imports: {d}" for d in compare(sorted(got["ref"]), sorted(got["jp"])))
    assert sorted(got["jp"]) == [("a.feed.1", b"public", {}), ("private.1", b"private", {})]

    reply = await same("B asks A's service", "b", "echo", b"hello")
    assert reply["_data"] == "olleh"
    await same("B's own subject, not imported", "b", "svc.echo", b"hello", wait=0.5)

    async def violations(side: Side) -> list[str]:
        ar = await side.client("ar")
        await ar.publish("secret.x", b"no")
        await ar.subscribe("secret.>")
        await ar.flush()
        await asyncio.sleep(0.2)
        return side.errors["ar"]

    refused = await both(ref, jp, violations)
    problems.extend(f"permissions: {d}" for d in compare(*refused))
    assert len(refused[1]) == 2, refused

    assert problems == [], "\n".join(problems)


async def test_no_api_path_reaches_another_accounts_streams(sides: tuple[str, Side, Side]) -> None:
    """A user of A names B's streams, consumers and bucket on every JetStream API path (and
    subscribes to everything, and mirrors B's stream by name): nothing of B's comes back, B's
    data are intact, and every answer is nats-server's."""
    _version, ref, jp = sides
    problems: list[str] = []
    secret = b"b-secret"
    leaked: dict[str, list[bytes]] = {"ref": [], "jp": []}

    async def setup(side: Side, key: str) -> None:
        b = await side.client("b")
        await request(
            side, "b", "$JS.API.STREAM.CREATE.BS", {"name": "BS", "subjects": ["bs.>"], "allow_direct": True}
        )
        for i in range(3):
            await request(side, "b", f"bs.{i}", secret + b" %d" % i)
        await request(
            side,
            "b",
            "$JS.API.CONSUMER.CREATE.BS.BC",
            {"stream_name": "BS", "config": {"durable_name": "BC", "ack_policy": "explicit"}},
        )
        push = {"durable_name": "BP", "deliver_subject": "bdeliver", "ack_policy": "none"}
        await request(side, "b", "$JS.API.CONSUMER.CREATE.BS.BP", {"stream_name": "BS", "config": push})
        kv = await b.jetstream().create_key_value(bucket="bkv")
        await kv.put("k", secret + b" kv")
        a = await side.client("a")

        async def everything(m: Any) -> None:
            if secret in m.data:
                leaked[key].append(m.data)

        await a.subscribe(">", cb=everything)
        await a.subscribe("bdeliver", cb=everything)
        await a.flush()

    await asyncio.gather(setup(ref, "ref"), setup(jp, "jp"))
    rows: list[tuple[str, Any]] = [
        ("$JS.API.STREAM.INFO.BS", b""),
        ("$JS.API.STREAM.MSG.GET.BS", {"seq": 1}),
        ("$JS.API.STREAM.MSG.GET.KV_bkv", {"last_by_subj": "$KV.bkv.k"}),
        ("$JS.API.DIRECT.GET.BS", {"seq": 1}),
        ("$JS.API.DIRECT.GET.KV_bkv", {"last_by_subj": "$KV.bkv.k"}),
        ("$JS.API.STREAM.MSG.DELETE.BS", {"seq": 1}),
        ("$JS.API.STREAM.PURGE.BS", b""),
        ("$JS.API.STREAM.UPDATE.BS", {"name": "BS", "subjects": ["bs.>"], "max_msgs": 1}),
        ("$JS.API.STREAM.SNAPSHOT.BS", {"deliver_subject": "a.snapshot"}),
        ("$JS.API.CONSUMER.CREATE.BS.X", {"stream_name": "BS", "config": {"name": "X"}}),
        ("$JS.API.CONSUMER.INFO.BS.BC", b""),
        ("$JS.API.CONSUMER.NAMES.BS", b""),
        ("$JS.API.CONSUMER.LIST.BS", b""),
        ("$JS.API.CONSUMER.MSG.NEXT.BS.BC", {"batch": 1, "expires": 200_000_000}),
        ("$JS.API.CONSUMER.DELETE.BS.BC", b""),
        ("$JS.API.STREAM.DELETE.BS", b""),
        ("$JS.API.STREAM.NAMES", {"subject": "bs.>"}),
        ("$KV.bkv.k", b"overwrite from A"),
        ("$JS.API.STREAM.CREATE.MIRROR", {"name": "MIRROR", "mirror": {"name": "BS"}}),
        ("$JS.API.STREAM.CREATE.CAPTURE", {"name": "CAPTURE", "subjects": ["bs.>"]}),
    ]
    for subject, body in rows:
        r, j = await asyncio.gather(
            request(ref, "a", subject, body, 0.5), request(jp, "a", subject, body, 0.5)
        )
        if subject.endswith(".MIRROR"):  # (2.9.10 writes no mirror block in a create response)
            for doc in (r, j):
                doc.pop("mirror", None)
        problems.extend(f"A: {subject}: {d}" for d in compare(r, j))
        assert secret not in json.dumps(j).encode(), subject

    async def b_publishes_more(side: Side) -> None:
        await request(side, "b", "bs.9", secret + b" 9")

    await both(ref, jp, b_publishes_more)
    await asyncio.sleep(0.3)
    for subject in ("$JS.API.STREAM.INFO.MIRROR", "$JS.API.STREAM.INFO.CAPTURE"):
        r, j = await asyncio.gather(request(ref, "a", subject), request(jp, "a", subject))
        for doc in (r, j):
            doc.pop("mirror", None)  # (how each reports an origin it cannot find)
        problems.extend(f"A: {subject}: {d}" for d in compare(r, j))
        assert j["state"]["messages"] == 0, subject  # nothing of B's came into A's streams
    for subject in ("$JS.API.STREAM.INFO.BS", "$JS.API.CONSUMER.INFO.BS.BC", "$JS.API.CONSUMER.INFO.BS.BP"):
        r, j = await asyncio.gather(request(ref, "b", subject), request(jp, "b", subject))
        problems.extend(f"B: {subject}: {d}" for d in compare(r, j))
        assert "error" not in j, subject
    assert (await request(jp, "b", "$JS.API.STREAM.INFO.BS"))["state"]["messages"] == 4
    kv = await (await (await jp.client("b")).jetstream().key_value("bkv")).get("k")
    assert kv.value == secret + b" kv"
    assert leaked == {"ref": [], "jp": []}
    assert problems == [], "\n".join(problems)
