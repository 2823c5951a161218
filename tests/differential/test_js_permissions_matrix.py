"""The JetStream permission matrix: every path by which a user could read, capture or write a
subject, each allowed and denied, against jetpy; the paths nats-server also guards are run
against nats-server 2.9.10 and 2.15.1 too and must answer alike.

The user ``u`` may publish to the JetStream API, ``pub.>`` and acks, and subscribe to ``pub.>``
and its inboxes; ``secret.>`` is neither. The admin (no permissions) keeps streams and messages
on both sides: ``SECRET`` (``secret.a.>``), ``PUB`` (``pub.a.>``), ``MIX`` (``pub.m`` and
``secret.m``) and the KV bucket ``vault`` (``$KV.vault.>``). A row's outcome is what the client
sees: ``ok``, ``error <err_code>`` (a JetStream API error), ``status <code>`` (a direct get or
pull status), ``-ERR`` (the connection's permissions violation) or ``nothing``.

Rows marked ``beyond`` are the leaks nats-server has (it checks only the API subject): jetpy
refuses them with 403 / err_code 10403 and they are not compared. A row's allowed twin shows the
refusal is about the subject, not the path.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, newest_cmd, reference_cmd, start_process

pytestmark = pytest.mark.differential

CONF = """
authorization {
  users [
    {user: admin, password: admin}
    {user: u, password: u, permissions: {
      publish: {allow: ["$JS.API.>", "pub.>", "$JS.ACK.>"]},
      subscribe: {allow: ["pub.>", "_INBOX.>", "$KV.open.>"]}}}
    {user: x, password: x, permissions: {
      publish: {allow: ["$JS.API.>", "pub.>"], deny: ["$JS.API.STREAM.CREATE.>", "$JS.API.CONSUMER.MSG.NEXT.SECRET.>"]},
      subscribe: {allow: ["pub.>", "_INBOX.>"]}}}
  ]
}
"""
DENIED = "error 10403"


@dataclass
class Env:
    u: Client
    x: Client
    admin: Client
    errors: dict[str, list[str]]
    secret_ack: str = ""  # the ack subject of a SECRET message delivered to the admin


Action = Callable[[Env], Awaitable[str]]


@dataclass(frozen=True)
class Row:
    name: str
    action: Action
    expect: str  # jetpy's outcome
    beyond: bool = False  # a leak nats-server has: jetpy alone is checked


async def api(nc: Client, subject: str, body: object = None, env: Env | None = None, who: str = "u") -> str:
    data = json.dumps(body).encode() if body is not None else b""
    before = len(env.errors[who]) if env else 0
    try:
        msg = await nc.request(subject, data, timeout=1.0)
    except nats.errors.NoRespondersError:
        return "no responders"
    except nats.errors.TimeoutError:
        if env and len(env.errors[who]) > before and "permissions violation" in env.errors[who][-1].lower():
            return "-ERR"
        return "nothing"
    status = msg.headers.get("Status") if msg.headers else None
    if status:
        return f"status {status}"
    if not msg.data:
        return "empty"
    try:
        doc = json.loads(msg.data)
    except ValueError:
        return "ok"  # a message (a pull or a direct get)
    if isinstance(doc, dict) and "error" in doc:
        return f"error {doc['error']['err_code']}"
    return "ok"


def stream(name: str, subjects: list[str], **extra: object) -> dict[str, object]:
    return {"name": name, "subjects": subjects, "storage": "memory", "allow_direct": True, **extra}


async def pull(nc: Client, subject: str, env: Env | None = None, who: str = "u") -> str:
    """A pull request on its own inbox (its messages keep their stream subjects)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    before = len(env.errors[who]) if env else 0
    await nc.publish(subject, json.dumps({"batch": 1, "expires": 300_000_000}).encode(), reply=inbox)
    try:
        m = await sub.next_msg(timeout=1.0)
    except nats.errors.TimeoutError:
        if env and len(env.errors[who]) > before and "permissions violation" in env.errors[who][-1].lower():
            return "-ERR"
        return "nothing"
    finally:
        await sub.unsubscribe()
    status = m.headers.get("Status") if m.headers else None
    return f"status {status}" if status else "ok"


