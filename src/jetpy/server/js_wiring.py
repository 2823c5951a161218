"""JetStream wiring: one JetStream per account, connected to the account's broker, with the
store backends picked and the server's limits shared.

The composition root for JetStream: each account's broker becomes its JetStream's
``MessageBus``; its file streams live in ``<store_dir>/jetstream/<account>/streams/<name>/``
(nats-server's layout: ``$G`` for the global account, as every jetpy store so far) and memory
streams in memory; with ``jetstream { key }`` every file of a file stream is encrypted
(store/crypto.py). A stream directory is handed to the engine unopened, with its metadata: one
whose files cannot be trusted is left exactly as it is (the engine keeps that stream offline);
one without metadata (a creation or restore that never finished: the metadata is written last)
is moved to ``<store_dir>/jetstream/<account>/quarantine/``, never deleted (a store from before
accounts kept the global account's in ``<store_dir>/jetstream/quarantine/``: it is moved there at
start, :func:`migrate_layout`). An account without JetStream gets nats-server's 10039 answer on
its API. The accounts' JetStreams, as the server sees them, are one
:class:`~jetpy.server.js_service.JetStreamService` (:class:`AccountsJetStream`: /jsz adds them
up). Knows nothing of the server around it: it is handed the options, the accounts and the
server's name.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from jetpy.jetstream.ports import Caller, JetStreamConfig, MessageHandler, PersistedStream, RunHandler
from jetpy.jetstream.report import jsz_stats
from jetpy.jetstream.resources import ServerResources
from jetpy.jetstream.service import JetStream, JetStreamNotEnabled
from jetpy.meters import FSYNC_BUCKETS, Histogram
from jetpy.server.accounts import Account, Accounts
from jetpy.server.broker import Broker, Subscription
from jetpy.server.options import GLOBAL_ACCOUNT, ServerOptions
from jetpy.store.base import StoreConfig, StoredMsg, StoreError, StreamStore
from jetpy.store.crypto import CIPHER_NAMES, Cipher, StoreKeys
from jetpy.store.fileio import fsync_dir
from jetpy.store.filestore import FileStore, read_meta_file
from jetpy.store.memory import MemoryStore

__all__ = [
    "AccountsJetStream",
    "BrokerBus",
    "DirectoryStores",
    "default_max_memory",
    "default_max_storage",
    "migrate_layout",
    "start_jetstream",
    "store_keys",
]

log = logging.getLogger("jetpy.server")

QUARANTINE = "quarantine"  # under each account's directory: streams that could not be read
README = "README.txt"  # in a quarantine directory: what was moved there, and why


class BrokerBus:
    """The broker seen as JetStream's MessageBus."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # once per published message: the broker's own method, without a call of ours around it
        self.publish_reply = broker.publish_reply
        self.publish_replies = broker.publish_replies

    def publish(self, subject: str, reply: str | None, payload: bytes, headers: bytes = b"") -> int:
        return self.broker.publish_internal(subject, reply, payload, headers)

    def subscribe(
        self, subject: str, handler: MessageHandler, queue: str | None = None, run: RunHandler | None = None
    ) -> Subscription:
        return self.broker.subscribe_internal(subject, handler, queue, run=run)

    def unsubscribe(self, handle: Any) -> None:
        self.broker.unsubscribe_internal(handle)

    def caller(self) -> Caller | None:
        return self.broker.caller

    def has_interest(self, subject: str) -> bool:
        return self.broker.has_interest(subject.encode())

    def has_queue_interest(self, subject: str, queue: str) -> bool:
        return self.broker.has_queue_interest(subject.encode(), queue.encode())

    def send(self, route: str, subject: str, reply: str | None, payload: bytes, headers: bytes = b"") -> int:
        return self.broker.publish_internal(route, reply, payload, headers, shown=subject)

    def send_batch(self, route: str, msgs: list[StoredMsg], replies: list[bytes]) -> int:
        return self.broker.publish_batch(
            route.encode(),
            [m.subject.encode() for m in msgs],
            replies,
            [m.hdr for m in msgs],
            [m.data for m in msgs],
        )

    def watch_interest(self, subject: str, callback: Callable[[], None]) -> Any:
        return self.broker.watch_interest(subject, callback)

    def unwatch_interest(self, handle: Any) -> None:
        self.broker.unwatch_interest(handle)


