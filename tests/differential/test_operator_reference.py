"""Operator mode against nats-server 2.15.1 and 2.9.10: one operator configuration (a MEMORY
resolver with preloaded account JWTs made with nkeys, as nsc makes them), the same CONNECTs to
each server and the same answers: users of each account (signed by the account or by its
signing key), the user JWT's permissions, the account's subscription, payload and connection
limits, and every bad credential (expired, not yet valid, revoked, tampered, garbage, a user of
an unknown account or another operator, the nonce signed by another key or a replayed
signature, a signing key without ``issuer_account``, an account JWT as a user JWT, source
addresses and connection types the JWT does not allow) refused with 'Authorization Violation'
and a closed connection, the server still serving. Also a JWT expiring while connected, and
JetStream per account from the account JWT's limits."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import nkeys
import pytest

from conftest import JETPY_SERVER, REFERENCE, REFERENCE_NEWEST, Proc, start_process
from jwt_issuer import (
    A_LIMITS,
    Key,
    World,
    account_jwt,
    account_key,
    encode,
    operator_key,
    user_jwt,
    user_key,
    world,
    write_creds,
)

W: World = world()
OTHER: World = world()  # another operator's accounts: unknown to the servers under test


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp = tmp_path_factory.mktemp("operator")
    op_file = tmp / "op.jwt"
    op_file.write_text(W.operator_jwt)
    procs = _start_all(tmp, lambda name: W.config(op_file, tmp / f"js-{name}"))
    try:
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


def _start_all(tmp: Path, text: Callable[[str], str]) -> dict[str, Proc]:
    """jetpy and each reference server there is on a configuration ``text(name)``."""
    cmds: dict[str, list[str]] = {"jetpy": list(JETPY_SERVER)}
    for name, binary in (("2.15.1", REFERENCE_NEWEST), ("2.9.10", REFERENCE)):
        if binary is not None:
            cmds[name] = [binary]
    procs: dict[str, Proc] = {}
    try:
        for name, cmd in cmds.items():
            conf = tmp / f"{name}.conf"
            conf.write_text(text(name))
            procs[name] = start_process(
                [*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp / f"{name}.log"
            )
    except BaseException:
        for p in procs.values():
            p.stop(signal.SIGKILL)
        raise
    return procs


def sign(seed: bytes, nonce: str) -> str:
    return base64.urlsafe_b64encode(nkeys.from_seed(seed).sign(nonce.encode())).rstrip(b"=").decode()


Connect = Callable[[str], bytes]  # nonce -> what the client sends


def connect(
    token: str, seed: bytes | None, then: bytes = b"PING\r\n", signer: Callable[[str], str] | None = None
) -> Connect:
    def make(nonce: str) -> bytes:
        fields: dict[str, object] = {"verbose": False, "protocol": 1, "headers": True, "jwt": token}
        if signer is not None:
            fields["sig"] = signer(nonce)
        elif seed is not None:
            fields["sig"] = sign(seed, nonce)
        return f"CONNECT {json.dumps(fields)}\r\n".encode() + then

    return make


async def exchange(port: int, make: Connect, wait: float = 0.5) -> bytes:
    """Send what ``make(nonce)`` builds; what came back and ``<closed>``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    info = json.loads((await reader.readline())[5:])
    writer.write(make(str(info.get("nonce", ""))))
    out = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(4096), wait)
            if not chunk:
                out += b"<closed>"
                break
            out += chunk
    except TimeoutError:
        pass
    writer.close()
    # the servers' own INFOs and PINGs (nats-server's first RTT PING) are left out
    return b"".join(
        line
        for line in out.splitlines(keepends=True)
        if not line.startswith(b"INFO ") and line != b"PING\r\n"
    )


def _user(
    signer: Key, issuer_account: str = "", permissions: dict[str, Any] | None = None, **kw: Any
) -> tuple[str, bytes]:
    u = user_key()
    return user_jwt(u, signer, issuer_account, permissions=permissions, **kw), u.seed


