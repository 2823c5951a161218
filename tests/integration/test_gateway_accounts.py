"""Accounts across gateways, as processes: two clusters with accounts A and B (A exports a
service and a stream, B imports both) and the global account, all jetpy or with one cluster a
nats-server 2.15.1 (and both nats-server, the reference for what is expected). Each direction:
an account's subscribers get only their account's messages, queue groups per account,
request/reply in each account, B's import of A's service answered across the gateway and B's
import of A's stream fed from across it; a server ping in the system account answered by every
server of both clusters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from cluster_support import JETPY, NEWEST, wait_mesh
from jwt_issuer import account_jwt, account_key, operator_jwt, operator_key, user_jwt, user_key, write_creds
from super_support import Node, super_cluster

pytestmark = pytest.mark.timeout(120)

ACCOUNTS = """
authorization { users: [{user: g, password: g}] }
accounts {
  A: {
    users: [{user: a, password: a}]
    exports: [{service: "svc.echo"}, {stream: "news.>"}]
  }
  B: {
    users: [{user: b, password: b}]
    imports: [{service: {account: A, subject: "svc.echo"}}, {stream: {account: A, subject: "news.>"}}]
  }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""

USERS = {"A": "a", "B": "b", "G": "g"}
SYSTEM = "sys"

LAYOUTS = {
    "all-jetpy": {"C1": [JETPY, JETPY], "C2": [JETPY]},
    "C2-is-2.15.1": {"C1": [JETPY], "C2": [NEWEST]},
    "all-2.15.1": {"C1": [NEWEST], "C2": [NEWEST]},
}


def _url(node: Node, account: str) -> str:
    user = USERS.get(account, SYSTEM)
    return node.url.replace("nats://", f"nats://{user}:{user}@", 1)


async def _ready(nc: NATS, subject: str, within: float = 10.0) -> None:
    """Until a request on ``subject`` finds a responder (its interest crossed the gateway)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            await nc.request(subject, b"probe", timeout=1)
            return
        except (NoRespondersError, nats.errors.TimeoutError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _until(pred: object, within: float = 5.0) -> None:
    assert callable(pred)
    deadline = asyncio.get_running_loop().time() + within
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(0.05)


Connect = Callable[[Node, str], Awaitable[NATS]]


async def _user(node: Node, account: str) -> NATS:
    return await nats.connect(_url(node, account))


async def _traffic(
    pub: Node, sub: Node, tag: str, accounts: Sequence[str] = tuple(USERS), connect: Connect = _user
) -> dict[str, object]:
    """Publishers and requesters on ``pub``, subscribers and responders on ``sub``: what each
    account's subscribers got (B's imports of A's service and stream: when A and B are configured
    by the accounts block)."""
    imports = connect is _user
    far = {acc: await connect(sub, acc) for acc in accounts}
    near = {acc: await connect(pub, acc) for acc in accounts}
    try:
        got: dict[str, list[bytes]] = {acc: [] for acc in accounts}
        queued: dict[str, list[bytes]] = {acc: [] for acc in accounts}
        news: list[tuple[str, bytes]] = []
        for acc, nc in far.items():

            async def plain(msg: Msg, acc: str = acc) -> None:
                got[acc].append(msg.data)

            async def worker(msg: Msg, acc: str = acc) -> None:
                queued[acc].append(msg.data)

            async def answer(msg: Msg, acc: str = acc) -> None:
                await msg.respond(f"{acc}:".encode() + msg.data)

            await nc.subscribe(f"{tag}.iso", cb=plain)
            await nc.subscribe(f"{tag}.work", queue="workers", cb=worker)
            await nc.subscribe(f"{tag}.work", queue="workers", cb=worker)
            await nc.subscribe(f"{tag}.rr", cb=answer)
            if acc == "A" and imports:
                await nc.subscribe("svc.echo", cb=answer)
            await nc.flush()

        async def headline(msg: Msg) -> None:
            news.append((msg.subject, msg.data))

        if imports:  # B's stream import of A's news, subscribed on the publishing side
            await near["B"].subscribe(f"news.{tag}.>", cb=headline)
            await near["B"].flush()
        for nc in near.values():
            await _ready(nc, f"{tag}.rr")
        if imports:
            await _ready(near["B"], "svc.echo")
        await asyncio.sleep(0.3)  # the queue groups' and the stream import's interest too

        for acc, nc in near.items():
            await nc.publish(f"{tag}.iso", acc.encode())
            for i in range(10):
                await nc.publish(f"{tag}.work", b"%s%d" % (acc.encode(), i))
            await nc.flush()
        replies = {acc: (await nc.request(f"{tag}.rr", b"hi", timeout=5)).data for acc, nc in near.items()}
        out: dict[str, object] = {}
        if imports:
            await far["A"].publish(f"news.{tag}.x", b"extra")
            await far["A"].flush()
            out["service"] = (await near["B"].request("svc.echo", b"ping", timeout=5)).data
        await _until(
            lambda: (
                sum(map(len, queued.values())) >= 10 * len(accounts)
                and all(got.values())
                and (news or not imports)
            )
        )
        await asyncio.sleep(0.3)  # anything that should not come
        out.update(
            got={acc: sorted(v) for acc, v in got.items()},
            queued={acc: sorted(v) for acc, v in queued.items()},
            replies=replies,
        )
        if imports:
            out["news"] = news
        return out
    finally:
        for nc in (*far.values(), *near.values()):
            await nc.close()


def _expected(tag: str, accounts: Sequence[str] = tuple(USERS), imports: bool = True) -> dict[str, object]:
    out: dict[str, object] = {
        "got": {acc: [acc.encode()] for acc in accounts},
        "queued": {acc: sorted(b"%s%d" % (acc.encode(), i) for i in range(10)) for acc in accounts},
        "replies": {acc: f"{acc}:hi".encode() for acc in accounts},
    }
    if imports:
        out.update(service=b"A:ping", news=[(f"news.{tag}.x", b"extra")])
    return out


@pytest.mark.parametrize("layout", list(LAYOUTS))
async def test_accounts_cross_gateways_in_their_own_name(tmp_path: Path, layout: str) -> None:
    with super_cluster(tmp_path, LAYOUTS[layout], extra=ACCOUNTS) as clusters:
        nodes = [n for members in clusters.values() for n in members]
        await wait_mesh([_url(n, "G") for n in nodes], within=20.0)
        c1, c2 = clusters["C1"][-1], clusters["C2"][0]
        assert await _traffic(c1, c2, "one") == _expected("one")
        assert await _traffic(c2, c1, "two") == _expected("two")
        # the system account crosses too: a server ping is answered by every server
        for node in (c1, c2):
            assert await _ping(node, len(nodes)) == sorted(n.name for n in nodes)


async def _ping(node: Node, servers: int) -> list[str]:
    """The names of the servers that answer ``$SYS.REQ.SERVER.PING`` asked on ``node`` (waiting
    for ``servers`` of them, then a little longer for any other)."""
    nc = await nats.connect(_url(node, "SYS"))
    try:
        names: list[str] = []

        async def answer(msg: Msg) -> None:
            names.append(json.loads(msg.data)["server"]["name"])

        inbox = nc.new_inbox()
        await nc.subscribe(inbox, cb=answer)
        await nc.flush()
        await nc.publish("$SYS.REQ.SERVER.PING", b"", reply=inbox)
        await _until(lambda: len(names) >= servers)
        await asyncio.sleep(0.2)
        return sorted(names)
    finally:
        await nc.close()


@pytest.mark.parametrize("layout", ["all-jetpy", "C2-is-2.15.1"])
async def test_an_operators_accounts_cross_gateways(tmp_path: Path, layout: str) -> None:
    """Operator mode, the accounts preloaded (memory resolver): named by their public keys on
    the wire, each crosses in its own name."""
    op, sys_acc, x, y = operator_key(), account_key(), account_key(), account_key()
    op_file = tmp_path / "op.jwt"
    op_file.write_text(operator_jwt(op, system_account=sys_acc.public))
    preload = "\n".join(
        f"  {k.public}: {account_jwt(k, op, name)}" for k, name in ((sys_acc, "SYS"), (x, "X"), (y, "Y"))
    )
    extra = (
        f'operator: "{op_file}"\nsystem_account: {sys_acc.public}\n'
        f"resolver: MEMORY\nresolver_preload {{\n{preload}\n}}\n"
    )
    creds: dict[str, str] = {}
    for name, acc in (("X", x), ("Y", y)):
        user = user_key()
        creds[name] = write_creds(tmp_path / f"{name}.creds", user_jwt(user, acc, name=name), user)

    async def connect(node: Node, account: str) -> NATS:
        return await nats.connect(node.url, user_credentials=creds[account])

    layouts = {"all-jetpy": {"C1": [JETPY], "C2": [JETPY]}, "C2-is-2.15.1": {"C1": [JETPY], "C2": [NEWEST]}}
    with super_cluster(tmp_path, layouts[layout], extra=extra) as clusters:
        (c1,), (c2,) = clusters["C1"], clusters["C2"]
        for pub, sub, tag in ((c1, c2, "one"), (c2, c1, "two")):
            assert await _traffic(pub, sub, tag, ("X", "Y"), connect) == _expected(tag, ("X", "Y"), False)
