"""Hubs and leaf nodes for the tests: embedded jetpy servers (options for either role) and one
round of core-NATS traffic across a leaf link that reports what was delivered where, so that
every pairing (jetpy or nats-server on either end) is held to the same deliveries."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from jetpy.server.app import Server
from jetpy.server.options import LeafNodeOptions, LeafRemote, ServerOptions

__all__ = ["EXPECTED", "Box", "exercise", "hub_options", "leaf_options", "linked", "reach", "wait_links"]


def hub_options(
    name: str = "hub", base: ServerOptions | None = None, leaf_port: int = -1, **leaf: Any
) -> ServerOptions:
    """A hub's options: a leaf node listener (on any free port unless ``leaf_port``; ``leaf``:
    LeafNodeOptions fields)."""
    return dataclasses.replace(
        base if base is not None else ServerOptions(),
        host="127.0.0.1",
        port=0,
        server_name=name,
        leafnodes=LeafNodeOptions(host="127.0.0.1", port=leaf_port, **leaf),
    )


def leaf_options(
    urls: list[str], name: str = "leaf", base: ServerOptions | None = None, **remote: Any
) -> ServerOptions:
    """A leaf node's options: one remote at ``urls`` (``remote``: LeafRemote fields), redialled
    a tenth of a second apart."""
    return dataclasses.replace(
        base if base is not None else ServerOptions(),
        host="127.0.0.1",
        port=0,
        server_name=name,
        leafnodes=LeafNodeOptions(remotes=[LeafRemote(tuple(urls), **remote)], reconnect=0.1),
    )


async def wait_links(srv: Server, n: int = 1, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while srv.leafnodes is None or len(srv.leafnodes.registered_links()) != n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{srv.server_name}: not {n} leaf links in time")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def linked(
    hub: ServerOptions, leaf: Callable[[int], ServerOptions]
) -> AsyncIterator[tuple[Server, Server]]:
    """An embedded hub and an embedded leaf node (``leaf``: its options for the hub's leaf port),
    linked."""
    h = Server(hub)
    await h.start()
    lf: Server | None = None
    try:
        assert h.leafnodes is not None
        lf = Server(leaf(h.leafnodes.port))
        await lf.start()
        await wait_links(h)
        await wait_links(lf)
        yield h, lf
    finally:
        if lf is not None:
            await lf.shutdown()
        await h.shutdown()


class Box:
    """A subscription's messages, kept in order."""

    def __init__(self) -> None:
        self.msgs: list[Msg] = []

    async def cb(self, msg: Msg) -> None:
        self.msgs.append(msg)

    def data(self) -> list[bytes]:
        return [m.data for m in self.msgs if m.data != b"probe"]


async def reach(pub: Client, subject: str, box: Box, within: float = 10.0) -> None:
    """Publish probes on ``subject`` until ``box`` gets one (the interest crossed the link),
    then forget them."""
    deadline = time.monotonic() + within
    while not any(m.data == b"probe" for m in box.msgs):
        if time.monotonic() > deadline:
            raise AssertionError(f"no interest in {subject} reached the other side in time")
        await pub.publish(subject, b"probe")
        await pub.flush()
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.05)  # probes still on their way
    box.msgs = [m for m in box.msgs if m.data != b"probe"]


async def _settle(*ncs: Client) -> None:
    for nc in ncs:
        await nc.flush()
    await asyncio.sleep(0.1)