NOW = int(time.time())
PERMS = {"pub": {"allow": ["x.>", "_INBOX.>"]}, "sub": {"deny": ["secret.>"]}}
A_BY_SIGNING_KEY = _user(W.a_signing, W.a.public, permissions=PERMS)
A_PLAIN = _user(W.a)
B_PLAIN = _user(W.b)
REVOKED_TOKEN = user_jwt(W.revoked, W.a)
_other_seed = user_key().seed
_account_as_user = encode({"sub": account_key().public, "nats": {"type": "user", "version": 2}}, W.a)
OVER_PAYLOAD = b"x" * (A_LIMITS["payload"] + 1)

REFUSED = b"-ERR 'Authorization Violation'\r\n<closed>"
CASES: dict[str, tuple[Connect, bytes | None]] = {
    "account_signing_key_user": (
        connect(
            *A_BY_SIGNING_KEY,
            b"PUB y 1\r\nx\r\nSUB secret.a 1\r\nSUB a 2\r\nSUB b 3\r\nSUB c 4\r\nSUB d 5\r\nPING\r\n",
        ),
        b"-ERR 'Permissions Violation for Publish to \"y\"'\r\n"
        b"-ERR 'Permissions Violation for Subscription to \"secret.a\"'\r\n"
        b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n",
    ),
    "payload_over_the_account_limit": (
        connect(
            *A_PLAIN, b"PUB x 3\r\nabc\r\nPUB x %d\r\n%s\r\nPING\r\n" % (len(OVER_PAYLOAD), OVER_PAYLOAD)
        ),
        b"-ERR 'Maximum Payload Violation'\r\n<closed>",
    ),
    "account_user": (connect(*A_PLAIN), b"PONG\r\n"),
    "data_limit_not_enforced": (connect(*A_PLAIN, b"PUB x 40\r\n%s\r\nPING\r\n" % (b"d" * 40)), b"PONG\r\n"),
    "bearer_token_disallowed_by_the_account": (
        connect(_user(W.a, permissions={"bearer_token": True})[0], None),
        REFUSED,
    ),
    "operator_signing_key_account_user": (connect(*B_PLAIN), b"PONG\r\n"),
    "bearer_token_without_signature": (
        connect(_user(W.b, permissions={"bearer_token": True})[0], None),
        b"PONG\r\n",
    ),
    "source_allowed": (connect(*_user(W.b, permissions={"src": ["127.0.0.0/8"]})), b"PONG\r\n"),
    "expired": (connect(*_user(W.b, exp=NOW - 10)), REFUSED),
    "not_yet_valid": (connect(*_user(W.b, nbf=NOW + 3600)), REFUSED),
    "revoked": (connect(REVOKED_TOKEN, W.revoked.seed), REFUSED),
    "unknown_account": (connect(*_user(account_key())), REFUSED),
    "account_of_another_operator": (connect(*_user(OTHER.a)), REFUSED),
    "signing_key_without_issuer_account": (connect(*_user(W.a_signing)), REFUSED),
    "signing_key_of_another_account": (connect(*_user(W.a_signing, W.b.public)), REFUSED),
    "operator_signed_user": (connect(*_user(operator_key())), REFUSED),
    "nonce_signed_by_another_key": (connect(A_PLAIN[0], _other_seed), REFUSED),
    "replayed_signature": (
        connect(A_PLAIN[0], None, signer=lambda n: sign(A_PLAIN[1], "AAAAAAAAAAAAAAA")),
        REFUSED,
    ),
    "no_signature": (connect(A_PLAIN[0], None), REFUSED),
    "garbage_signature": (connect(A_PLAIN[0], None, signer=lambda n: "!!not base64!!"), REFUSED),
    "tampered_claims": (connect(A_PLAIN[0].replace(".", ".e", 1), A_PLAIN[1]), REFUSED),
    "tampered_signature": (connect(A_PLAIN[0][:-6] + "AAAAAA", A_PLAIN[1]), REFUSED),
    "garbage_jwt": (connect("not.a.jwt", A_PLAIN[1]), REFUSED),
    "account_jwt_as_user": (connect(W.account_jwts[W.b.public], None), REFUSED),
    "claims_not_a_user": (connect(_account_as_user, None), REFUSED),
    "source_not_allowed": (connect(*_user(W.b, permissions={"src": ["10.0.0.0/8"]})), REFUSED),
    "websocket_only": (
        connect(*_user(W.b, permissions={"allowed_connection_types": ["WEBSOCKET"]})),
        REFUSED,
    ),
    "no_jwt": (lambda n: b'CONNECT {"verbose":false}\r\nPING\r\n', REFUSED),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_connect_as_nats_server(servers: dict[str, Proc], case: str) -> None:
    make, expected = CASES[case]
    ours = await exchange(servers["jetpy"].port, make)
    if expected is not None:
        assert ours == expected
    for name, proc in servers.items():
        if name != "jetpy":
            assert await exchange(proc.port, make) == ours, name
    # the server is still up and serving
    assert await exchange(servers["jetpy"].port, connect(*B_PLAIN)) == b"PONG\r\n"


async def test_account_connection_limit(servers: dict[str, Proc]) -> None:
    for name, proc in servers.items():
        held = []
        for _ in range(A_LIMITS["conn"]):
            reader, writer = await asyncio.open_connection("127.0.0.1", proc.port)
            info = json.loads((await reader.readline())[5:])
            writer.write(connect(*A_PLAIN)(info["nonce"]))
            assert (await reader.readline()) == b"PONG\r\n"
            held.append(writer)
        third = await exchange(proc.port, connect(*A_PLAIN))
        assert third == b"-ERR 'maximum account active connections exceeded'\r\n<closed>", name
        # another account is not affected
        assert await exchange(proc.port, connect(*B_PLAIN)) == b"PONG\r\n"
        for w in held:
            w.close()
        await asyncio.sleep(0.2)
        assert await exchange(proc.port, connect(*A_PLAIN)) == b"PONG\r\n", name


async def test_user_jwt_expiring_while_connected(servers: dict[str, Proc]) -> None:
    expires = int(time.time()) + 2
    token, seed = _user(W.b, exp=expires)
    answers = await asyncio.gather(
        *(exchange(p.port, connect(token, seed), wait=4.0) for p in servers.values())
    )
    ours = answers[0]
    assert ours == b"PONG\r\n-ERR 'User Authentication Expired'\r\n<closed>"
    assert all(a == ours for a in answers), dict(zip(servers, answers, strict=True))


async def test_nats_py_with_creds_and_jetstream_limits(servers: dict[str, Proc], tmp_path: Path) -> None:
    b_creds = write_creds(tmp_path / "b.creds", *_user_with_key(W.b))
    a_creds = write_creds(tmp_path / "a.creds", *_user_with_key(W.a))
    seen: dict[str, object] = {}
    for name, proc in servers.items():
        nc = await nats.connect(proc.url, user_credentials=b_creds, allow_reconnect=False)
        info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
        limits = info["limits"]
        created = []
        for i in range(3):
            reply = json.loads(
                (
                    await nc.request(
                        f"$JS.API.STREAM.CREATE.S{i}",
                        json.dumps(
                            {"name": f"S{i}", "subjects": [f"s{i}"], "storage": "memory", "max_bytes": 1000}
                        ).encode(),
                        timeout=2,
                    )
                ).data
            )
            created.append(reply.get("error", {}).get("err_code", 0))
        await nc.close()
        an = await nats.connect(proc.url, user_credentials=a_creds, allow_reconnect=False)
        a_info = json.loads((await an.request("$JS.API.INFO", b"", timeout=2)).data)
        await an.close()
        seen[name] = (
            {k: limits[k] for k in ("max_memory", "max_storage", "max_streams", "max_consumers")},
            created,
            a_info.get("error", {}).get("err_code"),
        )
    assert seen["jetpy"] == (
        {"max_memory": 1_000_000, "max_storage": 2_000_000, "max_streams": 2, "max_consumers": 3},
        [0, 0, 10027],
        10039,
    )
    assert all(v == seen["jetpy"] for v in seen.values()), seen


async def test_accounts_are_apart_and_permissions_hold_with_nats_py(
    servers: dict[str, Proc], tmp_path: Path
) -> None:
    token, seed = A_BY_SIGNING_KEY
    a_creds = write_creds(tmp_path / "a1.creds", token, _key(seed))
    b_creds = write_creds(tmp_path / "b1.creds", *_user_with_key(W.b))
    for name, proc in servers.items():
        errors: list[str] = []

        async def on_error(e: Exception, errors: list[str] = errors) -> None:
            errors.append(str(e))

        a = await nats.connect(proc.url, user_credentials=a_creds, allow_reconnect=False, error_cb=on_error)
        b = await nats.connect(proc.url, user_credentials=b_creds, allow_reconnect=False)
        in_b = await b.subscribe("x.>")
        in_a = await a.subscribe("x.>")
        await b.flush()
        await a.publish("x.1", b"from A")
        await a.publish("y", b"denied")
        await a.flush()
        assert (await in_a.next_msg(timeout=2)).data == b"from A", name
        with pytest.raises(nats.errors.TimeoutError):
            await in_b.next_msg(timeout=0.3)
        await asyncio.sleep(0.2)
        assert any('permissions violation for publish to "y"' in e.lower() for e in errors), (name, errors)
        await a.close()
        await b.close()


def _key(seed: bytes) -> Key:
    return Key(seed, nkeys.from_seed(seed).public_key.decode())


def _user_with_key(signer: Key) -> tuple[str, Key]:
    token, seed = _user(signer)
    return token, _key(seed)


async def test_account_expiry_default_permissions_and_revocation_on_reload(tmp_path: Path) -> None:
    """An account JWT expiring while its user is connected (the account's error, not the
    user's); a user without permissions takes the account's default_permissions; a reload that
    revokes a connected user closes it with 'User Authentication Revoked', and its JWT is refused
    from then on, while the account's other users stay."""
    w = world()
    now = int(time.time())
    c = account_key()
    w.account_jwts[c.public] = account_jwt(c, w.op, "C", exp=now + 3)
    d = account_key()
    d_perms = {"pub": {"deny": ["secret.>"]}, "sub": {"allow": ["ok.>"]}}
    w.account_jwts[d.public] = account_jwt(d, w.op, "D", nats_extra={"default_permissions": d_perms})
    op_file = tmp_path / "op.jwt"
    op_file.write_text(w.operator_jwt)
    procs = _start_all(tmp_path, lambda name: w.config(op_file))
    try:
        c_user = _user(c)
        d_user = _user(d)
        then = b"PUB secret.x 1\r\nx\r\nSUB ok.1 1\r\nSUB other 2\r\nPING\r\n"
        staying = _user(w.a)
        going = _user(w.a)
        held = {}
        for name, p in procs.items():
            reader, writer = await asyncio.open_connection("127.0.0.1", p.port)
            info = json.loads((await reader.readline())[5:])
            writer.write(connect(*going)(info["nonce"]))
            assert await reader.readline() == b"PONG\r\n"
            held[name] = (reader, writer)
        answers = await asyncio.gather(
            *(exchange(p.port, connect(*c_user), wait=4.5) for p in procs.values()),
            *(exchange(p.port, connect(*d_user, then)) for p in procs.values()),
        )
        n = len(procs)
        assert answers[0] == b"PONG\r\n-ERR 'Account Authentication Expired'\r\n<closed>"
        assert answers[n] == (
            b"-ERR 'Permissions Violation for Publish to \"secret.x\"'\r\n"
            b"-ERR 'Permissions Violation for Subscription to \"other\"'\r\nPONG\r\n"
        )
        assert answers[:n] == [answers[0]] * n and answers[n:] == [answers[n]] * n, answers
        # expired now: refused at login
        assert {await exchange(p.port, connect(*c_user)) for p in procs.values()} == {REFUSED}
        # a reload revoking the connected user
        going_key = nkeys.from_seed(going[1]).public_key.decode()
        w.account_jwts[w.a.public] = account_jwt(
            w.a, w.op, "A", limits=A_LIMITS, revocations={going_key: int(time.time()) + 60}
        )
        for name, p in procs.items():
            (tmp_path / f"{name}.conf").write_text(w.config(op_file))
            p.popen.send_signal(signal.SIGHUP)
        for name, (reader, writer) in held.items():
            got = await asyncio.wait_for(reader.read(), 5)  # up to the close
            lines = [
                line for line in got.splitlines(keepends=True) if not line.startswith((b"INFO ", b"PING"))
            ]
            assert lines == [b"-ERR 'User Authentication Revoked'\r\n"], name
            writer.close()
        for p in procs.values():
            assert await exchange(p.port, connect(*going)) == REFUSED
            assert await exchange(p.port, connect(*staying)) == b"PONG\r\n"
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


async def test_exports_and_imports_from_account_jwts(tmp_path: Path) -> None:
    """Account X's JWT exports a stream and a service, account Y's imports them (the stream
    under a prefix, and under a local subject; the service under a local subject): what a user of
    Y receives and the answer it gets are the same on every server, and nothing else of X's
    crosses."""
    w = world()
    x, y = account_key(), account_key()
    exports = [
        {"subject": "news.>", "type": "stream"},
        {"subject": "alerts.>", "type": "stream"},
        {"subject": "time", "type": "service"},
    ]
    imports = [
        {"subject": "news.>", "type": "stream", "account": x.public, "to": "x"},
        {"subject": "alerts.>", "type": "stream", "account": x.public, "local_subject": "alarm.>"},
        {"subject": "time", "type": "service", "account": x.public, "local_subject": "clock"},
    ]
    w.account_jwts[x.public] = account_jwt(x, w.op, "X", nats_extra={"exports": exports})
    w.account_jwts[y.public] = account_jwt(y, w.op, "Y", nats_extra={"imports": imports})
    op_file = tmp_path / "op.jwt"
    op_file.write_text(w.operator_jwt)
    x_creds = write_creds(tmp_path / "x.creds", *_user_with_key(x))
    y_creds = write_creds(tmp_path / "y.creds", *_user_with_key(y))
    procs = _start_all(tmp_path, lambda name: w.config(op_file))
    try:
        seen = {}
        for name, p in procs.items():
            xc = await nats.connect(p.url, user_credentials=x_creds, allow_reconnect=False)
            yc = await nats.connect(p.url, user_credentials=y_creds, allow_reconnect=False)

            async def answer(msg: Any, xc: Any = xc) -> None:
                await xc.publish(msg.reply, b"noon:" + msg.subject.encode())

            await xc.subscribe("time", cb=answer)
            got = await yc.subscribe(">")
            await xc.flush()
            await yc.flush()
            for subject in ("news.a", "alerts.b", "private.c", "time"):
                await xc.publish(subject, subject.encode())
            await xc.flush()
            received = []
            try:
                while True:
                    m = await got.next_msg(timeout=0.5)
                    if not m.subject.startswith("_INBOX."):
                        received.append((m.subject, m.data))
            except nats.errors.TimeoutError:
                pass
            await got.unsubscribe()
            reply = await yc.request("clock", b"", timeout=2)
            seen[name] = (sorted(received), reply.data)
            await xc.close()
            await yc.close()
        assert seen["jetpy"] == (
            [("alarm.b", b"alerts.b"), ("x.news.a", b"news.a")],
            b"noon:time",
        )
        assert all(v == seen["jetpy"] for v in seen.values()), seen
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)
