"""Gateway interest modes between two embedded jetpy servers (each a cluster of one): optimistic
sends until the receiving cluster says ``RS-`` (per subject) or ``A-`` (no interest in the
account), ``A+``/``RS+`` when that changes, the switch to interest-only after
``MAX_NO_INTEREST`` refused subjects (``INFO gateway_cmd`` 2, ``RS+`` for every subject, 3), and
the default (nats-server 2.9+'s ``gateway_iom``): interest-only at once, nothing sent without
interest. The inbound side runs optimistic only with ``FORCE_INTEREST_ONLY`` off, as nats-server's
own tests turn its switch off.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from test_dashboard_browser import browser, row_of, until

from conftest import free_port
from jetpy.server.app import Server
from jetpy.server.gateway import FORCE_INTEREST_ONLY
from jetpy.server.gateway_conn import GatewayConnection
from jetpy.server.gateway_interest import INTEREST_ONLY, MAX_NO_INTEREST, OPTIMISTIC
from jetpy.server.monitor_cluster import GatewayzQuery, gatewayz
from jetpy.server.options import GatewayOptions, RemoteGateway, ServerOptions

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def pair(optimistic: bool, monitor: bool = False) -> AsyncIterator[tuple[Server, Server]]:
    FORCE_INTEREST_ONLY["enabled"] = not optimistic
    pa, pb = free_port(), free_port()
    a = Server(_opts("A", pa, "B", pb, monitor))
    b = Server(_opts("B", pb, "A", pa, monitor))
    try:
        await a.start()
        await b.start()
        await _wait(lambda: _outbound(a) is not None and _outbound(b) is not None and _inbound(b) is not None)
        yield a, b
    finally:
        FORCE_INTEREST_ONLY["enabled"] = True
        await a.shutdown()
        await b.shutdown()


def _opts(name: str, port: int, other: str, other_port: int, monitor: bool = False) -> ServerOptions:
    gw = GatewayOptions(
        name=name,
        host="127.0.0.1",
        port=port,
        gateways=[RemoteGateway(other, (f"nats://127.0.0.1:{other_port}",))],
    )
    return ServerOptions(
        host="127.0.0.1", port=0, server_name=f"{name}1", gateway=gw, http_port=-1 if monitor else 0
    )


def _outbound(s: Server) -> GatewayConnection | None:
    assert s.gateways is not None
    return next(iter(s.gateways.out.values()), None)


def _inbound(s: Server) -> GatewayConnection | None:
    assert s.gateways is not None
    return next(iter(s.gateways.inbound.values()), None)


def _accounts(s: Server, side: str) -> object:
    """/gatewayz?acc_name=$G&subs=1's accounts of ``s``'s one outbound or inbound gateway (the
    system account crosses too, its events refused like any subject nobody wants)."""
    doc = gatewayz(s.gateways, s.server_id, GatewayzQuery(account="$G", subs="1"))
    if side == "outbound":
        (rgw,) = doc["outbound_gateways"].values()
    else:
        ((rgw,),) = doc["inbound_gateways"].values()
    return rgw["accounts"]


async def _wait(pred: Callable[[], bool], within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_optimistic_then_interest_only_after_refused_subjects() -> None:
    async with pair(optimistic=True) as (a, b):
        out, inb = _outbound(a), _inbound(b)
        assert out is not None and inb is not None and not out.iom
        na, nb = await nats.connect(a.client_url), await nats.connect(b.client_url)
        kept: list[bytes] = []

        async def cb(msg: Msg) -> None:
            kept.append(msg.data)

        await nb.subscribe("keep", cb=cb)
        await nb.flush()
        interest = out.interests[b"$G"]
        assert interest is not None and interest.mode == OPTIMISTIC and interest.catch_all is not None
        # optimistic: every subject is sent; the first message of each that nobody wants is
        # refused (RS-) and not sent again
        for _ in range(3):
            await na.publish("nobody.0", b"x")
        await na.flush()
        await _wait(lambda: b"nobody.0" in interest.refused)
        optimistic = {
            "name": "$G",
            "interest_mode": "Optimistic",
            "no_interest_count": 1,
            "interest_only_threshold": MAX_NO_INTEREST,
        }
        assert _accounts(a, "outbound") == _accounts(b, "inbound") == [optimistic]
        sent = out.out_msgs
        await na.publish("nobody.0", b"x")
        await na.publish("keep", b"k1")
        await na.flush()
        await _wait(lambda: kept == [b"k1"])
        assert out.out_msgs == sent + 1  # only "keep" went
        # past MAX_NO_INTEREST refused subjects, the account switches to interest-only
        for i in range(1, MAX_NO_INTEREST + 3):
            await na.publish(f"nobody.{i}", b"x")
        await na.flush()
        await _wait(lambda: interest.mode == INTEREST_ONLY)
        told = inb.told[b"$G"]
        assert told.mode == INTEREST_ONLY and interest.catch_all is None and not interest.refused
        assert (b"keep", None) in interest.subs
        assert _accounts(a, "outbound") == [
            {
                "name": "$G",
                "interest_mode": "Interest-Only",
                "interest_only_threshold": MAX_NO_INTEREST,
                "num_subs": 1,
                "subscriptions_list": ["keep"],
            }
        ]
        assert _accounts(b, "inbound") == [
            {"name": "$G", "interest_mode": "Interest-Only", "interest_only_threshold": MAX_NO_INTEREST}
        ]
        received = inb.in_msgs
        for i in range(50):
            await na.publish(f"other.{i}", b"x")
        await na.publish("keep", b"k2")
        await na.flush()
        await _wait(lambda: kept == [b"k1", b"k2"])
        assert inb.in_msgs == received + 1  # interest-only: nothing without interest crosses
        await na.close()
        await nb.close()


async def test_account_without_interest_is_refused_then_wanted_again() -> None:
    async with pair(optimistic=True) as (a, b):
        out, inb = _outbound(a), _inbound(b)
        assert out is not None and inb is not None
        na, nb = await nats.connect(a.client_url), await nats.connect(b.client_url)
        await na.publish("x", b"1")
        await na.flush()
        interest = out.interests[b"$G"]
        assert interest is not None
        await _wait(lambda: interest.none)  # A-: B has no interest at all in $G
        assert interest.catch_all is None and b"$G" in inb.told_none
        received = inb.in_msgs
        await na.publish("x", b"2")
        await na.flush()
        await asyncio.sleep(0.2)
        assert inb.in_msgs == received
        got: list[bytes] = []

        async def cb(msg: Msg) -> None:
            got.append(msg.data)

        await nb.subscribe("x", cb=cb)
        await nb.flush()
        await _wait(lambda: not interest.none)  # A+
        await na.publish("x", b"3")
        await na.flush()
        await _wait(lambda: got == [b"3"])
        await na.close()
        await nb.close()


async def test_interest_only_at_once_by_default() -> None:
    async with pair(optimistic=False) as (a, b):
        out, inb = _outbound(a), _inbound(b)
        assert out is not None and inb is not None and out.iom
        await _wait(lambda: (i := out.interests.get(b"$G")) is not None and i.mode == INTEREST_ONLY)
        na = await nats.connect(a.client_url)
        for i in range(100):
            await na.publish(f"nobody.{i}", b"x")
        await na.flush()
        await asyncio.sleep(0.2)
        assert inb.in_msgs == 0 and out.out_msgs == 0
        await na.close()


async def test_a_gateway_on_every_interface_tells_a_reachable_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Listening on 0.0.0.0 without advertise, the URL told to other clusters (INFO, /gatewayz)
    is the machine's first address other than loopback, as nats-server picks it."""
    real = socket.getaddrinfo

    def addresses(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == socket.gethostname():
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 0)),
            ]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", addresses)
    gw = GatewayOptions(name="A", host="0.0.0.0", port=-1)
    s = Server(ServerOptions(host="127.0.0.1", port=0, gateway=gw))
    await s.start()
    try:
        assert s.gateways is not None
        port = s.gateways.port
        assert s.gateways.url == f"10.1.2.3:{port}"
        assert b'"host":"10.1.2.3"' in s.gateways.greeting()
        doc = gatewayz(s.gateways, s.server_id, GatewayzQuery())
        assert (doc["host"], doc["port"]) == ("10.1.2.3", port)
    finally:
        await s.shutdown()


async def test_the_dashboard_shows_the_gateways(tmp_path: Path) -> None:
    async with pair(optimistic=False, monitor=True) as (a, b):
        driver = await asyncio.to_thread(browser, tmp_path / "profile")
        try:
            await asyncio.to_thread(driver.get, a.monitor_url + "/dashboard?refresh=500")
            out = await until(driver, "the outbound gateway", lambda d: row_of(d, "gateways", "outbound"))
            inb = await until(driver, "the inbound gateway", lambda d: row_of(d, "gateways", "inbound"))
            assert out[1] == inb[1] == "B" and out[2] == inb[2] == b.server_id
            overview = await asyncio.to_thread(driver.find_element, "id", "overview")
            assert "A (1 clusters)" in overview.text
            logs = await asyncio.to_thread(driver.get_log, "browser")
            assert [e for e in logs if e.get("level") == "SEVERE"] == []
        finally:
            await asyncio.to_thread(driver.quit)
