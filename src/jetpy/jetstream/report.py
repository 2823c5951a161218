"""What JetStream reports about itself: account usage and limits (``$JS.API.INFO``) and
nats-server's ``/jsz`` document.

Owns: the measurements (memory and storage in use, stream and consumer counts, messages and
bytes), the configured limits as reported, and both documents' shapes. Also answers
``$JS.API.INFO`` (its route). Must not know: the network, how streams or consumers work.
"""

from __future__ import annotations

import time
from typing import Any, Final

import msgspec

from jetpy.jetstream.api.router import ApiStats, Route
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.info import stream_info
from jetpy.jetstream.models import format_time
from jetpy.jetstream.ports import JetStreamConfig
from jetpy.jetstream.registry import StreamRegistry

__all__ = ["API_LEVEL", "Report"]

API_LEVEL: Final = 1
"""The JetStream API level reported by ``$JS.API.INFO`` (2.11 = 1: Nats-TTL, markers); clients
gate features on it."""


class Report:
    def __init__(
        self, config: JetStreamConfig, registry: StreamRegistry, consumers: ConsumerManager, stats: ApiStats
    ) -> None:
        self.config = config
        self.registry = registry
        self.consumers = consumers
        self.stats = stats

    def routes(self) -> dict[str, Route]:
        return {"INFO": Route("account_info", self.account_info, 0)}

    def usage(self) -> tuple[int, int]:
        """(memory bytes, storage bytes) used by streams."""
        mem = sto = 0
        for s in self.registry.streams.values():
            b = s.store.state().bytes
            if s.config.storage == "memory":
                mem += b
            else:
                sto += b
        return mem, sto

    def _consumer_count(self) -> int:
        return sum(s.consumer_count for s in self.registry.streams.values())

    def account_info(self, args: list[str], hdr: bytes, body: bytes) -> dict[str, Any]:
        mem, sto = self.usage()
        return {
            "memory": mem,
            "storage": sto,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "streams": len(self.registry.streams),
            "consumers": self._consumer_count(),
            "limits": {
                "max_memory": self.config.max_memory,
                "max_storage": self.config.max_storage,
                "max_streams": -1,
                "max_consumers": -1,
                "max_ack_pending": -1,
                "memory_max_stream_bytes": -1,
                "storage_max_stream_bytes": -1,
                "max_bytes_required": False,
            },
            "api": {"level": API_LEVEL, "total": self.stats.total, "errors": self.stats.errors},
        }

    def jsz_stats(self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str) -> dict[str, Any]:
        """nats-server's /jsz document (without server_id/now), measured from the streams."""
        mem, sto = self.usage()
        msgs = nbytes = 0
        details = []
        registry = self.registry.streams
        for name in sorted(registry):
            s = registry[name]
            st = s.store.state()
            msgs += st.msgs
            nbytes += st.bytes
            if streams:
                d: dict[str, Any] = {
                    "name": name,
                    "created": format_time(s.created_ns),
                    "cluster": {"leader": self.config.server_name},
                    "state": msgspec.to_builtins(stream_info(s)["state"]),
                }
                if config:
                    d["config"] = msgspec.to_builtins(s.config)
                cs = self.consumers.consumers(s)
                if consumers and cs:
                    d["consumer_detail"] = [_consumer_detail(c, config) for _, c in sorted(cs.items())]
                details.append(d)
        api = {"total": self.stats.total, "errors": self.stats.errors}
        usage = {"memory": mem, "storage": sto, "reserved_memory": 0, "reserved_storage": 0, "api": api}
        doc: dict[str, Any] = {
            "config": {
                "max_memory": self.config.max_memory,
                "max_storage": self.config.max_storage,
                "store_dir": self.config.store_dir,
            },
            **{k: v for k, v in usage.items() if k != "api"},
            "accounts": 1,
            "ha_assets": 0,
            "api": api,
            "streams": len(registry),
            "consumers": self._consumer_count(),
            "messages": msgs,
            "bytes": nbytes,
        }
        if (accounts or account) and account in ("", "$G"):
            acc: dict[str, Any] = {"name": "$G", "id": "$G", **usage, "accounts": 1, "ha_assets": 0}
            if streams:
                acc["stream_detail"] = details
            doc["account_details"] = [acc]
        return doc


def _consumer_detail(c: Consumer, config: bool) -> dict[str, Any]:
    info: dict[str, Any] = msgspec.to_builtins(c.info(format_time(time.time_ns())))
    info.pop("ts", None)
    if not config:
        info.pop("config", None)
    return info  # a single server reports no cluster for consumers (as nats-server)
