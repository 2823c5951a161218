"""The full account resolver against nats-server 2.15.1: one operator configuration with
``resolver { type: full, dir, limit }`` (the system account preloaded), with and without
JetStream, the same ``$SYS.REQ.CLAIMS`` requests from the system account's user to each server
and the same replies (the ``server`` block left out): UPDATE (both subjects), LOOKUP, LIST,
DELETE without allow_delete, the store's limit, JWTs with a bad signature or for another
account refused; an account pushed at runtime whose user then logs in (and uses its
JetStream), an update revoking a connected user closing its connection, a reload after a push,
and the pushed accounts still there after a restart (jetpy's directory, and the one nats-server
wrote, opened by jetpy). Where jetpy refuses what nats-server takes (a JWT of an untrusted
operator, an older JWT, new JetStream limits for a running account) both answers are shown."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nkeys
import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process
from jwt_issuer import (
    B_LIMITS,
    World,
    account_jwt,
    account_key,
    encode,
    user_jwt,
    user_key,
    world,
    write_creds,
)

pytestmark = pytest.mark.skipif(REFERENCE_NEWEST is None, reason="nats-server 2.15.1 not installed")

W: World = world()
OTHER: World = world()  # another operator: its accounts are not trusted here
NAMES = ("jetpy", "2.15.1")


def _config(tmp: Path, name: str, extra: str = "") -> str:
    sys_jwt = W.account_jwts[W.sys.public]
    return (
        f"operator: {json.dumps(str(tmp / 'op.jwt'))}\nsystem_account: {W.sys.public}\n"
        f"resolver {{ type: full, dir: {json.dumps(str(tmp / ('jwt-' + name)))}, allow_delete: false,"
        f' interval: "2m", timeout: "1.9s", limit: 3 }}\n'
        f"resolver_preload {{ {W.sys.public}: {sys_jwt} }}\n{extra}"
    )


def _start(tmp: Path, name: str, conf_name: str | None = None, extra: str = "") -> Proc:
    cmd = list(JETPY_SERVER) if name == "jetpy" else [str(REFERENCE_NEWEST)]
    conf = tmp / f"{conf_name or name}.conf"
    conf.write_text(_config(tmp, conf_name or name, extra))
    return start_process([*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp / f"{name}.log")


@pytest.fixture(params=[False, True], ids=["core", "jetstream"])
def servers(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, Proc]]:
    (tmp_path / "op.jwt").write_text(W.operator_jwt)
    su = user_key()
    write_creds(tmp_path / "sys.creds", user_jwt(su, W.sys), su)
    procs: dict[str, Proc] = {}
    try:
        for name in NAMES:
            js = f"jetstream {{ store_dir: {json.dumps(str(tmp_path / ('js-' + name)))} }}\n"
            procs[name] = _start(tmp_path, name, extra=js if request.param else "")
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


@pytest.fixture
def js_servers(servers: dict[str, Proc], request: pytest.FixtureRequest) -> dict[str, Proc]:
    if "jetstream" not in request.node.callspec.id:
        pytest.skip("JetStream servers only")
    return servers


async def _request(url: str, creds: Path, subject: str, body: str) -> Any:
    nc = await nats.connect(url, user_credentials=str(creds), allow_reconnect=False)
    try:
        msg = await nc.request(subject, body.encode(), timeout=2)
    except nats.errors.NoRespondersError:
        return "<no responders>"
    finally:
        await nc.close()
    if not msg.data.startswith(b"{"):
        return msg.data.decode()
    doc = json.loads(msg.data)
    doc.pop("server", None)
    return doc


def _ask(procs: dict[str, Proc], creds: Path, subject: str, body: str) -> dict[str, Any]:
    return {name: asyncio.run(_request(p.url, creds, subject, body)) for name, p in procs.items()}


def _same(answers: dict[str, Any]) -> Any:
    first = answers["jetpy"]
    assert all(a == first for a in answers.values()), answers
    return first


def _creds(tmp: Path, signer: Any, name: str) -> Path:
    u = user_key()
    path = tmp / f"{name}.creds"
    write_creds(path, user_jwt(u, signer), u)
    return path


async def _pub_sub(url: str, creds: Path) -> bytes:
    nc = await nats.connect(url, user_credentials=str(creds), allow_reconnect=False)
    try:
        sub = await nc.subscribe("hello")
        await nc.publish("hello", b"world")
        msg = await sub.next_msg(timeout=2)
        return msg.data
    finally:
        await nc.close()


def test_update_lookup_list_replies(servers: dict[str, Proc], tmp_path: Path) -> None:
    creds = tmp_path / "sys.creds"
    a, b = W.account_jwts[W.a.public], W.account_jwts[W.b.public]
    pushed = _same(_ask(servers, creds, "$SYS.REQ.CLAIMS.UPDATE", a))
    assert pushed == {"data": {"account": W.a.public, "code": 200, "message": "jwt updated"}}
    subject = f"$SYS.REQ.ACCOUNT.{W.b.public}.CLAIMS.UPDATE"
    assert _same(_ask(servers, creds, subject, b))["data"]["account"] == W.b.public
    wrong = _same(_ask(servers, creds, subject, a))
    assert wrong == {
        "error": {
            "account": W.b.public,
            "code": 500,
            "description": "jwt update resulted in error - subject does not match jwt content",
        }
    }
    for body, why in (
        ("garbage", "expected 3 chunks"),
        (a[:-4] + "AAAA", "claim failed V2 signature verification"),
    ):
        refused = _same(_ask(servers, creds, "$SYS.REQ.CLAIMS.UPDATE", body))
        assert refused == {
            "error": {"account": "n/a", "code": 500, "description": f"jwt update resulted in error - {why}"}
        }
    looked_up = _same(_ask(servers, creds, f"$SYS.REQ.ACCOUNT.{W.a.public}.CLAIMS.LOOKUP", ""))
    assert looked_up == a
    assert _same(_ask(servers, creds, f"$SYS.REQ.ACCOUNT.{OTHER.a.public}.CLAIMS.LOOKUP", "")) == ""
    assert _same(_ask(servers, creds, "$SYS.REQ.CLAIMS.LOOKUP", W.a.public)) == "<no responders>"
    full = _same(_ask(servers, creds, "$SYS.REQ.CLAIMS.UPDATE", account_jwt(account_key(), W.op, "C")))
    assert full["error"]["description"] == "jwt update resulted in error - jwt store is full"
    delete = encode(
        {"sub": W.op.public, "nats": {"accounts": [W.a.public], "type": "generic", "version": 2}}, W.op
    )
    assert _same(_ask(servers, creds, "$SYS.REQ.CLAIMS.DELETE", delete)) == {
        "error": {
            "code": 500,
            "description": f"delete accounts request by {W.op.public} failed - "
            "delete must be enabled in server config",
        }
    }
    listed = _ask(servers, creds, "$SYS.REQ.CLAIMS.LIST", "")
    assert {n: sorted(doc["data"]) for n, doc in listed.items()} == {
        n: sorted([W.sys.public, W.a.public, W.b.public]) for n in NAMES
    }
    for name in NAMES:  # nats-server's layout: <dir>/<account>.jwt holding the JWT
        assert (tmp_path / f"jwt-{name}" / f"{W.a.public}.jwt").read_text().strip() == a


def test_older_jwt_refused_by_jetpy(servers: dict[str, Proc], tmp_path: Path) -> None:
    """nats-server stores an older JWT of an account over the newer one (a replayed JWT would
    take back the revocations made since); jetpy refuses it and keeps the newer."""
    creds = tmp_path / "sys.creds"
    now = int(time.time())
    newer, older = account_jwt(W.a, W.op, "A", iat=now + 60), account_jwt(W.a, W.op, "A", iat=now - 60)
    _same(_ask(servers, creds, "$SYS.REQ.CLAIMS.UPDATE", newer))
    answers = _ask(servers, creds, "$SYS.REQ.CLAIMS.UPDATE", older)
    assert answers["2.15.1"]["data"]["message"] == "jwt updated"
    assert "a newer JWT of the account is stored" in answers["jetpy"]["error"]["description"]
    looked_up = _ask(servers, creds, f"$SYS.REQ.ACCOUNT.{W.a.public}.CLAIMS.LOOKUP", "")
    assert looked_up == {"jetpy": newer, "2.15.1": older}


def test_untrusted_account_refused_by_jetpy(servers: dict[str, Proc], tmp_path: Path) -> None:
    """nats-server stores a JWT of another operator (its users fail to log in later); jetpy
    refuses it in the reply and stores nothing."""
    creds = tmp_path / "sys.creds"
    answers = _ask(servers, creds, "$SYS.REQ.CLAIMS.UPDATE", OTHER.account_jwts[OTHER.a.public])
    assert answers["2.15.1"]["data"]["message"] == "jwt updated"
    err = answers["jetpy"]["error"]
    assert err["account"] == OTHER.a.public and err["code"] == 500
    assert "not issued by a trusted operator" in err["description"]
    assert not (tmp_path / "jwt-jetpy" / f"{OTHER.a.public}.jwt").exists()
    user = _creds(tmp_path, OTHER.a, "other")
    for p in servers.values():
        with pytest.raises(Exception):  # noqa: B017 - Authorization Violation on both
            asyncio.run(_pub_sub(p.url, user))


def test_pushed_account_user_logs_in(servers: dict[str, Proc], tmp_path: Path) -> None:
    user = _creds(tmp_path, W.b, "b")
    for p in servers.values():  # not known before the push
        with pytest.raises(Exception):  # noqa: B017
            asyncio.run(_pub_sub(p.url, user))
    _same(_ask(servers, tmp_path / "sys.creds", "$SYS.REQ.CLAIMS.UPDATE", W.account_jwts[W.b.public]))
    assert {n: asyncio.run(_pub_sub(p.url, user)) for n, p in servers.items()} == dict.fromkeys(
        NAMES, b"world"
    )


def _sign(seed: bytes, nonce: str) -> str:
    return base64.urlsafe_b64encode(nkeys.from_seed(seed).sign(nonce.encode())).rstrip(b"=").decode()


async def _revoked_while_connected(url: str, port: int, sys_creds: Path) -> dict[str, Any]:
    """A user of account A connected (raw protocol), then A pushed again revoking it: what
    the user's connection reads up to its close, and whether another user of A stays."""
    c = W.a
    await _request(url, sys_creds, "$SYS.REQ.CLAIMS.UPDATE", account_jwt(c, W.op, "A"))
    u, other = user_key(), user_key()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    info = json.loads((await reader.readline())[5:])
    fields = {"verbose": False, "protocol": 1, "jwt": user_jwt(u, c), "sig": _sign(u.seed, info["nonce"])}
    writer.write(f"CONNECT {json.dumps(fields)}\r\nPING\r\n".encode())
    assert await reader.readline() == b"PONG\r\n"
    keep_creds = sys_creds.with_name(f"keep-{port}.creds")
    write_creds(keep_creds, user_jwt(other, c), other)
    keep = await nats.connect(url, user_credentials=str(keep_creds), allow_reconnect=False)
    await asyncio.sleep(1.1)  # the revocation is for JWTs issued before a later second
    revoking = account_jwt(c, W.op, "A", revocations={u.public: int(time.time())})
    reply = await _request(url, sys_creds, f"$SYS.REQ.ACCOUNT.{c.public}.CLAIMS.UPDATE", revoking)
    got = await asyncio.wait_for(reader.read(), 5)  # up to the close
    writer.close()
    lines = [line for line in got.splitlines(keepends=True) if not line.startswith((b"INFO ", b"PING"))]
    await asyncio.sleep(0.2)
    kept = keep.is_connected
    await keep.close()
    return {"reply": reply, "read": lines, "other_kept": kept}