class DirectoryStores:
    """One account's file stores under its directory (encrypted with ``keys``, if given), memory
    stores in memory."""

    def __init__(self, store_dir: str, account: str = GLOBAL_ACCOUNT, keys: StoreKeys | None = None) -> None:
        self.keys = keys
        self.root = os.path.join(os.path.abspath(store_dir), "jetstream")
        self.account_dir = os.path.join(self.root, account)
        self.streams_dir = os.path.join(self.account_dir, "streams")
        os.makedirs(self.streams_dir, exist_ok=True)

    def create(self, config: StoreConfig) -> StreamStore:
        if config.storage == "memory":
            return MemoryStore(config)
        return FileStore(os.path.join(self.streams_dir, config.name), config, self.keys)

    def recover(self) -> list[PersistedStream]:
        found: list[PersistedStream] = []
        for name in sorted(os.listdir(self.streams_dir)):
            path = os.path.join(self.streams_dir, name)
            if not os.path.isdir(path):
                continue
            missing = False
            try:
                meta, problem = read_meta_file(path, self.keys), ""
                if meta is None:
                    problem, missing = "stream metadata missing", True
            except StoreError as e:
                meta, problem = None, str(e)
            # opened with no limits: the engine applies the stream's own before anything is stored
            opener = partial(FileStore, path, StoreConfig(name=name), self.keys)
            found.append(PersistedStream(name, meta, problem, opener, missing))
        return found

    def quarantine(self, name: str, reason: str) -> str:
        qdir = os.path.join(self.account_dir, QUARANTINE)
        os.makedirs(qdir, exist_ok=True)
        dest = os.path.join(qdir, f"{name}.{time.strftime('%Y%m%dT%H%M%S')}")
        src = os.path.join(self.streams_dir, name)
        if os.path.exists(src):
            shutil.move(src, dest)
        with open(os.path.join(qdir, README), "a") as f:
            f.write(f"{dest}: {reason}\n")
        return dest

    def remove(self, name: str) -> None:
        shutil.rmtree(os.path.join(self.streams_dir, name))
        try:
            fsync_dir(self.streams_dir)
        except OSError:
            pass


def migrate_layout(store_dir: str) -> None:
    """Bring a store written before accounts to today's layout: its quarantine directory
    (``jetstream/quarantine/``, the global account's) moves to ``jetstream/$G/quarantine/``;
    nothing in it is changed. Streams were already where nats-server keeps the global
    account's (``jetstream/$G/streams/``). An account named like the old directory is told
    apart by its ``streams`` directory."""
    root = os.path.join(os.path.abspath(store_dir), "jetstream")
    old = os.path.join(root, QUARANTINE)
    if not os.path.isfile(os.path.join(old, README)) or os.path.isdir(os.path.join(old, "streams")):
        return
    new = os.path.join(root, GLOBAL_ACCOUNT, QUARANTINE)
    os.makedirs(os.path.dirname(new), exist_ok=True)
    if not os.path.exists(new):
        os.rename(old, new)
    else:  # both exist (an interrupted move): merge, the README appended
        for entry in os.listdir(old):
            src, dest = os.path.join(old, entry), os.path.join(new, entry)
            if entry == README:
                with open(src) as f, open(dest, "a") as g:
                    g.write(f.read())
                os.unlink(src)
            elif not os.path.exists(dest):
                os.rename(src, dest)
        if not os.listdir(old):
            os.rmdir(old)
    log.info("Moved the quarantined streams of the global account to %s", new)


def default_max_memory() -> int:
    """nats-server's default ``max_memory_store``: 75% of the machine's memory."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.75)


def default_max_storage(store_dir: str) -> int:
    """nats-server's default ``max_file_store``: 75% of the disk space free where the store is."""
    path = os.path.abspath(store_dir)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return int(shutil.disk_usage(path).free * 0.75)


def store_keys(opts: ServerOptions) -> StoreKeys | None:
    """The encryption keys ``jetstream { key, prev_encryption_key, cipher }`` configure (None:
    no encryption at rest)."""
    if not opts.js_key:
        return None
    cipher: Cipher = "aes" if opts.js_cipher == "aes" else "chachapoly"
    return StoreKeys(opts.js_key, cipher, opts.js_prev_key or None)


