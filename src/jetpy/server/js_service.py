"""JetStreamService: everything the server and its monitor ask of a running JetStream.

Owns the seam between the server layer and whatever implements JetStream: the server stops it
on shutdown and the monitor asks it for /jsz and /varz's report and its commit latencies, and
nothing else. Knows nothing of how JetStream is built or wired to the broker (``js_wiring``'s)
nor of HTTP (``monitor``'s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from jetpy.meters import Histogram

__all__ = ["JetStreamService"]


class JetStreamService(Protocol):
    """A running JetStream, as the server sees it.

    ``jsz_stats`` is synchronous and returns nats-server's JSInfo without ``server_id``/``now``::

        {"config": {"max_memory": int, "max_storage": int, "store_dir": str},  # + "domain"
         "memory": int, "storage": int, "reserved_memory": int, "reserved_storage": int,
         "accounts": int, "ha_assets": int, "api": {"total": int, "errors": int},
         "streams": int, "consumers": int, "messages": int, "bytes": int,
         "account_details": [...]}  # only when accounts or account is asked for

    each account detail being ``{"name", "id", <the usage keys above up to "api">,
    "stream_detail": [...]}`` (streams when ``streams``; each stream's ``consumer_detail`` when
    ``consumers``; stream and consumer ``config`` only when ``config``), as nats-server's /jsz.
    ``account`` ("" for all) restricts ``account_details`` to that account. Paging
    (``offset``/``limit`` over accounts) is the monitor's.
    """

    def jsz_stats(
        self, *, accounts: bool, streams: bool, consumers: bool, config: bool, account: str
    ) -> Mapping[str, Any]: ...

    @property
    def fsync_seconds(self) -> Histogram:
        """The wall time of each group commit's fsync round (for /metrics)."""
        ...

    async def stop(self) -> None:
        """Stop serving: flush and sync what is pending, release the stores."""
