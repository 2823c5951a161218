"""A fault-injecting TCP proxy in front of every server's route port, driven by the harness.

Each server advertises its proxy as its route address and dials its peers' proxies, so every
route crosses one (gossip included). A proxy knows the server behind it and learns who dialled
from the route handshake (the dialling server's INFO names it), so faults are set per ordered
pair of servers:

* ``cut(a, b)``: nothing from ``a`` reaches ``b`` (one way). Bytes are *held*, as a network
  that drops packets holds TCP data in the sender's buffers: the route times out on its pings
  (or its handshake), and bytes still held when the link heals are delivered late, as TCP
  retransmits them. ``partition(side_a, side_b)`` cuts both ways between two sets.
* ``delay(a, b, seconds)``: everything from ``a`` to ``b`` arrives that much later (latency;
  over TCP, packet loss is latency too).
* ``reset()``: every proxied connection is closed at once (an RST on every link).
* ``heal()``: every cut and delay lifted.

Bytes held per direction are bounded (:data:`MAX_HELD`): past it the connection is closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Iterable
from typing import Final

MAX_HELD: Final = 64 << 20
CHUNK: Final = 64 << 10


class Link:
    """One proxied connection: the dialler (``src``, once known) and the server behind (``dst``)."""

    def __init__(self, proxy: FaultProxy, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.src = ""
        self.identified = asyncio.Event()
        self.closed = False
        self.gone = asyncio.Event()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.identified.set()
            self.gone.set()
            for w in (self.client, self.server):
                w.close()


class _Direction:
    """Bytes in flight one way: read as they come, written when the faults allow."""

    def __init__(self) -> None:
        self.queue: deque[tuple[float, bytes]] = deque()
        self.held = 0
        self.eof = False
        self.data = asyncio.Event()


class Faults:
    """The fault state shared by every proxy of a cluster."""

    def __init__(self) -> None:
        self.cuts: set[tuple[str, str]] = set()
        self.delays: dict[tuple[str, str], float] = {}
        self.changed = asyncio.Event()
        self.proxies: list[FaultProxy] = []

    def cut(self, a: str, b: str) -> None:
        self.cuts.add((a, b))
        self._notify()

    def partition(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        side_b = list(side_b)
        for a in side_a:
            for b in side_b:
                self.cuts.add((a, b))
                self.cuts.add((b, a))
        self._notify()

    def delay(self, a: str, b: str, seconds: float) -> None:
        self.delays[(a, b)] = seconds
        self._notify()

    def heal(self) -> None:
        self.cuts.clear()
        self.delays.clear()
        self._notify()

    def reset(self) -> None:
        for p in self.proxies:
            for link in list(p.links):
                link.close()

    def blocked(self, a: str, b: str) -> bool:
        return (a, b) in self.cuts

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class FaultProxy:
    """The proxy in front of one server's route port."""

    def __init__(self, faults: Faults, name: str, target_port: int, host: str = "127.0.0.1") -> None:
        self.faults = faults
        self.name = name  # the server behind it
        self.target = (host, target_port)
        self.links: set[Link] = set()
        self.port = 0
        self._server: asyncio.Server | None = None
        faults.proxies.append(self)

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self.links):
            link.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sreader, swriter = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        link = Link(self, writer, swriter)
        self.links.add(link)
        up, down = _Direction(), _Direction()
        tasks = [
            asyncio.ensure_future(self._read(link, reader, up, True)),
            asyncio.ensure_future(self._write(link, swriter, up, True)),
            asyncio.ensure_future(self._read(link, sreader, down, False)),
            asyncio.ensure_future(self._write(link, writer, down, False)),
        ]
        try:
            # until both directions are done (a writer that ends closes the link), or one fails
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            link.close()
            for t in tasks:
                if t.done() and not t.cancelled():
                    t.exception()  # (retrieved: a reset connection is what faults are for)
                t.cancel()
            self.links.discard(link)

    def _ends(self, link: Link, upstream: bool) -> tuple[str, str]:
        return (link.src, self.name) if upstream else (self.name, link.src)

    async def _read(self, link: Link, reader: asyncio.StreamReader, d: _Direction, upstream: bool) -> None:
        head = b""
        while not link.closed:
            data = await reader.read(CHUNK)
            if not data:
                break
            if upstream and not link.src:
                head += data
                link.src = _dialler(head)
                if not link.src:
                    if len(head) > 1 << 20:
                        break
                    continue
                link.identified.set()
                data, head = head, b""
            if not link.src:
                await link.identified.wait()
            a, b = self._ends(link, upstream)
            d.queue.append((time.monotonic() + self.faults.delays.get((a, b), 0.0), data))
            d.held += len(data)
            d.data.set()
            if d.held > MAX_HELD:
                break
        d.eof = True
        d.data.set()

    async def _write(self, link: Link, writer: asyncio.StreamWriter, d: _Direction, upstream: bool) -> None:
        faults = self.faults
        while not link.closed:
            if not d.queue:
                if d.eof:
                    break
                d.data.clear()
                await d.data.wait()
                continue
            if faults.blocked(*self._ends(link, upstream)):
                await _first(faults.changed, link.gone)
                continue
            at, chunk = d.queue[0]
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            d.queue.popleft()
            d.held -= len(chunk)
            writer.write(chunk)
            await writer.drain()
        link.close()


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def _dialler(head: bytes) -> str:
    """The dialling server's name, from the INFO it sends after its CONNECT ("" until seen)."""
    for line in head.split(b"\r\n"):
        if line.startswith(b"INFO "):
            try:
                return str(json.loads(line[5:]).get("server_name", "")) or "?"
            except ValueError:
                return "?"
    return ""
