"""Key-Value buckets through nats-py's KV API, against jetpy and against the reference nats-server.

KV is a client convention over streams (ADR-8): a bucket is the stream ``KV_<bucket>`` on
``$KV.<bucket>.>``, a write is a publish (compare-and-set through
``Nats-Expected-Last-Subject-Sequence``), a read is a direct get (or ``STREAM.MSG.GET``), and a
watcher is an ordered push consumer with ``last_per_subject`` / ``headers_only``. Every test here
runs against both servers through the ``target`` fixture (defined here, shared with
test_object_store.py), so both must give nats-py the same answers. Per-key TTL (``Nats-TTL``,
``allow_msg_ttl``, ``subject_delete_marker_ttl``, ADR-43/ADR-48) is 2.11 behaviour that the
2.9.10 reference lacks; those tests run against jetpy only.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import (
    APIError,
    BucketNotFoundError,
    KeyHistoryTooLargeError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from nats.js.kv import KeyValue

import jetpy
from conftest import Proc, reference_cmd, start_process
from jetpy.server.app import Server

pytestmark = pytest.mark.asyncio

RECONNECT_WAIT = 0.1  # seconds between a client's reconnect attempts, so restarts are quick
WRONG_LAST_SEQUENCE = 10071  # JSStreamWrongLastSequenceErrF
MAX_MSG_SIZE = 10054  # JSStreamMessageExceedsMaximumErr
MSG_TTL_INVALID = 10165  # JSMessageTTLInvalidErr
MSG_TTL_DISABLED = 10166  # JSMessageTTLDisabledErr
EXPIRY_SLACK = 4.0  # seconds an expiry may take beyond its deadline before we call it missed


# -- the two servers --------------------------------------------------------------------------------


async def _quiet(_: Exception) -> None:
    """Connection errors during a deliberate restart are expected; the tests assert outcomes."""


@dataclass
class Target:
    """One server under test: jetpy (embedded) or Debian's nats-server 2.9.10 (subprocess).

    Both run JetStream on a temporary file store. ``restart()`` stops the server and starts it
    again on the same port and store dir, so connected clients reconnect by themselves.
    """

    kind: str  # "jetpy" | "nats-server"
    store_dir: Path
    log_dir: Path
    port: int = 0
    server: Server | None = None
    proc: Proc | None = None
    clients: list[Client] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def is_jetpy(self) -> bool:
        return self.kind == "jetpy"

    def require_2_11(self, what: str) -> None:
        """Skip on the reference: nats-server 2.9.10 predates ``what``."""
        if not self.is_jetpy:
            pytest.skip(f"{what} is nats-server 2.11 behaviour; the reference is 2.9.10")

    async def connect(self, **kw: Any) -> Client:
        nc = await nats.connect(
            self.url, reconnect_time_wait=RECONNECT_WAIT, max_reconnect_attempts=-1, error_cb=_quiet, **kw
        )
        self.clients.append(nc)
        return nc

    async def js(self) -> JetStreamContext:
        return (await self.connect()).jetstream()

    async def start(self) -> None:
        if self.is_jetpy:
            self.server = jetpy.Server(port=self.port, store_dir=str(self.store_dir))
            await self.server.start()
            self.port = self.server.port
        else:
            cmd = reference_cmd(self.log_dir, "-js", "-sd", str(self.store_dir))
            cmd[cmd.index("-p") + 1] = str(self.port or -1)
            self.proc = await asyncio.to_thread(start_process, cmd, self.log_dir / "ref.log")
            self.port = self.proc.port

    async def stop(self, kill: bool = False) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            await server.shutdown()
        if self.proc is not None:
            proc, self.proc = self.proc, None
            await asyncio.to_thread(proc.stop, signal.SIGKILL if kill else signal.SIGTERM)

    async def restart(self) -> None:
        await stop(self)
        await self.start()

    async def close(self) -> None:
        for nc in self.clients:
            if not nc.is_closed:
                await nc.close()
        await self.stop(kill=True)


@pytest.fixture(params=["jetpy", pytest.param("nats-server", marks=pytest.mark.differential)])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    """jetpy, then the reference nats-server: the same test must pass against both."""
    t = Target(kind=request.param, store_dir=tmp_path / "store", log_dir=tmp_path)
    await t.start()
    try:
        yield t
    finally:
        await t.close()


# -- helpers ----------------------------------------------------------------------------------------


async def update(watcher: Any, wait: float = 5.0) -> Any:
    """The next entry from a KV or Object Store watcher (None ends the initial values)."""
    return await watcher.updates(timeout=wait)


async def stop(watcher: Any) -> None:
    await watcher.stop()


async def initial(watcher: KeyValue.KeyWatcher, wait: float = 5.0) -> list[KeyValue.Entry]:
    """The watcher's initial entries, up to the ``None`` that ends them."""
    got: list[KeyValue.Entry] = []
    while (entry := await update(watcher, wait)) is not None:
        got.append(entry)
    return got


