"""jetpy.server.link_service: what the route, gateway and leaf node services share.

Owns: a link service's background tasks (dialling, redialling) and its shutdown: tasks
cancelled, the listener closed, every link closed and awaited (2 s at most), then the
listener's end awaited. Must not know: which kind of link, its protocol, its interest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any

from jetpy.server.peer_link import PeerLink

__all__ = ["LinkService"]


class LinkService:
    """Base of :class:`~jetpy.server.cluster.Cluster`, :class:`~jetpy.server.gateway.Gateways`
    and :class:`~jetpy.server.leafnodes.LeafNodes`."""

    def __init__(self) -> None:
        self._listener: asyncio.Server | None = None
        self._running = False
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_links(self, links: Iterable[PeerLink]) -> None:
        """Shutdown, first part: no more dialling or accepting, every link closed."""
        self._running = False
        for task in list(self._tasks):
            task.cancel()
        if self._listener is not None:
            self._listener.close()
        closing = list(links)
        for link in closing:
            link.close("Server Shutdown")
        if closing:
            await asyncio.wait([asyncio.ensure_future(x.wait_closed()) for x in closing], timeout=2.0)

    async def _close_listener(self) -> None:
        """Shutdown, last part: the listener's end awaited."""
        if self._listener is not None:
            try:
                await asyncio.wait_for(self._listener.wait_closed(), 2.0)
            except TimeoutError:
                pass
            self._listener = None