class AccountsJetStream:
    """Every account's JetStream, as one service for the server (/jsz adds them up)."""

    def __init__(
        self, config: JetStreamConfig, keys: StoreKeys | None = None, server: ServerResources | None = None
    ) -> None:
        self.config = config  # the server's settings
        self.keys = keys
        self.resources = server or ServerResources(config.max_memory, config.max_storage)
        self.by_account: dict[str, JetStream] = {}
        self.disabled: list[JetStreamNotEnabled] = []
        self.fsync_seconds = Histogram(FSYNC_BUCKETS)  # every account's commits

    async def add_account(
        self, account: Account, system: Account | None, prepare: Callable[[JetStream], None] | None = None
    ) -> None:
        """JetStream for ``account`` (its streams recovered) when its limits enable it, else
        nats-server's 10039 answer on its API (none in the system account); at start, and for
        an account the resolver adds to the running server. ``prepare``: a cluster's hooks, put
        in before it starts."""
        bus = BrokerBus(account.broker)
        limits = account.js_limits
        cfg = self.config
        if limits is None:
            if account is not system:
                off = JetStreamNotEnabled(bus, cfg.domain)
                off.start()
                self.disabled.append(off)
            return
        acfg = dataclasses.replace(cfg, account=account.name, limits=limits)
        js = JetStream(acfg, bus, DirectoryStores(cfg.store_dir, account.name, self.keys), self.resources)
        js.committer.fsync_seconds = self.fsync_seconds
        if prepare is not None:
            prepare(js)
        await js.start()
        account.jetstream = js
        self.by_account[account.name] = js

    def jsz_stats(
        self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str
    ) -> dict[str, Any]:
        return jsz_stats(
            self.config,
            [js.report for js in self.by_account.values()],
            accounts=accounts,
            streams=streams,
            consumers=consumers,
            config_detail=config,
            account=account,
        )

    async def stop(self) -> None:
        for off in self.disabled:
            off.stop()
        self.disabled = []
        for js in self.by_account.values():
            await js.stop()
        self.by_account = {}


async def start_jetstream(
    opts: ServerOptions,
    accounts: Accounts,
    server_name: str,
    prepare: Callable[[JetStream], None] | None = None,
) -> AccountsJetStream:
    """JetStream for every account that has it (streams recovered), and the 10039 answer for
    those that do not, on a server with these options. ``prepare`` (a cluster's hooks) is shown
    each account's engine before it starts (clustered JetStream serves every account: its
    assignments name theirs)."""
    store_dir = opts.store_dir or os.path.join(os.getcwd(), "jetstream-data")
    cfg = JetStreamConfig(
        store_dir=store_dir,
        max_memory=opts.max_memory_store if opts.max_memory_store > 0 else default_max_memory(),
        max_storage=opts.max_file_store if opts.max_file_store > 0 else default_max_storage(store_dir),
        sync_interval=opts.sync_interval,
        server_name=server_name,
        domain=opts.jetstream_domain,
    )
    log.info("Starting JetStream")
    log.info("  Store Directory: %r", store_dir)
    if cfg.domain:
        log.info("  Domain:          %s", cfg.domain)
    keys = store_keys(opts)
    if keys is not None:
        log.info("  Encryption:      %s", CIPHER_NAMES[keys.cipher])
    migrate_layout(store_dir)
    service = AccountsJetStream(cfg, keys)
    system = accounts.system()
    for account in accounts:
        await service.add_account(account, system, prepare)
    _warn_unloaded(store_dir, set(service.by_account))
    return service


def _warn_unloaded(store_dir: str, loaded: set[str]) -> None:
    """Say so when the store holds streams of an account that has no JetStream here (its
    files are kept as they are, and come back when the account has JetStream again)."""
    root = os.path.join(os.path.abspath(store_dir), "jetstream")
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return
    for name in names:
        streams = os.path.join(root, name, "streams")
        if name in loaded or not os.path.isdir(streams):
            continue
        count = sum(1 for e in os.listdir(streams) if os.path.isdir(os.path.join(streams, e)))
        if count:
            log.warning(
                "%d stream(s) of account %r are in %s, but that account has no JetStream here: "
                "kept, not loaded",
                count,
                name,
                streams,
            )