async def eventually(check: Callable[[], Awaitable[bool]], within: float, step: float = 0.1) -> float:
    """Poll an async predicate until true; returns the seconds it took."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > within:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(step)
    return time.monotonic() - start


async def gone(kv: KeyValue, key: str) -> bool:
    try:
        await kv.get(key)
    except KeyNotFoundError:
        return True
    return False


def view(entries: list[KeyValue.Entry]) -> list[tuple[str, bytes | None, int | None, str | None]]:
    return [(e.key, e.value, e.revision, e.operation) for e in entries]


def kv_stream(bucket: str, **over: Any) -> StreamConfig:
    """The stream nats-py's create_key_value makes, with ``over`` applied (for 2.11 options)."""
    cfg = StreamConfig(
        name=f"KV_{bucket}",
        subjects=[f"$KV.{bucket}.>"],
        allow_direct=True,
        allow_rollup_hdrs=True,
        deny_delete=True,
        discard=DiscardPolicy.NEW,
        duplicate_window=120.0,
        max_msgs_per_subject=1,
        max_consumers=-1,
        max_msgs=-1,
    )
    for k, v in over.items():
        setattr(cfg, k, v)
    return cfg


# -- values, revisions, compare-and-set ---------------------------------------------------------------


@pytest.mark.parametrize("direct", [True, False], ids=["direct-get", "msg-get"])
async def test_put_get_revisions_and_status(target: Target, direct: bool) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="cfg", history=5, direct=direct, description="settings")
    assert await kv.put("a", b"1") == 1
    assert await kv.put("b.c", b"x") == 2
    assert await kv.put("a", b"2") == 3
    e = await kv.get("a")
    assert (e.key, e.value, e.revision, e.bucket) == ("a", b"2", 3, "cfg")
    assert (await kv.get("a", revision=1)).value == b"1"
    assert (await kv.get("b.c")).value == b"x"
    with pytest.raises(KeyNotFoundError):
        await kv.get("nope")
    with pytest.raises(KeyNotFoundError):  # revision 2 is another key's
        await kv.get("a", revision=2)
    with pytest.raises(KeyNotFoundError):
        await kv.get("a", revision=99)

    st = await kv.status()
    assert (st.bucket, st.values, st.history, st.ttl) == ("cfg", 3, 5, 0.0)  # max_age 0: no TTL
    assert st.stream_info.config.allow_direct is direct
    assert st.stream_info.config.deny_delete and st.stream_info.config.allow_rollup_hdrs
    assert st.stream_info.config.discard == DiscardPolicy.NEW
    assert st.stream_info.config.description == "settings"

    again = await js.key_value("cfg")  # bind by name
    assert (await again.get("a")).value == b"2"
    with pytest.raises(BucketNotFoundError):
        await js.key_value("missing")
    assert await js.delete_key_value("cfg")
    with pytest.raises(BucketNotFoundError):
        await js.key_value("cfg")


