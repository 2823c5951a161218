"""What JetStream reports about itself: account usage and limits (``$JS.API.INFO``) and
nats-server's ``/jsz`` document.

Owns: the measurements of one account's JetStream (memory and storage in use, stream and
consumer counts, messages and bytes) and its limits as reported, built as the typed documents
(``AccountInfo``; its ``jsz_models.AccountDetail``), the server's /jsz over every account
(:func:`jsz_stats`), and ``$JS.API.INFO`` (its route). Must not know: the network,
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
    ClusterInfo,
    ConsumerInfo,
    JetStreamApiStats,
    format_time,
)
from jetpy.jetstream.ports import JetStreamConfig
from jetpy.jetstream.registry import StreamRegistry

__all__ = ["API_LEVEL", "AccountTotals", "Report", "jsz_stats"]

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
            limits=self.config.limits,  # the account's own (-1: none), as nats-server reports them
            domain=self.config.domain,
            api=JetStreamApiStats(level=API_LEVEL, total=self.stats.total, errors=self.stats.errors),
        )
        return AccountInfoResponse.of(info)

    def account_detail(self, *, streams: bool, consumers: bool, config: bool) -> AccountTotals:
        """This account as /jsz details it, with the totals the server's document adds up."""
        mem, sto = self.usage()
        res_mem = self.registry.resources.reserved("memory")
        res_sto = self.registry.resources.reserved("file")
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
        account = self.config.account
        detail = AccountDetail(
            name=account,
            id=account,
            memory=mem,
            storage=sto,
            reserved_memory=res_mem,
            reserved_storage=res_sto,
            accounts=1,
            api=JetStreamApiStats(total=self.stats.total, errors=self.stats.errors),
            stream_detail=details,
        )
        return AccountTotals(detail, len(registry), self._consumer_count(), msgs, nbytes)


class AccountTotals(msgspec.Struct, frozen=True):
    """One account's /jsz detail and what the server's totals add up from it."""

    detail: AccountDetail
    streams: int
    consumers: int
    messages: int
    bytes: int


def jsz_stats(
    config: JetStreamConfig,
    reports: list[Report],
    *,
    accounts: bool,
    streams: bool,
    consumers: bool,
    config_detail: bool,
    account: str,
) -> dict[str, Any]:
    """nats-server's /jsz document (without server_id/now) over every account's JetStream
    (``config``: the server's settings), as plain JSON values (the monitor's contract);
    ``account_details`` when ``accounts`` is asked for, or only ``account``'s."""
    totals = [
        r.account_detail(streams=streams, consumers=consumers, config=config_detail)
        for r in sorted(reports, key=lambda r: r.config.account)
    ]
    mem = sum(t.detail.memory for t in totals)
    sto = sum(t.detail.storage for t in totals)
    api = JetStreamApiStats(
        total=sum(t.detail.api.total for t in totals), errors=sum(t.detail.api.errors for t in totals)
    )
    details = [t.detail for t in totals if (accounts or account) and account in ("", t.detail.name)]
    doc = JSInfo(
        config=JszConfig(
            max_memory=config.max_memory,
            max_storage=config.max_storage,
            store_dir=config.store_dir,
            domain=config.domain,
        ),
        memory=mem,
        storage=sto,
        reserved_memory=sum(t.detail.reserved_memory for t in totals),
        reserved_storage=sum(t.detail.reserved_storage for t in totals),
        accounts=len(totals),
        api=api,
        streams=sum(t.streams for t in totals),
        consumers=sum(t.consumers for t in totals),
        messages=sum(t.messages for t in totals),
        bytes=sum(t.bytes for t in totals),
        account_details=details,
    )
    out: dict[str, Any] = msgspec.to_builtins(doc)
    return out


def _consumer_detail(c: Consumer, config: bool) -> ConsumerInfo:
    """A consumer as /jsz details it: no ``ts``, the config only when asked for, and no cluster
    on a single server (as nats-server)."""
    info = c.info(time.time_ns())
    return msgspec.structs.replace(info, ts=None, config=info.config if config else None)
