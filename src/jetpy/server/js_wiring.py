"""JetStream wiring: connects the JetStream engine to the broker and picks the store backends.

The composition root for JetStream: the broker becomes its ``MessageBus``; file streams live in
``<store_dir>/jetstream/$G/streams/<name>/`` (nats-server's layout, one account for now) and
memory streams in memory. A stream directory is handed to the engine unopened, with its
metadata: one whose files cannot be trusted is left exactly as it is (the engine keeps that
stream offline); one without metadata (a creation or restore that never finished: the metadata
is written last) is moved to ``<store_dir>/jetstream/quarantine/``, never deleted. Knows nothing
of the server around it: it is handed the options, the broker and the server's name, and hands
back a :class:`~jetpy.server.js_service.JetStreamService`.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from jetpy.jetstream.ports import Caller, JetStreamConfig, MessageHandler, PersistedStream
from jetpy.jetstream.service import JetStream
from jetpy.server.broker import Broker, Subscription
from jetpy.server.js_service import JetStreamService
from jetpy.server.options import ServerOptions
from jetpy.store.base import StoreConfig, StoredMsg, StoreError, StreamStore
from jetpy.store.consumer_state import fsync_dir
from jetpy.store.filestore import FileStore, read_meta_file
from jetpy.store.memory import MemoryStore

__all__ = ["BrokerBus", "DirectoryStores", "default_max_memory", "default_max_storage", "start_jetstream"]

log = logging.getLogger("jetpy.server")

ACCOUNT = "$G"  # the global account; accounts land later


class BrokerBus:
    """The broker seen as JetStream's MessageBus."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # once per published message: the broker's own method, without a call of ours around it
        self.publish_reply = broker.publish_reply

    def publish(self, subject: str, reply: str | None, payload: bytes, headers: bytes = b"") -> int:
        return self.broker.publish_internal(subject, reply, payload, headers)

    def subscribe(self, subject: str, handler: MessageHandler, queue: str | None = None) -> Subscription:
        return self.broker.subscribe_internal(subject, handler, queue)

    def unsubscribe(self, handle: Any) -> None:
        self.broker.unsubscribe_internal(handle)

    def caller(self) -> Caller | None:
        return self.broker.caller

    def has_interest(self, subject: str) -> bool:
        return self.broker.has_interest(subject.encode())

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
    """File stores under one directory, memory stores in memory."""

    def __init__(self, store_dir: str) -> None:
        self.root = os.path.join(os.path.abspath(store_dir), "jetstream")
        self.streams_dir = os.path.join(self.root, ACCOUNT, "streams")
        os.makedirs(self.streams_dir, exist_ok=True)

    def create(self, config: StoreConfig) -> StreamStore:
        if config.storage == "memory":
            return MemoryStore(config)
        return FileStore(os.path.join(self.streams_dir, config.name), config)

    def recover(self) -> list[PersistedStream]:
        found: list[PersistedStream] = []
        for name in sorted(os.listdir(self.streams_dir)):
            path = os.path.join(self.streams_dir, name)
            if not os.path.isdir(path):
                continue
            missing = False
            try:
                meta, problem = read_meta_file(path), ""
                if meta is None:
                    problem, missing = "stream metadata missing", True
            except StoreError as e:
                meta, problem = None, str(e)
            # opened with no limits: the engine applies the stream's own before anything is stored
            opener = partial(FileStore, path, StoreConfig(name=name))
            found.append(PersistedStream(name, meta, problem, opener, missing))
        return found

    def quarantine(self, name: str, reason: str) -> str:
        qdir = os.path.join(self.root, "quarantine")
        os.makedirs(qdir, exist_ok=True)
        dest = os.path.join(qdir, f"{name}.{time.strftime('%Y%m%dT%H%M%S')}")
        src = os.path.join(self.streams_dir, name)
        if os.path.exists(src):
            shutil.move(src, dest)
        with open(os.path.join(qdir, "README.txt"), "a") as f:
            f.write(f"{dest}: {reason}\n")
        return dest

    def remove(self, name: str) -> None:
        shutil.rmtree(os.path.join(self.streams_dir, name))
        try:
            fsync_dir(self.streams_dir)
        except OSError:
            pass


def default_max_memory() -> int:
    """nats-server's default ``max_memory_store``: 75% of the machine's memory."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.75)


def default_max_storage(store_dir: str) -> int:
    """nats-server's default ``max_file_store``: 75% of the disk space free where the store is."""
    path = os.path.abspath(store_dir)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return int(shutil.disk_usage(path).free * 0.75)


async def start_jetstream(
    opts: ServerOptions,
    broker: Broker,
    server_name: str,
    prepare: Callable[[JetStream], None] | None = None,
) -> JetStreamService:
    """JetStream for a server with these options, on its broker, started (streams recovered);
    ``prepare`` is shown the engine before it starts (a cluster's hooks)."""
    store_dir = opts.store_dir or os.path.join(os.getcwd(), "jetstream-data")
    cfg = JetStreamConfig(
        store_dir=store_dir,
        max_memory=opts.max_memory_store if opts.max_memory_store > 0 else default_max_memory(),
        max_storage=opts.max_file_store if opts.max_file_store > 0 else default_max_storage(store_dir),
        sync_interval=opts.sync_interval,
        server_name=server_name,
    )
    log.info("Starting JetStream")
    log.info("  Store Directory: %r", store_dir)
    js = JetStream(cfg, BrokerBus(broker), DirectoryStores(store_dir))
    if prepare is not None:
        prepare(js)
    await js.start()
    return js