async def test_bucket_limits_and_memory_storage(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="lim", max_value_size=100, storage=StorageType.MEMORY)
    st = await kv.status()
    assert st.stream_info.config.storage == StorageType.MEMORY
    assert st.stream_info.config.max_msg_size == 100
    await kv.put("ok", b"x" * 100)
    with pytest.raises(APIError) as err:
        await kv.put("big", b"x" * 101)
    assert (err.value.code, err.value.err_code) == (400, MAX_MSG_SIZE)
    with pytest.raises(KeyNotFoundError):
        await kv.get("big")
    assert (await kv.get("ok")).value == b"x" * 100


async def test_history_is_capped_at_64(target: Target) -> None:
    js = await target.js()
    with pytest.raises(KeyHistoryTooLargeError):
        await js.create_key_value(bucket="h", history=65)
    kv = await js.create_key_value(bucket="h", history=64)
    for i in range(70):
        await kv.put("k", str(i).encode())
    await kv.put("other", b"o")
    hist = await kv.history("k")
    assert [e.value for e in hist] == [str(i).encode() for i in range(6, 70)]
    assert [e.revision for e in hist] == list(range(7, 71))
    assert [e.delta for e in hist] == list(range(63, -1, -1))
    st = await kv.status()
    assert (st.values, st.history) == (65, 64)
    with pytest.raises(KeyNotFoundError):  # rolled out of the history
        await kv.get("k", revision=6)
    assert (await kv.get("k", revision=7)).value == b"6"


async def test_create_and_update_compare_and_set(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="cas", history=10)
    assert await kv.create("k", b"v1") == 1
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.create("k", b"again")
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.update("k", b"v2", last=7)
    assert await kv.update("k", b"v2", last=1) == 2
    with pytest.raises(KeyWrongLastSequenceError):  # revision 1 is no longer the last
        await kv.update("k", b"v3", last=1)
    assert (await kv.get("k")).value == b"v2"

    # the wire answer under nats-py's exception: 10071 with the key's actual last revision
    with pytest.raises(APIError) as err:
        await js.publish("$KV.cas.k", b"v3", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
    assert (err.value.code, err.value.err_code) == (400, WRONG_LAST_SEQUENCE)
    assert err.value.description == "wrong last sequence: 2"

    # create works on a deleted or purged key (nats-py retries with the marker's revision)
    await kv.delete("k")
    assert await kv.create("k", b"reborn") == 4
    await kv.purge("k")
    assert await kv.create("k", b"again") == 6
    assert (await kv.get("k")).value == b"again"
    # update against a marker's revision is allowed too
    await kv.delete("k")
    assert await kv.update("k", b"after-del", last=7) == 8

    # a CAS delete with a stale revision is refused with the same 10071
    with pytest.raises(APIError) as err:
        await kv.delete("k", last=3)
    assert err.value.err_code == WRONG_LAST_SEQUENCE
    assert await kv.delete("k", last=8)
    with pytest.raises(KeyNotFoundError):
        await kv.get("k")

    # concurrent writers racing on one revision: exactly one wins
    base = await kv.put("race", b"base")
    results = await asyncio.gather(
        *(kv.update("race", str(i).encode(), last=base) for i in range(10)), return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, int)]
    assert winners == [base + 1]
    assert all(isinstance(r, KeyWrongLastSequenceError) for r in results if not isinstance(r, int))
    assert (await kv.get("race")).revision == base + 1


async def test_delete_and_purge_markers(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="dp", history=10)
    for v in (b"1", b"2", b"3"):
        await kv.put("d", v)
        await kv.put("p", v)
    await kv.delete("d")
    await kv.purge("p")
    with pytest.raises(KeyNotFoundError):
        await kv.get("d")
    with pytest.raises(KeyNotFoundError):
        await kv.get("p")
    with pytest.raises(KeyNotFoundError):  # the marker's own revision reads as not found
        await kv.get("d", revision=7)
    assert (await kv.get("d", revision=5)).value == b"3"  # a delete keeps the history

    assert view(await kv.history("d")) == [
        ("d", b"1", 1, None),
        ("d", b"2", 3, None),
        ("d", b"3", 5, None),
        ("d", b"", 7, "DEL"),
    ]
    assert view(await kv.history("p")) == [("p", b"", 8, "PURGE")]  # a purge rolls it up
    assert (await kv.status()).values == 5

    # the markers are plain messages with the KV-Operation header, readable by sequence
    raw = await js.get_msg("KV_dp", seq=8)
    assert raw.subject == "$KV.dp.p" and raw.headers is not None
    assert raw.headers["KV-Operation"] == "PURGE" and raw.headers["Nats-Rollup"] == "sub"
    with pytest.raises(NoKeysError):
        await kv.keys()