async def core_sub(env: Env, subject: str) -> str:
    before = len(env.errors["u"])
    await env.u.subscribe(subject)
    await env.u.flush(timeout=1)
    await asyncio.sleep(0.05)
    return "-ERR" if len(env.errors["u"]) > before else "ok"


async def direct_batch_mix(env: Env) -> str:
    """A batch over MIX (pub.m then secret.m): the allowed message comes, then the refusal."""
    inbox = env.u.new_inbox()
    sub = await env.u.subscribe(inbox)
    await env.u.publish("$JS.API.DIRECT.GET.MIX", json.dumps({"seq": 1, "batch": 5}).encode(), reply=inbox)
    got = []
    try:
        while True:
            m = await sub.next_msg(timeout=0.5)
            status = m.headers.get("Status") if m.headers else None
            got.append(f"status {status}" if status else m.subject if not m.data else m.data.decode())
            if status:
                break
    except nats.errors.TimeoutError:
        pass
    return ",".join(got)


async def next_secret_via_ack(env: Env) -> str:
    """u acks the admin's SECRET delivery with +NXT and a reply of its own: the ack is taken,
    the next message is not sent to u."""
    inbox = env.u.new_inbox()
    sub = await env.u.subscribe(inbox)
    await env.u.publish(env.secret_ack, b"+NXT", reply=inbox)
    try:
        await sub.next_msg(timeout=0.5)
    except nats.errors.TimeoutError:
        return "nothing"
    return "msg"


async def kv_get(env: Env, bucket: str, key: str) -> str:
    kv = await env.u.jetstream().key_value(bucket)
    try:
        entry = await kv.get(key)
    except nats.js.errors.APIError as e:
        return f"error {e.err_code or e.code}"
    except nats.js.errors.KeyNotFoundError:
        return "not found"
    return "ok" if entry.value else "empty"