def test_update_revoking_a_user_disconnects_it(servers: dict[str, Proc], tmp_path: Path) -> None:
    sys_creds = tmp_path / "sys.creds"
    got = {n: asyncio.run(_revoked_while_connected(p.url, p.port, sys_creds)) for n, p in servers.items()}
    assert _same(got) == {
        "reply": {"data": {"account": W.a.public, "code": 200, "message": "jwt updated"}},
        "read": [b"-ERR 'User Authentication Revoked'\r\n"],
        "other_kept": True,
    }


async def _payload_lowered_while_connected(url: str, port: int, sys_creds: Path) -> list[bytes]:
    """A user of account A connected (raw protocol), then A pushed again with a payload limit
    of 8: what a 16-byte and then a 4-byte publish get (a connection that stays: the reply to
    PING; one closed: up to its close)."""
    c = W.a
    await _request(url, sys_creds, "$SYS.REQ.CLAIMS.UPDATE", account_jwt(c, W.op, "A"))
    u = user_key()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    info = json.loads((await reader.readline())[5:])
    fields = {"verbose": False, "protocol": 1, "jwt": user_jwt(u, c), "sig": _sign(u.seed, info["nonce"])}
    writer.write(f"CONNECT {json.dumps(fields)}\r\nPUB x 16\r\n{'a' * 16}\r\nPING\r\n".encode())
    assert await reader.readline() == b"PONG\r\n"
    await asyncio.sleep(1.1)
    lowered = account_jwt(c, W.op, "A", limits={"payload": 8})
    await _request(url, sys_creds, "$SYS.REQ.CLAIMS.UPDATE", lowered)
    writer.write(b"PUB x 4\r\nabcd\r\nPING\r\n")
    got = await asyncio.wait_for(reader.readline(), 5)
    writer.write(f"PUB x 16\r\n{'a' * 16}\r\nPING\r\n".encode())
    got += await asyncio.wait_for(reader.read(), 5)  # up to the close
    writer.close()
    return [line for line in got.splitlines(keepends=True) if not line.startswith((b"INFO ", b"PING"))]