async def test_purge_as_the_first_message_of_a_bucket(target: Target) -> None:
    """A rollup stored at stream sequence 1 must keep itself (seq 1 is 'no bound' to a purge)."""
    js = await target.js()
    kv = await js.create_key_value(bucket="pf", history=2)
    await kv.purge("never-written")  # a PURGE marker with Nats-Rollup: sub at stream sequence 1
    assert (await kv.status()).values == 1
    assert view(await kv.history("never-written")) == [("never-written", b"", 1, "PURGE")]
    await kv.put("never-written", b"now")
    assert (await kv.get("never-written")).value == b"now"


async def test_purge_deletes(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="pd", history=5)
    await kv.put("keep", b"k")
    await kv.put("a", b"a1")
    await kv.put("a", b"a2")
    await kv.put("b", b"b1")
    await kv.delete("a")
    await kv.purge("b")
    assert (await kv.status()).values == 5  # keep, a1, a2, DEL a, PURGE b

    # markers younger than the default 30 minutes stay, as the only message of their key
    await kv.purge_deletes()
    assert (await kv.status()).values == 3
    assert view(await kv.history("a")) == [("a", b"", 5, "DEL")]

    # olderthan <= 0: every marker goes, the key disappears from the stream
    await kv.purge_deletes(olderthan=-1)
    assert (await kv.status()).values == 1
    with pytest.raises(NoKeysError):
        await kv.history("a")
    assert await keys_of(kv, target) == ["keep"]
    assert (await kv.get("keep")).value == b"k"


async def test_keys_with_filters(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="ks", history=3)
    for key in ("user.1", "user.2", "order.1", "gone"):
        await kv.put(key, b"v")
    await kv.put("user.1", b"v2")
    await kv.delete("gone")
    assert sorted(await keys_of(kv, target)) == ["order.1", "user.1", "user.2"]
    assert sorted(await kv.keys(filters=["user"])) == ["user.1", "user.2"]


# -- watchers ---------------------------------------------------------------------------------------


async def test_watch_initial_values_then_updates(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="w", history=5)
    await kv.put("a", b"1")
    await kv.put("b", b"1")
    await kv.put("a", b"2")
    await kv.put("c.x", b"1")
    await kv.delete("b")

    w = await kv.watchall()
    first = await initial(w)
    # the newest entry per key, in stream order, with delta = messages still to come
    assert view(first) == [("a", b"2", 3, None), ("c.x", b"1", 4, None), ("b", b"", 5, "DEL")]
    assert [e.delta for e in first] == [2, 1, 0]
    assert all(e.created is not None for e in first)

    await kv.put("d", b"new")
    await kv.put("a", b"3")
    await kv.delete("c.x")
    await kv.purge("a")
    updates = [await update(w, 5) for _ in range(4)]
    assert view([u for u in updates if u is not None]) == [
        ("d", b"new", 6, None),
        ("a", b"3", 7, None),
        ("c.x", b"", 8, "DEL"),
        ("a", b"", 9, "PURGE"),
    ]
    await stop(w)

    # a watcher on one key (and on a wildcard) sees only its keys
    one = await kv.watch("d")
    assert view(await initial(one)) == [("d", b"new", 6, None)]
    await kv.put("e", b"1")
    await kv.put("d", b"2")
    nxt = await update(one, 5)
    assert nxt is not None and (nxt.key, nxt.value) == ("d", b"2")
    await stop(one)
    wild = await kv.watch("c.*")
    assert view(await initial(wild)) == [("c.x", b"", 8, "DEL")]
    await stop(wild)


