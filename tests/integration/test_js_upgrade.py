"""A store written by jetpy before accounts opens after the upgrade, nothing lost.

The old server is the code of the commit before accounts (:data:`PRE_ACCOUNTS`, taken out of this
repository's history with ``git archive``) run as a process on a fresh store: a stream with
messages, a durable consumer with acknowledgements, a KV bucket, and a stream whose metadata was
damaged, which that code moved to ``jetstream/quarantine/``. Today's server then opens the same
store: with the same configuration everything is where it was (the global account's streams
were already in ``jetstream/$G/streams/``) and the quarantine moves to ``jetstream/$G/quarantine/``;
with accounts configured, ``$G`` has no JetStream (as in nats-server), its streams are kept and
reported, and moving a stream's directory into an account's gives it to that account.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import nats
import pytest

from conftest import JETPY_SERVER, REPO, Proc, start_process
from jetpy.store.consumer_state import META_MAGIC, read_framed, write_framed_atomic

pytestmark = pytest.mark.timeout(120)

PRE_ACCOUNTS = "5ef4acaf113d19c74b24ccd2ef84d0ea60921d2e"  # main before accounts
DAMAGED = b"not a stream config"


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pre-accounts ``src`` directory, or a skip when the history is not here."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed: the pre-accounts code cannot be taken out of the history")
    d = tmp_path_factory.mktemp("old")
    archive = d / "src.tar"
    with open(archive, "wb") as f:
        done = subprocess.run([git, "-C", str(REPO), "archive", PRE_ACCOUNTS, "src"], stdout=f, check=False)
    if done.returncode != 0:
        pytest.skip(f"commit {PRE_ACCOUNTS} is not in this repository's history")
    with tarfile.open(archive) as tar:
        tar.extractall(d, filter="data")
    return d / "src"


def start_old(src: Path, store: Path, log: Path) -> Proc:
    boot = f"import sys, runpy; sys.path.insert(0, {str(src)!r}); runpy.run_module('jetpy.server', run_name='__main__')"
    return start_process(
        [sys.executable, "-c", boot, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)], log
    )


def start_new(store: Path, log: Path, conf: Path | None = None) -> Proc:
    extra = ["-c", str(conf)] if conf is not None else []
    return start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store), *extra], log
    )


async def fill_with_old_code(src: Path, store: Path, tmp: Path) -> None:
    old = start_old(src, store, tmp / "old1.log")
    try:
        assert "jetpy" in old.log()
        nc = await nats.connect(old.url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(10):
            await js.publish(f"orders.{i}", b"order %d" % i)
        await js.add_consumer("ORDERS", durable_name="SHIP", ack_policy="explicit")
        sub = await js.pull_subscribe("orders.>", durable="SHIP")
        for m in await sub.fetch(4, timeout=2):
            await m.ack_sync()
        kv = await js.create_key_value(bucket="settings")
        await kv.put("color", b"blue")
        await js.add_stream(name="BROKEN", subjects=["broken"])
        await nc.close()
    finally:
        old.stop(signal.SIGTERM)
    # damage BROKEN's metadata (an intact frame holding no stream config): the old code moves it
    # to jetstream/quarantine/ when it starts
    write_framed_atomic(store / "jetstream" / "$G" / "streams" / "BROKEN" / "meta.dat", META_MAGIC, DAMAGED)
    old = start_old(src, store, tmp / "old2.log")
    old.stop(signal.SIGTERM)
    assert (store / "jetstream" / "quarantine" / "README.txt").is_file()


async def test_a_store_from_before_accounts_opens_with_nothing_lost(old_code: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    await fill_with_old_code(old_code, store, tmp_path)
    root = store / "jetstream"
    (quarantined,) = [p.name for p in (root / "quarantine").iterdir() if p.name.startswith("BROKEN.")]

    new = start_new(store, tmp_path / "new.log")
    try:
        nc = await nats.connect(new.url)
        js = nc.jetstream()
        info = await js.stream_info("ORDERS")
        assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (10, 1, 10)
        assert [(await js.get_msg("ORDERS", i)).data for i in (1, 10)] == [b"order 0", b"order 9"]
        ship = await js.consumer_info("ORDERS", "SHIP")
        assert ship.ack_floor.stream_seq == 4 and ship.num_pending == 6  # the acks were kept
        sub = await js.pull_subscribe("orders.>", durable="SHIP")
        (nxt,) = await sub.fetch(1, timeout=2)
        assert nxt.data == b"order 4"  # delivery goes on where it was
        assert (await (await js.key_value("settings")).get("color")).value == b"blue"
        assert sorted(str(s.config.name) for s in await js.streams_info()) == ["KV_settings", "ORDERS"]
        await nc.close()
    finally:
        new.stop(signal.SIGTERM)
    # the quarantined stream moved with its README, nothing in it changed
    assert not (root / "quarantine").exists()
    moved = root / "$G" / "quarantine"
    assert read_framed(moved / quarantined / "meta.dat", META_MAGIC) == DAMAGED
    assert "BROKEN" in (moved / "README.txt").read_text()


async def test_streams_of_the_global_account_are_kept_when_accounts_come(
    old_code: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    await fill_with_old_code(old_code, store, tmp_path)
    conf = tmp_path / "accounts.conf"
    conf.write_text("accounts { APP: { users: [{user: app, password: app}], jetstream: enabled } }\n")
    new = start_new(store, tmp_path / "new.log", conf)
    try:
        nc = await nats.connect(new.url.replace("//", "//app:app@"))
        names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=2)).data)
        assert names["streams"] is None  # the account APP has none yet; $G has no JetStream
        await nc.close()
        log = new.log()
        assert "stream(s) of account '$G'" in log and "kept, not loaded" in log
    finally:
        new.stop(signal.SIGTERM)
    assert (store / "jetstream" / "$G" / "streams" / "ORDERS" / "meta.dat").is_file()  # untouched
    # the README's way to hand a stream to an account: move its directory, restart
    (store / "jetstream" / "APP" / "streams").mkdir(parents=True, exist_ok=True)
    shutil.move(
        store / "jetstream" / "$G" / "streams" / "ORDERS", store / "jetstream" / "APP" / "streams" / "ORDERS"
    )
    new = start_new(store, tmp_path / "new2.log", conf)
    try:
        nc = await nats.connect(new.url.replace("//", "//app:app@"))
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.ORDERS", b"", timeout=2)).data)
        assert info["state"]["messages"] == 10 and info["state"]["consumer_count"] == 1
        await nc.close()
    finally:
        new.stop(signal.SIGTERM)