def test_update_lowering_the_payload_limit_applies_to_connected_users(
    servers: dict[str, Proc], tmp_path: Path
) -> None:
    sys_creds = tmp_path / "sys.creds"
    got = {
        n: asyncio.run(_payload_lowered_while_connected(p.url, p.port, sys_creds)) for n, p in servers.items()
    }
    assert _same(got) == [b"PONG\r\n", b"-ERR 'Maximum Payload Violation'\r\n"]


async def _conn_limit_lowered_while_connected(url: str, port: int, sys_creds: Path) -> list[list[bytes]]:
    """Three users of account A connected (raw protocol), then A pushed again with a
    connection limit of 1: what the first reads after a PING, the others up to their close."""
    await _request(url, sys_creds, "$SYS.REQ.CLAIMS.UPDATE", account_jwt(W.a, W.op, "A"))
    conns = []
    for _ in range(3):
        u = user_key()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        info = json.loads((await reader.readline())[5:])
        fields = {
            "verbose": False,
            "protocol": 1,
            "jwt": user_jwt(u, W.a),
            "sig": _sign(u.seed, info["nonce"]),
        }
        writer.write(f"CONNECT {json.dumps(fields)}\r\nPING\r\n".encode())
        assert await reader.readline() == b"PONG\r\n"
        conns.append((reader, writer))
    await asyncio.sleep(1.1)
    lowered = account_jwt(W.a, W.op, "A", limits={"conn": 1})
    await _request(url, sys_creds, "$SYS.REQ.CLAIMS.UPDATE", lowered)
    out = []
    for i, (reader, writer) in enumerate(conns):
        if i == 0:  # (a PING written to one the server closed meanwhile may reset it: its -ERR lost)
            writer.write(b"PING\r\n")
        got = await asyncio.wait_for(reader.readline() if i == 0 else reader.read(), 5)
        while i == 0 and got.startswith(b"INFO "):  # nats-server tells the account's clients anew
            got = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        out.append(
            [line for line in got.splitlines(keepends=True) if not line.startswith((b"INFO ", b"PING"))]
        )
    return out