async def test_watch_many_keys_counts_down_to_the_end(target: Target) -> None:
    """last_per_subject over 300 keys with 3 revisions each, some deleted: num_pending (delta)
    counts the remaining latest entries, so the end of the initial data falls exactly after them."""
    js = await target.js()
    kv = await js.create_key_value(bucket="many", history=3)
    for rnd in range(3):
        for i in range(300):
            await js.publish(f"$KV.many.k{i:03d}", f"{rnd}".encode())
    for i in range(0, 300, 10):
        await kv.delete(f"k{i:03d}")
    w = await kv.watchall()
    got = await initial(w)
    assert len(got) == 300
    assert [e.delta for e in got] == list(range(299, -1, -1))
    assert {e.key for e in got} == {f"k{i:03d}" for i in range(300)}
    assert sum(e.operation == "DEL" for e in got) == 30
    assert all(e.value == b"2" for e in got if e.operation is None)
    w2 = await kv.watch("k00*")  # a filter that is a single literal key: "k00*" is not a wildcard
    assert await update(w2, 5) is None
    await stop(w2)
    await stop(w)
    assert len(await keys_of(kv, target)) == 270


async def keys_of(kv: KeyValue, target: Target) -> list[str]:
    """``kv.keys()``; against nats-server 2.9.10 it now and then ends its watcher before the first
    key arrives (NoKeysError on a full bucket), so the reference gets one retry. jetpy gets none."""
    try:
        return await kv.keys()
    except NoKeysError:
        if target.kind != "nats-server":
            raise
        await asyncio.sleep(0.2)
        return await kv.keys()


async def test_watch_empty_bucket_signals_end_of_initial_data(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="empty")
    w = await kv.watchall()
    assert await update(w, 5) is None
    await kv.put("k", b"v")
    u = await update(w, 5)
    assert u is not None and (u.key, u.value, u.revision, u.delta) == ("k", b"v", 1, 0)
    await stop(w)


async def test_watch_include_history(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="wh", history=3)
    for i in range(5):
        await kv.put("k", str(i).encode())
    await kv.put("j", b"j")
    await kv.delete("j")
    w = await kv.watchall(include_history=True)
    got = view(await initial(w))
    assert got == [
        ("k", b"2", 3, None),
        ("k", b"3", 4, None),
        ("k", b"4", 5, None),
        ("j", b"j", 6, None),
        ("j", b"", 7, "DEL"),
    ]
    await kv.put("k", b"5")
    u = await update(w, 5)
    assert u is not None and (u.value, u.revision) == (b"5", 8)
    await stop(w)


async def test_watch_ignore_deletes(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="wi")
    await kv.put("a", b"1")
    await kv.put("b", b"1")
    await kv.delete("b")
    await kv.put("c", b"1")
    await kv.purge("c")
    w = await kv.watchall(ignore_deletes=True)
    assert view(await initial(w)) == [("a", b"1", 1, None)]
    await kv.delete("a")  # not reported
    await kv.put("z", b"z")
    u = await update(w, 5)
    assert u is not None and (u.key, u.operation) == ("z", None)
    await stop(w)


async def test_watch_meta_only(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="wm")
    await kv.put("big", b"x" * 10_000)
    await kv.put("small", b"s")
    w = await kv.watchall(meta_only=True)
    # headers_only: keys and revisions without the values
    assert view(await initial(w)) == [("big", b"", 1, None), ("small", b"", 2, None)]
    await kv.put("big", b"y" * 5)
    u = await update(w, 5)
    assert u is not None and (u.key, u.value, u.revision) == ("big", b"", 3)
    await stop(w)
    # the consumer really is headers-only: the server reports the payload size instead
    sub = await js.subscribe("$KV.wm.big", ordered_consumer=True, headers_only=True, deliver_policy=None)
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"" and msg.headers is not None and msg.headers["Nats-Msg-Size"] == "5"
    await sub.unsubscribe()


