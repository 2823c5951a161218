"""The full account resolver of a jetpy server (in process, real sockets, nats-py as the
system account's user): bad pushes answered with an error and nothing stored, the server
serving on (garbage, a user JWT, headers, an account JWT with what jetpy does not carry out, a
change of a running account's exports or JetStream limits, fuzzed bodies), a LOOKUP never
reading outside the directory, damaged files in the directory skipped at start, and a new
account pushed with imports of a running account's exports working at once."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetpy.server.app import Server
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import apply_config
from jwt_issuer import B_LIMITS, World, account_jwt, account_key, user_jwt, user_key, world, write_creds

W: World = world()


def _config(tmp: Path, preload: dict[str, str], js: bool = False) -> str:
    (tmp / "op.jwt").write_text(W.operator_jwt)
    entries = "\n".join(f"  {k}: {v}" for k, v in preload.items())
    store = f"jetstream {{ store_dir: {json.dumps(str(tmp / 'js'))} }}\n" if js else ""
    return (
        f"operator: {json.dumps(str(tmp / 'op.jwt'))}\nsystem_account: {W.sys.public}\n{store}"
        f"resolver {{ type: full, dir: {json.dumps(str(tmp / 'jwt'))} }}\n"
        f"resolver_preload {{\n{entries}\n}}\n"
    )


async def _server(tmp: Path, preload: dict[str, str], js: bool = False) -> Server:
    opts, _ = apply_config(parse_config_text(_config(tmp, preload, js)))
    return Server(dataclasses.replace(opts, host="127.0.0.1", port=0))


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Server]:
    preload = {W.sys.public: W.account_jwts[W.sys.public], W.b.public: W.account_jwts[W.b.public]}
    async with await _server(tmp_path, preload, js=True) as s:
        yield s


def _creds(tmp: Path, signer: Any, name: str) -> str:
    u = user_key()
    return write_creds(tmp / f"{name}.creds", user_jwt(u, signer), u)


async def _ask(s: Server, tmp: Path, subject: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
    nc = await nats.connect(s.client_url, user_credentials=_creds(tmp, W.sys, "sys"), allow_reconnect=False)
    try:
        msg = await nc.request(subject, body, timeout=2, headers=headers)
    finally:
        await nc.close()
    return json.loads(msg.data) if msg.data.startswith(b"{") else msg.data


def _error(reply: Any) -> str:
    assert isinstance(reply, dict) and "error" in reply, reply
    assert reply["error"]["code"] == 500
    return str(reply["error"]["description"])


async def test_bad_pushes_are_refused_and_nothing_is_stored(srv: Server, tmp_path: Path) -> None:
    directory = tmp_path / "jwt"
    before = sorted(p.name for p in directory.iterdir())
    c = account_key()
    cases: dict[str, tuple[bytes, str]] = {
        "garbage": (b"\xff\xfe not a jwt", "expected 3 chunks"),
        "user_jwt": (user_jwt(user_key(), W.a).encode(), "not account claim"),
        "mappings": (
            account_jwt(c, W.op, "C", nats_extra={"mappings": {"a": [{"subject": "b"}]}}).encode(),
            "mappings in account JWTs are not supported by jetpy",
        ),
        "private_export": (
            account_jwt(
                c, W.op, "C", nats_extra={"exports": [{"subject": "p", "type": "stream", "token_req": True}]}
            ).encode(),
            "'token_req' is not supported by jetpy",
        ),
        "import_from_unknown": (
            account_jwt(
                c,
                W.op,
                "C",
                nats_extra={"imports": [{"subject": "x", "type": "stream", "account": account_key().public}]},
            ).encode(),
            "from an account not preloaded",
        ),
        "exports_of_a_running_account": (
            account_jwt(
                W.b,
                W.op_signing,
                "B",
                limits=B_LIMITS,
                nats_extra={"exports": [{"subject": "e", "type": "stream"}]},
            ).encode(),
            "changing an account's exports or imports at runtime is not supported by jetpy",
        ),
        "jetstream_limits_of_a_running_account": (
            account_jwt(W.b, W.op_signing, "B", limits={**B_LIMITS, "streams": 9}).encode(),
            "changing an account's JetStream limits at runtime is not supported by jetpy",
        ),
    }
    for name, (body, why) in cases.items():
        assert why in _error(await _ask(srv, tmp_path, "$SYS.REQ.CLAIMS.UPDATE", body)), name
    assert sorted(p.name for p in directory.iterdir()) == before
    # a JWT with headers in the request is read past them
    reply = await _ask(
        srv, tmp_path, "$SYS.REQ.CLAIMS.UPDATE", W.account_jwts[W.a.public].encode(), headers={"X-Y": "z"}
    )
    assert reply["data"] == {"account": W.a.public, "code": 200, "message": "jwt updated"}


async def test_lookup_never_reads_outside_the_directory(srv: Server, tmp_path: Path) -> None:
    (tmp_path / "secret.jwt").write_text("SECRET")
    for token in ("%2E%2E", "/etc/passwd", "secret", "~", f"{W.b.public}x"):
        reply = await _ask(srv, tmp_path, f"$SYS.REQ.ACCOUNT.{token}.CLAIMS.LOOKUP", b"")
        assert reply == b"", token
    reply = await _ask(srv, tmp_path, f"$SYS.REQ.ACCOUNT.{W.b.public}.CLAIMS.LOOKUP", b"")
    assert reply == W.account_jwts[W.b.public].encode()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300) | st.text(alphabet="eyJ.abc-_=", max_size=300).map(str.encode))
async def test_fuzzed_pushes_get_an_error_reply(srv: Server, tmp_path: Path, body: bytes) -> None:
    reply = await _ask(srv, tmp_path, "$SYS.REQ.CLAIMS.UPDATE", body)
    assert reply["error"]["account"] == "n/a"
    assert reply["error"]["description"].startswith("jwt update resulted in error - ")


async def test_damaged_files_in_the_directory_are_skipped(tmp_path: Path) -> None:
    directory = tmp_path / "jwt"
    directory.mkdir()
    (directory / f"{W.a.public}.jwt").write_text("eyJ.damaged.jwt")
    (directory / f"{W.b.public}.jwt").write_bytes(b"\xff\x00\x01")
    (directory / "not-a-key.jwt").write_text(W.account_jwts[W.a.public])
    async with await _server(tmp_path, {W.sys.public: W.account_jwts[W.sys.public]}) as s:
        assert s.accounts.get(W.a.public) is None and s.accounts.get(W.b.public) is None
        # the damaged file is replaced by a good push, and its account runs
        reply = await _ask(s, tmp_path, "$SYS.REQ.CLAIMS.UPDATE", W.account_jwts[W.a.public].encode())
        assert reply["data"]["message"] == "jwt updated"
        assert s.accounts.get(W.a.public) is not None
        assert (directory / f"{W.a.public}.jwt").read_text() == W.account_jwts[W.a.public]


async def test_pushed_account_imports_a_running_accounts_export(tmp_path: Path) -> None:
    x, y = account_key(), account_key()
    x_jwt = account_jwt(x, W.op, "X", nats_extra={"exports": [{"subject": "news.>", "type": "stream"}]})
    y_jwt = account_jwt(
        y, W.op, "Y", nats_extra={"imports": [{"subject": "news.>", "type": "stream", "account": x.public}]}
    )
    async with await _server(tmp_path, {W.sys.public: W.account_jwts[W.sys.public], x.public: x_jwt}) as s:
        reply = await _ask(s, tmp_path, "$SYS.REQ.CLAIMS.UPDATE", y_jwt.encode())
        assert reply["data"]["message"] == "jwt updated"
        xc = await nats.connect(s.client_url, user_credentials=_creds(tmp_path, x, "x"))
        yc = await nats.connect(s.client_url, user_credentials=_creds(tmp_path, y, "y"))
        try:
            sub = await yc.subscribe("news.>")
            await yc.flush()
            await xc.publish("news.today", b"hello")
            assert (await sub.next_msg(timeout=2)).data == b"hello"
        finally:
            await xc.close()
            await yc.close()
