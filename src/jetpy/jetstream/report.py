"""What JetStream reports about itself: account usage and limits (``$JS.API.INFO``) and
nats-server's ``/jsz`` document.

Owns: the measurements (memory and storage in use, stream and consumer counts, messages and
bytes) and the configured limits as reported, built as the typed documents (``AccountInfo``,
``jsz_models.JSInfo``). Also answers ``$JS.API.INFO`` (its route). Must not know: the network,
how streams or consumers work.
"""

from __future__ import annotations

import time
from typing import Any, Final

import msgspec

from jetpy.jetstream.api.messages import AccountInfoResponse
from jetpy.jetstream.api.router import ApiStats, Route
from jetpy.jetstream.consumers.consumer import Consumer
from jetpy.jetstream.consumers.manager import ConsumerManager
from jetpy.jetstream.info import stream_state
from jetpy.jetstream.jsz_models import AccountDetail, JSInfo, JszConfig, StreamDetail
from jetpy.jetstream.models import (
    AccountInfo,
    AccountLimits,
    ClusterInfo,
    ConsumerInfo,
    JetStreamApiStats,
    format_time,
)
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

    def routes(self) -> dict[str, Route[Any]]:
        return {"INFO": Route(AccountInfoResponse, self.account_info, 0)}

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
        return sum(s.consumer_count - s.direct_count for s in self.registry.streams.values())

    def account_info(self, args: list[str], hdr: bytes, body: bytes) -> AccountInfoResponse:
        mem, sto = self.usage()
        info = AccountInfo(
            memory=mem,
            storage=sto,
            reserved_memory=self.registry.resources.reserved("memory"),
            reserved_storage=self.registry.resources.reserved("file"),
            streams=len(self.registry.streams),
            consumers=self._consumer_count(),
            limits=AccountLimits(),  # the account's own limits: none until accounts (-1, as nats-server)
            api=JetStreamApiStats(level=API_LEVEL, total=self.stats.total, errors=self.stats.errors),
        )
        return AccountInfoResponse.of(info)

    def jsz_stats(
        self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str
    ) -> dict[str, Any]:
        """nats-server's /jsz document (without server_id/now), measured from the streams, as
        plain JSON values (the monitor's contract)."""
        mem, sto = self.usage()
        res_mem, res_sto = (
            self.registry.resources.reserved("memory"),
            self.registry.resources.reserved("file"),
        )
        msgs = nbytes = 0
        details: list[StreamDetail] = []
        registry = self.registry.streams
        leader = ClusterInfo(leader=self.config.server_name)
        for name in sorted(registry):
            s = registry[name]
            state = stream_state(s)
            msgs += state.messages
            nbytes += state.bytes
            if streams:
                cs = self.consumers.listed(s) if consumers else {}
                details.append(
                    StreamDetail(
                        name=name,
                        created=format_time(s.created_ns),
                        cluster=leader,
                        config=s.config if config else None,
                        state=state,
                        consumer_detail=[_consumer_detail(c, config) for _, c in sorted(cs.items())],
                    )
                )
        api = JetStreamApiStats(total=self.stats.total, errors=self.stats.errors)
        account_details: list[AccountDetail] = []
        if (accounts or account) and account in ("", "$G"):
            account_details.append(
                AccountDetail(
                    name="$G",
                    id="$G",
                    memory=mem,
                    storage=sto,
                    reserved_memory=res_mem,
                    reserved_storage=res_sto,
                    accounts=1,
                    api=api,
                    stream_detail=details,
                )
            )
        doc = JSInfo(
            config=JszConfig(
                max_memory=self.config.max_memory,
                max_storage=self.config.max_storage,
                store_dir=self.config.store_dir,
            ),
            memory=mem,
            storage=sto,
            reserved_memory=res_mem,
            reserved_storage=res_sto,
            accounts=1,
            api=api,
            streams=len(registry),
            consumers=self._consumer_count(),
            messages=msgs,
            bytes=nbytes,
            account_details=account_details,
        )
        out: dict[str, Any] = msgspec.to_builtins(doc)
        return out


def _consumer_detail(c: Consumer, config: bool) -> ConsumerInfo:
    """A consumer as /jsz details it: no ``ts``, the config only when asked for, and no cluster
    on a single server (as nats-server)."""
    info = c.info(time.time_ns())
    return msgspec.structs.replace(info, ts=None, config=info.config if config else None)