@pytest.mark.slow
async def test_watcher_and_values_survive_server_restart(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="rs", history=4)
    await kv.put("a", b"1")
    await kv.put("b", b"1")
    w = await kv.watchall()
    assert view(await initial(w)) == [("a", b"1", 1, None), ("b", b"1", 2, None)]
    await kv.put("a", b"2")
    u = await update(w, 5)
    assert u is not None and (u.key, u.value, u.revision) == ("a", b"2", 3)

    await target.restart()
    # the client reconnects; the values, history and revisions were kept
    await eventually(lambda: _reconnected(kv), within=10)
    assert (await kv.get("a")).value == b"2"
    assert [e.revision for e in await kv.history("a")] == [1, 3]

    # the watcher's ordered consumer is recreated by nats-py (after missed heartbeats) from the
    # stream sequence after the last one it saw, so it gets every later update exactly once
    await kv.put("b", b"2")
    await kv.delete("a")
    after = [await update(w, 30), await update(w, 5)]
    assert view([e for e in after if e is not None]) == [("b", b"2", 4, None), ("a", b"", 5, "DEL")]
    await kv.put("c", b"1")
    u = await update(w, 5)
    assert u is not None and (u.key, u.revision) == ("c", 6)
    await stop(w)

    # a new watcher after the restart sees the persisted state
    w2 = await kv.watchall()
    assert view(await initial(w2)) == [("b", b"2", 4, None), ("a", b"", 5, "DEL"), ("c", b"1", 6, None)]
    await stop(w2)


async def _reconnected(kv: KeyValue) -> bool:
    try:
        await kv.status()
    except Exception:
        return False
    return True


# -- read path --------------------------------------------------------------------------------------


async def test_reads_use_direct_get_when_the_bucket_allows_it(target: Target) -> None:
    nc = await target.connect()
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="rd", direct=True)
    await kv.put("k.1", b"v")
    # what KeyValue.get sends: DIRECT.GET.<stream>.<subject>, answered with headers, not JSON
    msg = await nc.request("$JS.API.DIRECT.GET.KV_rd.$KV.rd.k.1", b"", timeout=5)
    assert msg.data == b"v" and msg.headers is not None
    assert msg.headers["Nats-Stream"] == "KV_rd"
    assert msg.headers["Nats-Subject"] == "$KV.rd.k.1"
    assert msg.headers["Nats-Sequence"] == "1"
    assert msg.headers["Nats-Time-Stamp"].endswith("Z")
    missing = await nc.request("$JS.API.DIRECT.GET.KV_rd.$KV.rd.none", b"", timeout=5)
    assert missing.headers is not None and missing.headers["Status"] == "404"

    # without allow_direct nobody answers DIRECT.GET (the request goes unanswered, as the API
    # subscription takes it, hence no 503), and nats-py reads through STREAM.MSG.GET instead
    plain = await js.create_key_value(bucket="rp", direct=False)
    await plain.put("k", b"v")
    with pytest.raises(nats.errors.TimeoutError):
        await nc.request("$JS.API.DIRECT.GET.KV_rp.$KV.rp.k", b"", timeout=0.5)
    assert (await plain.get("k")).value == b"v"


# -- TTL: the bucket's, and per key (2.11) ----------------------------------------------------------


async def test_bucket_ttl_expires_values(target: Target) -> None:
    js = await target.js()
    kv = await js.create_key_value(bucket="ttl", ttl=1.0)
    st = await kv.status()
    assert st.ttl == 1.0
    assert st.stream_info.config.duplicate_window == 1.0  # capped at the TTL
    await kv.put("k", b"v")
    assert (await kv.get("k")).value == b"v"
    took = await eventually(lambda: gone(kv, "k"), within=1 + EXPIRY_SLACK)
    assert took >= 0.5
    assert (await kv.status()).values == 0