ROWS = [
    # -- what nats-server guards too: the API and pull subjects, core subscriptions
    Row(
        "stream_create_api_subject_denied",
        lambda e: api(e.x, "$JS.API.STREAM.CREATE.XS", stream("XS", ["pub.x.>"]), e, "x"),
        "-ERR",
    ),
    Row(
        "stream_create_allowed",
        lambda e: api(e.u, "$JS.API.STREAM.CREATE.UP", stream("UP", ["pub.u.>"])),
        "ok",
    ),
    Row(
        "pull_subject_denied",
        lambda e: api(
            e.x, "$JS.API.CONSUMER.MSG.NEXT.SECRET.C", {"batch": 1, "expires": 300_000_000}, e, "x"
        ),
        "-ERR",
    ),
    Row(
        "pull_allowed",
        lambda e: pull(e.u, "$JS.API.CONSUMER.MSG.NEXT.PUB.C"),
        "ok",
    ),
    Row("core_subscribe_denied", lambda e: core_sub(e, "secret.a.>"), "-ERR"),
    Row("core_subscribe_allowed", lambda e: core_sub(e, "pub.a.>"), "ok"),
    Row("msg_get_allowed", lambda e: api(e.u, "$JS.API.STREAM.MSG.GET.PUB", {"seq": 1}), "ok"),
    Row("direct_get_allowed", lambda e: api(e.u, "$JS.API.DIRECT.GET.PUB", {"seq": 1}), "ok"),
    Row("direct_get_last_allowed", lambda e: api(e.u, "$JS.API.DIRECT.GET.MIX.pub.m"), "ok"),
    Row(
        "consumer_filtered_allowed",
        lambda e: api(
            e.u, "$JS.API.CONSUMER.CREATE.MIX", {"stream_name": "MIX", "config": {"filter_subject": "pub.m"}}
        ),
        "ok",
    ),
    Row(
        "push_deliver_allowed",
        lambda e: api(
            e.u,
            "$JS.API.CONSUMER.CREATE.PUB",
            {"stream_name": "PUB", "config": {"deliver_subject": "pub.deliver"}},
        ),
        "ok",
    ),
    Row("purge_allowed", lambda e: api(e.u, "$JS.API.STREAM.PURGE.UP"), "ok"),
    Row("msg_delete_allowed", lambda e: api(e.u, "$JS.API.STREAM.MSG.DELETE.PUB", {"seq": 2}), "ok"),
    Row(
        "update_allowed",
        lambda e: api(e.u, "$JS.API.STREAM.UPDATE.UP", stream("UP", ["pub.u.>"], max_msgs=10)),
        "ok",
    ),
    Row("delete_allowed", lambda e: api(e.u, "$JS.API.STREAM.DELETE.UP"), "ok"),
    Row("kv_get_allowed", lambda e: kv_get(e, "open", "k"), "ok"),
    # -- beyond nats-server: what the request would read, capture or write
    Row(
        "stream_create_capturing_secret",
        lambda e: api(e.u, "$JS.API.STREAM.CREATE.CAP", stream("CAP", ["secret.b.>"])),
        DENIED,
        True,
    ),
    Row(
        "stream_create_default_subject",
        lambda e: api(e.u, "$JS.API.STREAM.CREATE.NOSUBJ", {"name": "NOSUBJ", "storage": "memory"}),
        DENIED,
        True,
    ),
    Row(
        "stream_republish_to_secret",
        lambda e: api(
            e.u,
            "$JS.API.STREAM.CREATE.RP",
            stream("RP", ["pub.r.>"], republish={"src": ">", "dest": "secret.r"}),
        ),
        DENIED,
        True,
    ),
    Row(
        "stream_update_secret",
        lambda e: api(e.u, "$JS.API.STREAM.UPDATE.SECRET", stream("SECRET", ["secret.a.>"], max_msgs=1)),
        DENIED,
        True,
    ),
    Row("stream_purge_secret", lambda e: api(e.u, "$JS.API.STREAM.PURGE.SECRET"), DENIED, True),
    Row(
        "stream_msg_delete_secret",
        lambda e: api(e.u, "$JS.API.STREAM.MSG.DELETE.SECRET", {"seq": 1}),
        DENIED,
        True,
    ),
    Row("stream_delete_secret", lambda e: api(e.u, "$JS.API.STREAM.DELETE.SECRET"), DENIED, True),
    Row("msg_get_secret", lambda e: api(e.u, "$JS.API.STREAM.MSG.GET.SECRET", {"seq": 1}), DENIED, True),
    Row(
        "msg_get_mixed_stream_secret_message",
        lambda e: api(e.u, "$JS.API.STREAM.MSG.GET.MIX", {"seq": 2}),
        DENIED,
        True,
    ),
    Row(
        "msg_get_mixed_stream_public_message",
        lambda e: api(e.u, "$JS.API.STREAM.MSG.GET.MIX", {"seq": 1}),
        "ok",
        True,
    ),
    Row("direct_get_secret", lambda e: api(e.u, "$JS.API.DIRECT.GET.SECRET", {"seq": 1}), "status 403", True),
    Row("direct_get_last_secret", lambda e: api(e.u, "$JS.API.DIRECT.GET.MIX.secret.m"), "status 403", True),
    Row("direct_get_batch_stops_at_secret", direct_batch_mix, "PM,status 403", True),
    # jetpy's bulk read reads as a consumer does: its filters, else all the stream stores
    Row("bulk_read_allowed", lambda e: api(e.u, "$JS.API.JETPY.BULK.PUB", {}), "ok", True),
    Row("bulk_read_secret", lambda e: api(e.u, "$JS.API.JETPY.BULK.SECRET", {}), DENIED, True),
    Row("bulk_read_mixed_unfiltered", lambda e: api(e.u, "$JS.API.JETPY.BULK.MIX", {}), DENIED, True),
    Row(
        "bulk_read_mixed_filtered",
        lambda e: api(e.u, "$JS.API.JETPY.BULK.MIX", {"filter_subjects": ["pub.m"]}),
        "ok",
        True,
    ),
    Row(
        "bulk_read_filter_secret",
        lambda e: api(e.u, "$JS.API.JETPY.BULK.MIX", {"filter_subjects": ["pub.m", "secret.m"]}),
        DENIED,
        True,
    ),
    Row(
        "consumer_unfiltered_on_secret",
        lambda e: api(e.u, "$JS.API.CONSUMER.CREATE.SECRET", {"stream_name": "SECRET", "config": {}}),
        DENIED,
        True,
    ),
    Row(
        "consumer_unfiltered_on_mixed",
        lambda e: api(e.u, "$JS.API.CONSUMER.CREATE.MIX", {"stream_name": "MIX", "config": {}}),
        DENIED,
        True,
    ),
    Row(
        "consumer_filter_secret",
        lambda e: api(
            e.u,
            "$JS.API.CONSUMER.CREATE.MIX.C2.secret.m",
            {"stream_name": "MIX", "config": {"name": "C2", "filter_subject": "secret.m"}},
        ),
        DENIED,
        True,
    ),
    Row(
        "consumer_durable_secret",
        lambda e: api(
            e.u,
            "$JS.API.CONSUMER.DURABLE.CREATE.SECRET.D",
            {"stream_name": "SECRET", "config": {"durable_name": "D"}},
        ),
        DENIED,
        True,
    ),
    Row(
        "push_deliver_to_secret",
        lambda e: api(
            e.u,
            "$JS.API.CONSUMER.CREATE.PUB",
            {"stream_name": "PUB", "config": {"deliver_subject": "secret.inject"}},
        ),
        DENIED,
        True,
    ),
    Row(
        "pull_from_secret_consumer",
        lambda e: pull(e.u, "$JS.API.CONSUMER.MSG.NEXT.SECRET.C"),
        "status 403",
        True,
    ),
    Row("next_via_ack_on_secret_consumer", next_secret_via_ack, "nothing", True),
    Row("kv_get_secret_bucket", lambda e: kv_get(e, "vault", "k"), DENIED, True),
    Row(
        "mirror_of_secret",
        lambda e: api(e.u, "$JS.API.STREAM.CREATE.MS", {"name": "MS", "mirror": {"name": "SECRET"}}),
        DENIED,
        True,
    ),
    Row(
        "source_filtered_to_secret",
        lambda e: api(
            e.u,
            "$JS.API.STREAM.CREATE.SS",
            {"name": "SS", "sources": [{"name": "MIX", "filter_subject": "secret.m"}]},
        ),
        DENIED,
        True,
    ),
    Row(
        "mirror_of_a_stream_not_there_yet",
        lambda e: api(e.u, "$JS.API.STREAM.CREATE.MN", {"name": "MN", "mirror": {"name": "NOTYET"}}),
        DENIED,
        True,
    ),
    Row(
        "source_filtered_public_allowed",
        lambda e: api(
            e.u,
            "$JS.API.STREAM.CREATE.SP",
            {"name": "SP", "subjects": ["pub.sp"], "sources": [{"name": "MIX", "filter_subject": "pub.m"}]},
        ),
        "ok",
        True,
    ),
    Row(
        "snapshot_secret",
        lambda e: api(e.u, "$JS.API.STREAM.SNAPSHOT.SECRET", {"deliver_subject": "pub.snap"}),
        DENIED,
        True,
    ),
    Row(
        "restore_capturing_secret",
        lambda e: api(e.u, "$JS.API.STREAM.RESTORE.RS", {"config": stream("RS", ["secret.r.>"])}),
        DENIED,
        True,
    ),
    Row(
        "pause_push_consumer_delivering_to_secret",
        lambda e: api(e.u, "$JS.API.CONSUMER.PAUSE.PUB.PD", {"pause_until": "2100-01-01T00:00:00Z"}),
        DENIED,
        True,
    ),
    Row(
        "pause_push_consumer_delivering_to_pub_allowed",
        lambda e: api(e.u, "$JS.API.CONSUMER.PAUSE.PUB.PP", {"pause_until": "2100-01-01T00:00:00Z"}),
        "ok",
        True,
    ),
    Row("pause_pull_consumer_allowed", lambda e: api(e.u, "$JS.API.CONSUMER.PAUSE.SECRET.C", {}), "ok", True),
    Row(
        "unpin_touches_no_subject",
        lambda e: api(e.u, "$JS.API.CONSUMER.UNPIN.SECRET.G", {"group": "g"}),
        "ok",
        True,
    ),
    Row(
        "restore_public_allowed",
        lambda e: api(e.u, "$JS.API.STREAM.RESTORE.RP2", {"config": stream("RP2", ["pub.rp.>"])}),
        "ok",
        True,
    ),
]