def test_update_lowering_the_connection_limit_closes_the_newest(
    servers: dict[str, Proc], tmp_path: Path
) -> None:
    sys_creds = tmp_path / "sys.creds"
    got = {
        n: asyncio.run(_conn_limit_lowered_while_connected(p.url, p.port, sys_creds))
        for n, p in servers.items()
    }
    closed = [b"-ERR 'maximum account active connections exceeded'\r\n"]
    assert _same(got) == [[b"PONG\r\n"], closed, closed]


def test_reload_after_a_push(servers: dict[str, Proc], tmp_path: Path) -> None:
    """A reload (SIGHUP) after a push reads the directory again: the pushed account stays."""
    _same(_ask(servers, tmp_path / "sys.creds", "$SYS.REQ.CLAIMS.UPDATE", W.account_jwts[W.b.public]))
    for p in servers.values():
        p.popen.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    user = _creds(tmp_path, W.b, "b")
    assert {n: asyncio.run(_pub_sub(p.url, user)) for n, p in servers.items()} == dict.fromkeys(
        NAMES, b"world"
    )
    assert "Reloaded server configuration" in servers["jetpy"].log()
    assert "Failed to reload" not in servers["jetpy"].log()


async def _isolated(url: str, one: Path, other: Path) -> bool:
    """Is a message published by a user of one account kept from a user of another?"""
    a = await nats.connect(url, user_credentials=str(one), allow_reconnect=False)
    b = await nats.connect(url, user_credentials=str(other), allow_reconnect=False)
    try:
        sub = await b.subscribe("hello")
        await b.flush()
        await a.publish("hello", b"from a")
        await a.flush()
        try:
            await sub.next_msg(timeout=0.5)
        except nats.errors.TimeoutError:
            return True
        return False
    finally:
        await a.close()
        await b.close()