async def test_per_key_ttl_on_create(target: Target) -> None:
    target.require_2_11("per-message TTL (Nats-TTL)")
    nc = await target.connect()
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="pk", history=3, direct=True)
    assert (await kv.status()).stream_info.config.allow_msg_ttl
    await kv.put("forever", b"f")
    rev = await kv.create("short", b"s", msg_ttl=1)
    assert (await kv.get("short")).value == b"s"
    # the TTL travels with the stored message
    msg = await nc.request("$JS.API.DIRECT.GET.KV_pk.$KV.pk.short", b"", timeout=5)
    assert msg.headers is not None and msg.headers["Nats-TTL"] == "1"
    assert msg.headers["Nats-Sequence"] == str(rev)
    await eventually(lambda: gone(kv, "short"), within=1 + EXPIRY_SLACK)
    assert (await kv.get("forever")).value == b"f"
    assert (await kv.status()).values == 1
    # once expired, create succeeds again (nothing is left on the subject)
    assert await kv.create("short", b"s2") == rev + 1


async def test_per_key_ttl_header_rules(target: Target) -> None:
    target.require_2_11("per-message TTL (Nats-TTL)")
    js = await target.js()
    # a stream that did not opt in refuses the header (10166)
    await js.add_stream(name="PLAIN", subjects=["plain"])
    with pytest.raises(APIError) as err:
        await js.publish("plain", b"x", msg_ttl=5)
    assert (err.value.code, err.value.err_code) == (400, MSG_TTL_DISABLED)
    assert (await js.stream_info("PLAIN")).state.messages == 0

    kv = await js.create_key_value(bucket="hr")
    for bad in ("abc", "500ms", "1x"):  # unparsable, under a second, unknown unit
        with pytest.raises(APIError) as err:
            await js.publish("$KV.hr.k", b"x", headers={"Nats-TTL": bad})
        assert (err.value.code, err.value.err_code) == (400, MSG_TTL_INVALID), bad
    assert (await kv.status()).values == 0
    # seconds, Go durations and "never" are accepted
    for good in ("2", "1m", "1h30m", "never"):
        await js.publish("$KV.hr.k", good.encode(), headers={"Nats-TTL": good})
    assert (await kv.get("k")).value == b"never"


async def test_per_key_never_outlives_bucket_ttl(target: Target) -> None:
    target.require_2_11("per-message TTL (Nats-TTL: never)")
    js = await target.js()
    kv = await js.create_key_value(bucket="nv", ttl=1.0)
    await js.publish("$KV.nv.schema", b"keep", headers={"Nats-TTL": "never"})
    await kv.put("tmp", b"t")
    await eventually(lambda: gone(kv, "tmp"), within=1 + EXPIRY_SLACK)
    assert (await kv.get("schema")).value == b"keep"


async def test_limit_markers_tell_watchers_about_expiry(target: Target) -> None:
    target.require_2_11("subject delete markers")
    js = await target.js()
    await js.add_stream(
        kv_stream("lm", max_msgs_per_subject=5, allow_msg_ttl=True, subject_delete_marker_ttl=1.0)
    )
    kv = await js.key_value("lm")
    assert (await kv.status()).marker_ttl == 1.0
    w = await kv.watchall()
    assert await update(w, 5) is None
    await kv.put("keep", b"k")
    rev = await kv.create("eph", b"e", msg_ttl=1)
    got = [await update(w, 5), await update(w, 5)]
    assert view([e for e in got if e is not None]) == [("keep", b"k", 1, None), ("eph", b"e", rev, None)]

    # the server removes the expired value and leaves a marker in its place, which nats-py
    # reports as a purge (ADR-48); the marker carries its own TTL
    marker = await update(w, 1 + EXPIRY_SLACK)
    assert marker is not None
    assert (marker.key, marker.value, marker.operation) == ("eph", b"", "PURGE")
    assert marker.revision is not None and marker.revision > rev
    raw = await js.get_msg("KV_lm", seq=marker.revision)
    assert raw.headers is not None
    assert raw.headers["Nats-Marker-Reason"] == "MaxAge"
    assert raw.headers["Nats-TTL"] == "1s"
    assert "KV-Operation" not in raw.headers
    # nats-py's get() looks only at KV-Operation (its watcher also reads Nats-Marker-Reason), so
    # while the marker lives get() returns it as a value-less entry at the marker's revision
    during = await kv.get("eph")
    assert (during.value, during.revision) == (None, marker.revision)

    # then the marker expires too, without a marker of its own
    async def only_keep_left() -> bool:
        return (await kv.status()).values == 1

    await eventually(only_keep_left, within=1 + EXPIRY_SLACK)
    with pytest.raises(KeyNotFoundError):
        await kv.get("eph")
    with pytest.raises(nats.errors.TimeoutError):
        await update(w, 0.5)
    assert view(await kv.history("keep")) == [("keep", b"k", 1, None)]
    await stop(w)


