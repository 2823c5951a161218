"""The full account resolver against nats-server 2.15.1: one operator configuration with
``resolver { type: full, dir }`` (the system account preloaded), the same ``$SYS.REQ.CLAIMS``
requests from the system account's user to each server and the same replies (the ``server``
block left out); an account pushed at runtime whose user then logs in, an update revoking a
connected user closing its connection, JWTs with a bad signature or for another account
refused, and the pushed accounts still there after a restart (jetpy's directory, and the one
nats-server wrote, opened by jetpy)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process
from jwt_issuer import World, account_jwt, user_jwt, user_key, world, write_creds

pytestmark = pytest.mark.skipif(REFERENCE_NEWEST is None, reason="nats-server 2.15.1 not installed")

W: World = world()
OTHER: World = world()  # another operator: its accounts are not trusted here
NAMES = ("jetpy", "2.15.1")


def _config(tmp: Path, name: str, extra: str = "") -> str:
    sys_jwt = W.account_jwts[W.sys.public]
    return (
        f"operator: {json.dumps(str(tmp / 'op.jwt'))}\nsystem_account: {W.sys.public}\n"
        f"resolver {{ type: full, dir: {json.dumps(str(tmp / ('jwt-' + name)))}, allow_delete: false,"
        f' interval: "2m", timeout: "1.9s" }}\n'
        f"resolver_preload {{ {W.sys.public}: {sys_jwt} }}\n{extra}"
    )


def _start(tmp: Path, name: str, conf_name: str | None = None) -> Proc:
    cmd = list(JETPY_SERVER) if name == "jetpy" else [str(REFERENCE_NEWEST)]
    conf = tmp / f"{conf_name or name}.conf"
    conf.write_text(_config(tmp, conf_name or name))
    return start_process([*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp / f"{name}.log")


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, Proc]]:
    (tmp_path / "op.jwt").write_text(W.operator_jwt)
    su = user_key()
    write_creds(tmp_path / "sys.creds", user_jwt(su, W.sys), su)
    procs: dict[str, Proc] = {}
    try:
        for name in NAMES:
            procs[name] = _start(tmp_path, name)
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


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
    listed = _ask(servers, creds, "$SYS.REQ.CLAIMS.LIST", "")
    assert {n: sorted(doc["data"]) for n, doc in listed.items()} == {
        n: sorted([W.sys.public, W.a.public, W.b.public]) for n in NAMES
    }
    for name in NAMES:  # nats-server's layout: <dir>/<account>.jwt holding the JWT
        assert (tmp_path / f"jwt-{name}" / f"{W.a.public}.jwt").read_text().strip() == a


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


async def _revoked_while_connected(url: str, sys_creds: Path, tmp: Path, name: str) -> dict[str, Any]:
    c = W.a  # account A, pushed first, then pushed again revoking the connected user
    await _request(url, sys_creds, "$SYS.REQ.CLAIMS.UPDATE", account_jwt(c, W.op, "A"))
    u, other = user_key(), user_key()
    creds, other_creds = tmp / f"rev-{name}.creds", tmp / f"keep-{name}.creds"
    write_creds(creds, user_jwt(u, c), u)
    write_creds(other_creds, user_jwt(other, c), other)
    errors: list[str] = []
    closed = asyncio.Event()

    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    async def on_closed() -> None:
        closed.set()

    nc = await nats.connect(
        url, user_credentials=str(creds), allow_reconnect=False, error_cb=on_error, closed_cb=on_closed
    )
    keep = await nats.connect(url, user_credentials=str(other_creds), allow_reconnect=False)
    await asyncio.sleep(1.1)  # the revocation is for JWTs issued before a later second
    revoking = account_jwt(c, W.op, "A", revocations={u.public: int(time.time())})
    reply = await _request(url, sys_creds, f"$SYS.REQ.ACCOUNT.{c.public}.CLAIMS.UPDATE", revoking)
    try:
        await asyncio.wait_for(closed.wait(), 5)
    except TimeoutError:
        pass
    kept = keep.is_connected
    await keep.close()
    await nc.close()
    return {"reply": reply, "closed": closed.is_set(), "other_kept": kept, "errors": errors}


def test_update_revoking_a_user_disconnects_it(servers: dict[str, Proc], tmp_path: Path) -> None:
    sys_creds = tmp_path / "sys.creds"
    got = {
        n: asyncio.run(_revoked_while_connected(p.url, sys_creds, tmp_path, n)) for n, p in servers.items()
    }
    result = _same(got)
    assert result["closed"] and result["other_kept"], got
    assert result["reply"]["data"]["message"] == "jwt updated"


def test_restart_keeps_pushed_accounts_and_opens_the_reference_directory(
    servers: dict[str, Proc], tmp_path: Path
) -> None:
    _same(_ask(servers, tmp_path / "sys.creds", "$SYS.REQ.CLAIMS.UPDATE", W.account_jwts[W.b.public]))
    for p in servers.values():
        p.stop()
    user = _creds(tmp_path, W.b, "b")
    # jetpy again on its own directory, then on the one nats-server wrote
    for conf_name in ("jetpy", "2.15.1"):
        proc = _start(tmp_path, "jetpy", conf_name)
        try:
            assert asyncio.run(_pub_sub(proc.url, user)) == b"world"
        finally:
            proc.stop(signal.SIGKILL)
