"""TLS on client connections and the monitoring port, with certificates made by the test
(tests/certs.py): nats-py over tls:// with a CA and with a client certificate, verify_and_map
(e-mail and subject mapped to users, with their permissions), handshake_first, HTTPS monitoring,
and the failures (a plaintext client, a stalled handshake, a missing or untrusted client
certificate) each closing the connection promptly with the server still serving. The INFO and
the plaintext client's treatment are compared with nats-server 2.15.1."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

import jetpy
from certs import Pki, make_pki
from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process
from jetpy.server.app import Server
from jetpy.server.options import ServerOptions, TlsOptions, User


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    gc.collect()  # refused nats-py clients' finalizers, now rather than later


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_opts(pki: Pki, **kw: Any) -> TlsOptions:
    return TlsOptions(cert_file=str(pki.server_cert), key_file=str(pki.server_key), ca_file=str(pki.ca), **kw)


@asynccontextmanager
async def running(pki: Pki, users: list[User] | None = None, **tls: Any) -> AsyncIterator[Server]:
    opts = ServerOptions(host="127.0.0.1", port=0, tls=tls_opts(pki, **tls), users=users or [])
    async with jetpy.Server(opts) as srv:
        yield srv


def client_ctx(pki: Pki, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None and key is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


async def round_trip(nc: Client) -> bytes:
    sub = await nc.subscribe("tls.check")
    await nc.publish("tls.check", b"over tls")
    data: bytes = (await sub.next_msg(timeout=2)).data
    return data


async def raw_info(port: int) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    line = await asyncio.wait_for(reader.readline(), 2)
    writer.close()
    info: dict[str, Any] = json.loads(line[5:])
    return info


async def test_nats_py_over_tls_with_a_ca(pki: Pki) -> None:
    async with running(pki) as srv:
        assert srv.client_url.startswith("tls://")
        info = await raw_info(srv.port)
        assert info["tls_required"] is True and "tls_verify" not in info
        nc = await nats.connect(srv.client_url, tls=client_ctx(pki), allow_reconnect=False)
        assert await round_trip(nc) == b"over tls"
        await nc.close()


async def test_mutual_tls_and_refused_certificates(pki: Pki) -> None:
    async with running(pki, verify=True) as srv:
        assert (await raw_info(srv.port))["tls_verify"] is True
        nc = await nats.connect(
            srv.client_url, tls=client_ctx(pki, pki.alice_cert, pki.alice_key), allow_reconnect=False
        )
        assert await round_trip(nc) == b"over tls"
        for ctx in (client_ctx(pki), client_ctx(pki, pki.rogue_cert, pki.rogue_key)):
            with pytest.raises((ssl.SSLError, nats.errors.Error, OSError)):
                bad = await nats.connect(
                    srv.client_url,
                    tls=ctx,
                    allow_reconnect=False,
                    max_reconnect_attempts=0,
                    connect_timeout=2,
                )
                await bad.flush(timeout=1)
        assert await round_trip(nc) == b"over tls"  # the server still serves
        await nc.close()


async def test_verify_and_map_takes_the_user_from_the_certificate(pki: Pki) -> None:
    users = [
        User(user="alice@example.com", permissions={"publish": {"allow": ["tls.>"]}}),
        User(user="CN=bob,OU=eng,O=Acme"),
    ]
    async with running(pki, users, verify_and_map=True) as srv:
        errors: list[str] = []

        async def on_error(e: Exception) -> None:
            errors.append(str(e))

        alice = await nats.connect(
            srv.client_url,
            tls=client_ctx(pki, pki.alice_cert, pki.alice_key),
            allow_reconnect=False,
            error_cb=on_error,
            user="ignored",
            password="ignored",
        )
        assert await round_trip(alice) == b"over tls"
        await alice.publish("elsewhere", b"x")
        await alice.flush()
        await asyncio.sleep(0.1)
        assert any('publish to "elsewhere"' in e.lower() for e in errors)
        bob = await nats.connect(
            srv.client_url, tls=client_ctx(pki, pki.bob_cert, pki.bob_key), allow_reconnect=False
        )
        await bob.flush()
        assert sorted(c.user for c in srv.connections.values()) == [
            "CN=bob,OU=eng,O=Acme",
            "alice@example.com",
        ]
        await alice.close()
        await bob.close()
    # a certificate the CA signed for a name that is no user is an authorization violation
    async with running(pki, [User(user="carol@example.com")], verify_and_map=True) as srv:
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(
                srv.client_url,
                tls=client_ctx(pki, pki.alice_cert, pki.alice_key),
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )


async def test_handshake_first(pki: Pki) -> None:
    async with running(pki, handshake_first=True) as srv:
        nc = await nats.connect(
            srv.client_url, tls=client_ctx(pki), tls_handshake_first=True, allow_reconnect=False
        )
        assert await round_trip(nc) == b"over tls"
        await nc.close()
        # nothing is said before the handshake: a client waiting for INFO gets it only over TLS
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.3)
        writer.close()


async def test_plaintext_client_and_stalled_handshake_are_closed(pki: Pki) -> None:
    async with running(pki, timeout=0.5) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await reader.readline()  # INFO, in plaintext
        writer.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        assert await asyncio.wait_for(reader.read(), 2) == b""  # closed, no -ERR, no hang
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await reader.readline()
        start = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 3) == b""  # never handshakes
        assert time.monotonic() - start < 1.5
        reasons = [c.close_reason for c in srv.closed_connections]
        assert reasons == ["TLS Handshake Failure", "TLS Handshake Failure"]
        nc = await nats.connect(srv.client_url, tls=client_ctx(pki), allow_reconnect=False)
        assert await round_trip(nc) == b"over tls"
        await nc.close()


async def test_https_monitoring(pki: Pki) -> None:
    opts = ServerOptions(host="127.0.0.1", port=0, https_port=-1, tls=tls_opts(pki))
    async with jetpy.Server(opts) as srv:
        assert srv.monitor_url.startswith("https://")
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", srv.http_port, ssl=client_ctx(pki), server_hostname="127.0.0.1"
        )
        writer.write(b"GET /varz HTTP/1.0\r\n\r\n")
        body = await reader.read()
        writer.close()
        head, _, payload = body.partition(b"\r\n\r\n")
        assert head.split(b" ")[1] == b"200"
        varz = json.loads(payload)
        assert varz["https_port"] == -1 and varz["http_port"] == 0  # as configured, as nats-server
        assert varz["tls_required"] is True and varz["tls_timeout"] == 2


# -- against nats-server 2.15.1 --------------------------------------------------------------


def _start(cmd: list[str], conf: Path, log: Path) -> Proc:
    return start_process([*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], log)


@pytest.fixture
def both(pki: Pki, tmp_path: Path) -> Iterator[dict[str, Proc]]:
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server is not installed")
    conf = tmp_path / "tls.conf"
    conf.write_text(
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca}", verify: true }}\n'
    )
    procs = {
        "jetpy": _start([*JETPY_SERVER, "-D"], conf, tmp_path / "jetpy.log"),
        "2.15.1": _start([REFERENCE_NEWEST, "-D"], conf, tmp_path / "ref.log"),
    }
    yield procs
    for p in procs.values():
        p.stop(signal.SIGKILL)


async def test_info_and_plaintext_client_as_nats_server(both: dict[str, Proc]) -> None:
    shared = (
        "headers",
        "auth_required",
        "tls_required",
        "tls_verify",
        "max_payload",
        "client_id",
        "client_ip",
    )

    async def probe(port: int) -> tuple[list[str], bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        info = json.loads((await reader.readline())[5:])
        writer.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        rest = await asyncio.wait_for(reader.read(), 3)
        writer.close()
        return [k for k in info if k in shared], rest

    ours, theirs = await asyncio.gather(probe(both["jetpy"].port), probe(both["2.15.1"].port))
    assert ours == theirs
    assert ours[0][:4] == ["headers", "tls_required", "tls_verify", "max_payload"]
    await asyncio.sleep(0.2)
    for name in ("jetpy", "2.15.1"):
        log = both[name].log()
        assert "TLS handshake error: tls: first record does not look like a TLS handshake" in log or (
            name == "jetpy" and "TLS handshake error: first record does not look like a TLS handshake" in log
        )
        assert "TLS required for client connections" in log