async def exercise(hub_url: str, leaf_url: str) -> dict[str, Any]:
    """Core NATS across a leaf link: subjects and wildcards both ways, headers, request/reply
    both ways, no responders, queue groups (local members first, one delivery per message).
    Returns what each side got."""
    hub = await nats.connect(hub_url)
    leaf = await nats.connect(leaf_url)
    out: dict[str, Any] = {}
    try:
        orders, events = Box(), Box()
        await leaf.subscribe("orders.>", cb=orders.cb)
        await hub.subscribe("events.*", cb=events.cb)
        await reach(hub, "orders.probe", orders)
        await reach(leaf, "events.probe", events)
        await hub.publish("orders.new", b"o1", headers={"K": "v"})
        await hub.publish("orders.eu.new", b"o2")
        await hub.publish("other", b"x")
        await leaf.publish("events.a", b"e1")
        await leaf.publish("events.a.b", b"no")
        await _settle(hub, leaf)
        out["orders"] = [(m.subject, m.data, dict(m.headers or {})) for m in orders.msgs]
        out["events"] = [(m.subject, m.data) for m in events.msgs]

        async def answer(msg: Msg, text: bytes) -> None:
            await msg.respond(text + b":" + msg.data)

        hub_svc, leaf_svc = Box(), Box()
        await hub.subscribe("svc.hub", cb=partial(answer, text=b"hub"))
        await leaf.subscribe("svc.leaf", cb=partial(answer, text=b"leaf"))
        await hub.subscribe("svc.hub.probe", cb=hub_svc.cb)
        await leaf.subscribe("svc.leaf.probe", cb=leaf_svc.cb)
        await reach(leaf, "svc.hub.probe", hub_svc)
        await reach(hub, "svc.leaf.probe", leaf_svc)
        r1 = await leaf.request("svc.hub", b"q1", timeout=5)
        r2 = await hub.request("svc.leaf", b"q2", timeout=5, headers={"H": "1"})
        out["replies"] = [r1.data, r2.data]
        refused = []
        for nc in (leaf, hub):
            try:
                await nc.request("nobody.here", b"?", timeout=2)
            except NoRespondersError:
                refused.append(True)
        out["no_responders"] = refused

        leaf_members, hub_member = [Box(), Box()], Box()
        for box in leaf_members:
            await leaf.subscribe("work", queue="g", cb=box.cb)
        await _reach_group(hub, leaf_members)
        hsub = await hub.subscribe("work", queue="g", cb=hub_member.cb)
        await hub.flush()
        for i in range(20):
            await hub.publish("work", b"h%d" % i)
        for i in range(20):
            await leaf.publish("work", b"l%d" % i)
        await _settle(hub, leaf)
        from_hub = sorted(hub_member.data())
        from_leaf = sorted(d for box in leaf_members for d in box.data())
        out["queue_local"] = (len(from_hub), len(from_leaf), set(from_hub) == {b"h%d" % i for i in range(20)})
        await hsub.unsubscribe()
        for box in leaf_members:
            box.msgs.clear()
        await hub.flush()
        for i in range(20):
            await hub.publish("work", b"r%d" % i)
        await _settle(hub, leaf)
        got = sorted(d for box in leaf_members for d in box.data())
        out["queue_remote"] = got == sorted(b"r%d" % i for i in range(20))
    finally:
        await hub.close()
        await leaf.close()
    return out


async def _reach_group(pub: Client, members: list[Box], within: float = 10.0) -> None:
    """Probe a queue group from the other side until one of its members gets a probe."""
    deadline = time.monotonic() + within
    while not any(m.data == b"probe" for box in members for m in box.msgs):
        if time.monotonic() > deadline:
            raise AssertionError("the queue group did not reach the other side in time")
        await pub.publish("work", b"probe")
        await pub.flush()
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    for box in members:
        box.msgs = [m for m in box.msgs if m.data != b"probe"]


EXPECTED: dict[str, Any] = {
    "orders": [("orders.new", b"o1", {"K": "v"}), ("orders.eu.new", b"o2", {})],
    "events": [("events.a", b"e1")],
    "replies": [b"hub:q1", b"leaf:q2"],
    "no_responders": [True, True],
    "queue_local": (20, 20, True),
    "queue_remote": True,
}
"""What :func:`exercise` reports across a working leaf link (nats-server's on both ends)."""