async def test_limit_markers_on_bucket_ttl(target: Target) -> None:
    target.require_2_11("subject delete markers")
    js = await target.js()
    await js.add_stream(
        kv_stream(
            "la", max_age=1.0, duplicate_window=1.0, allow_rollup_hdrs=False, subject_delete_marker_ttl=2.0
        )
    )
    info = await js.stream_info("KV_la")
    # markers need TTLs and rollups: the server turns both on
    assert info.config.allow_msg_ttl and info.config.allow_rollup_hdrs
    kv = await js.key_value("la")
    await kv.put("k", b"v")
    w = await kv.watch("k")
    assert view(await initial(w)) == [("k", b"v", 1, None)]
    marker = await update(w, 1 + EXPIRY_SLACK)
    assert marker is not None and (marker.key, marker.revision, marker.operation) == ("k", 2, "PURGE")
    raw = await js.get_msg("KV_la", seq=2)
    assert raw.headers is not None and raw.headers["Nats-Marker-Reason"] == "MaxAge"
    await stop(w)


async def test_purge_with_ttl_removes_the_key_for_good(target: Target) -> None:
    target.require_2_11("per-message TTL on purge markers")
    js = await target.js()
    await js.add_stream(
        kv_stream("pt", max_msgs_per_subject=5, allow_msg_ttl=True, subject_delete_marker_ttl=1.0)
    )
    kv = await js.key_value("pt")
    await kv.put("k", b"1")
    await kv.put("k", b"2")
    await kv.purge("k", msg_ttl=1)
    assert view(await kv.history("k")) == [("k", b"", 3, "PURGE")]

    async def empty() -> bool:
        return (await kv.status()).values == 0

    # the purge marker expires and, being a marker itself, leaves no marker behind
    await eventually(empty, within=2 + EXPIRY_SLACK)
    with pytest.raises(NoKeysError):
        await kv.history("k")


async def test_limit_marker_ttl_through_the_kv_config(target: Target) -> None:
    """nats-py asks $JS.API.INFO for API level >= 1 (2.11) before it sets limit markers."""
    target.require_2_11("limit marker TTL")
    js = await target.js()
    kv = await js.create_key_value(KeyValueConfig(bucket="cfgm", limit_marker_ttl=5.0))
    st = await kv.status()
    assert st.marker_ttl == 5.0
    assert st.stream_info.config.allow_msg_ttl


async def test_per_key_ttl_survives_restart(target: Target) -> None:
    target.require_2_11("per-message TTL (Nats-TTL)")
    js = await target.js()
    kv = await js.create_key_value(bucket="tr")
    await kv.create("k", b"v", msg_ttl=3)
    await kv.put("stay", b"s")
    await target.restart()
    await eventually(lambda: _reconnected(kv), within=10)
    assert (await kv.get("k")).value == b"v"
    await eventually(lambda: gone(kv, "k"), within=3 + EXPIRY_SLACK)
    assert (await kv.get("stay")).value == b"s"


async def test_keys_are_subject_tokens(target: Target) -> None:
    """Every key character nats-py allows survives the round trip, and dots make subject tokens."""
    js = await target.js()
    kv = await js.create_key_value(bucket="enc", history=2)
    key = "a/b=c_d-e.f"
    await kv.put(key, b"v")
    raw = await js.get_last_msg("KV_enc", f"$KV.enc.{key}")
    assert (raw.subject, raw.data, raw.seq) == (f"$KV.enc.{key}", b"v", 1)
    w = await kv.watch("a/b=c_d-e.*")
    assert view(await initial(w)) == [(key, b"v", 1, None)]
    await stop(w)