async def prepare(url: str) -> Env:
    errors: dict[str, list[str]] = {"u": [], "x": [], "admin": []}

    def recorder(who: str) -> Callable[[Exception], Awaitable[None]]:
        async def cb(e: Exception) -> None:
            errors[who].append(str(e))

        return cb

    clients = {
        who: await nats.connect(url, user=who, password=who, allow_reconnect=False, error_cb=recorder(who))
        for who in errors
    }
    admin = clients["admin"]
    for cfg in (
        stream("SECRET", ["secret.a.>"]),
        stream("PUB", ["pub.a.>"]),
        stream("MIX", ["pub.m", "secret.m"]),
    ):
        assert await api(admin, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg) == "ok"
    for subject, data in (
        ("secret.a.1", b"S1"),
        ("pub.a.1", b"P1"),
        ("pub.a.2", b"P2"),
        ("pub.m", b"PM"),
        ("secret.m", b"SM"),
    ):
        await admin.jetstream().publish(subject, data)
    for s in ("SECRET", "PUB"):
        body = {"stream_name": s, "config": {"durable_name": "C", "ack_policy": "explicit"}}
        assert await api(admin, f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.C", body) == "ok"
    for name, deliver in (("PD", "secret.deliver"), ("PP", "pub.deliver")):
        body = {"stream_name": "PUB", "config": {"durable_name": name, "deliver_subject": deliver}}
        assert await api(admin, f"$JS.API.CONSUMER.DURABLE.CREATE.PUB.{name}", body) == "ok"
    groups: dict[str, object] = {
        "durable_name": "G",
        "ack_policy": "explicit",
        "priority_policy": "overflow",
        "priority_groups": ["g"],
    }
    assert (
        await api(
            admin, "$JS.API.CONSUMER.DURABLE.CREATE.SECRET.G", {"stream_name": "SECRET", "config": groups}
        )
        == "ok"
    )
    js = admin.jetstream()
    for bucket in ("vault", "open"):
        kv = await js.create_key_value(bucket=bucket, storage="memory")
        await kv.put("k", b"v")
    env = Env(clients["u"], clients["x"], admin, errors)
    pull = await js.pull_subscribe_bind("C", stream="SECRET")
    (m,) = await pull.fetch(1, timeout=2)
    env.secret_ack = m.reply
    return env


def _start(cmd: list[str], tmp: Path, name: str) -> Proc:
    conf = tmp / f"{name}.conf"
    conf.write_text(CONF)
    return start_process(
        [*cmd, "-c", str(conf), "-js", "-sd", str(tmp / f"{name}-store")], tmp / f"{name}.log"
    )


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp = tmp_path_factory.mktemp("jsperms")
    procs: dict[str, Proc] = {}
    try:
        procs["jetpy"] = _start([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1"], tmp, "jetpy")
        for name, cmd in (("2.9.10", reference_cmd), ("2.15.1", lambda _t: newest_cmd())):
            try:
                procs[name] = _start(cmd(tmp), tmp, name)
            except pytest.skip.Exception:
                continue
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


async def run_matrix(url: str, rows: list[Row]) -> dict[str, str]:
    env = await prepare(url)
    try:
        return {row.name: await row.action(env) for row in rows}
    finally:
        for nc in (env.u, env.x, env.admin):
            await nc.close()


async def test_matrix_on_jetpy(servers: dict[str, Proc]) -> None:
    outcomes = await run_matrix(servers["jetpy"].url, ROWS)
    wrong = {r.name: (outcomes[r.name], r.expect) for r in ROWS if outcomes[r.name] != r.expect}
    assert not wrong, f"(got, expected): {wrong}"


@pytest.mark.parametrize("reference", ["2.9.10", "2.15.1"])
async def test_guarded_paths_answer_as_nats_server(servers: dict[str, Proc], reference: str) -> None:
    if reference not in servers:
        pytest.skip(f"nats-server {reference} is not installed")
    compared = [r for r in ROWS if not r.beyond and not (reference == "2.9.10" and "last" in r.name)]
    theirs = await run_matrix(servers[reference].url, compared)
    wrong = {r.name: (theirs[r.name], r.expect) for r in compared if theirs[r.name] != r.expect}
    assert not wrong, f"nats-server {reference} (got, expected): {wrong}"