def test_restart_keeps_pushed_accounts_and_opens_the_reference_directory(
    servers: dict[str, Proc], tmp_path: Path
) -> None:
    for token in (W.account_jwts[W.a.public], W.account_jwts[W.b.public]):
        _same(_ask(servers, tmp_path / "sys.creds", "$SYS.REQ.CLAIMS.UPDATE", token))
    for p in servers.values():
        p.stop()
    user, a_user = _creds(tmp_path, W.b, "b"), _creds(tmp_path, W.a, "a")
    # jetpy again on its own directory, then on the one nats-server wrote
    for conf_name in ("jetpy", "2.15.1"):
        proc = _start(tmp_path, "jetpy", conf_name)
        try:
            assert asyncio.run(_pub_sub(proc.url, user)) == b"world"
            assert asyncio.run(_isolated(proc.url, a_user, user))  # each in its own account
        finally:
            proc.stop(signal.SIGKILL)


async def _stream_in(url: str, creds: Path) -> dict[str, Any]:
    nc = await nats.connect(url, user_credentials=str(creds), allow_reconnect=False)
    try:
        js = nc.jetstream()
        info = await js.account_info()
        await js.add_stream(name="S", subjects=["s.>"])
        ack = await js.publish("s.1", b"one")
        return {"streams": info.limits.max_streams, "seq": ack.seq, "stream": ack.stream}
    finally:
        await nc.close()


def test_pushed_account_has_its_jetstream(js_servers: dict[str, Proc], tmp_path: Path) -> None:
    creds = tmp_path / "sys.creds"
    _same(_ask(js_servers, creds, "$SYS.REQ.CLAIMS.UPDATE", W.account_jwts[W.b.public]))
    user = _creds(tmp_path, W.b, "b")
    got = {n: asyncio.run(_stream_in(p.url, user)) for n, p in js_servers.items()}
    assert _same(got) == {"streams": B_LIMITS["streams"], "seq": 1, "stream": "S"}
    # new JetStream limits for a running account: nats-server takes them, jetpy refuses them
    changed = account_jwt(W.b, W.op_signing, "B", limits={**B_LIMITS, "streams": 5})
    answers = _ask(js_servers, creds, "$SYS.REQ.CLAIMS.UPDATE", changed)
    assert answers["2.15.1"]["data"]["message"] == "jwt updated"
    assert "JetStream limits at runtime is not supported" in answers["jetpy"]["error"]["description"]
