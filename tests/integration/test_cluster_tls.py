"""Routes over TLS (``cluster { tls {} }``): jetpy servers and nats-server 2.15.1 and 2.9.10 form
TLS routes in both directions with mutual verification; a peer whose certificate the cluster's
CA did not sign, or that speaks plaintext, gets no route; INFO and /varz say TLS is required.
Certificates are made on the spot (tests/certs.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from certs import Pki, make_pki
from cluster_support import JETPY, NEWEST, OLDEST, Member, member_cmd, start_member_cmd, wait_mesh
from conftest import wait_for
from jetpy.server.app import Server
from jetpy.server.options import ClusterOptions, ServerOptions, TlsOptions

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def route_tls(pki: Pki, rogue: bool = False) -> TlsOptions:
    if rogue:
        return TlsOptions(
            cert_file=str(pki.rogue_route_cert),
            key_file=str(pki.rogue_route_key),
            ca_file=str(pki.ca),
            verify=True,
        )
    return TlsOptions(
        cert_file=str(pki.route_cert), key_file=str(pki.route_key), ca_file=str(pki.ca), verify=True
    )


def opts(name: str, tls: TlsOptions | None, routes: list[str] | None = None) -> ServerOptions:
    return ServerOptions(
        host="127.0.0.1",
        port=0,
        http_port=-1,
        server_name=name,
        cluster=ClusterOptions(name="C1", host="127.0.0.1", port=-1, routes=routes or [], tls=tls),
    )


async def test_jetpy_routes_over_tls(pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    """Two jetpy servers verify each other's certificates; a rogue or plaintext peer gets nothing."""
    caplog.set_level(logging.DEBUG, "jetpy.server")
    async with Server(opts("A", route_tls(pki))) as a:
        assert a.cluster is not None
        seed = f"nats-route://127.0.0.1:{a.cluster.port}"
        async with Server(opts("B", route_tls(pki), [seed])) as b:
            await wait_for(lambda: b.server_id in a.cluster.remotes if a.cluster else False)
            await wait_mesh([a.client_url, b.client_url])
            varz = json.loads(await asyncio.to_thread(_get, a.monitor_url + "/varz"))
            assert varz["cluster"]["tls_required"] is True and varz["cluster"]["tls_verify"] is True
            # a peer signed by another CA is refused by both ends
            async with Server(opts("R", route_tls(pki, rogue=True), [seed])) as rogue:
                await asyncio.sleep(1.5)
                assert rogue.cluster is not None and not rogue.cluster.remotes
                assert a.cluster is not None and rogue.server_id not in a.cluster.remotes
                # (with TLS 1.3 the dialling end finds out once the accepting one hangs up)
                assert "Router connection closed" in caplog.text
            # and one speaking plaintext
            async with Server(opts("P", None, [seed])) as plain:
                await asyncio.sleep(1.5)
                assert plain.cluster is not None and not plain.cluster.remotes


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


def _conf(path: Path, pki: Pki, routes: list[str]) -> Path:
    tls = (
        f'tls {{ cert_file: "{pki.route_cert}", key_file: "{pki.route_key}", '
        f'ca_file: "{pki.ca}", verify: true, timeout: 2 }}'
    )
    route_list = ", ".join(f'"{r}"' for r in routes)
    path.write_text(f"cluster {{ name: C1, listen: 127.0.0.1:-1, {tls}, routes: [{route_list}] }}\n")
    return path


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.proc.stop(signal.SIGKILL)


@pytest.mark.parametrize("ref", [OLDEST, NEWEST])
async def test_tls_routes_with_nats_server(tmp_path: Path, pki: Pki, ref: str, members: list[Member]) -> None:
    """nats-server as the seed, jetpy dialling it; then a jetpy seed with nats-server dialling."""

    def start(kind: str, name: str, routes: list[str]) -> Member:
        conf = _conf(tmp_path / f"{name}.conf", pki, routes)
        return start_member_cmd(
            tmp_path, kind, name, member_cmd(kind, name, (), "-c", str(conf), cluster_flag=False)
        )

    seed = start(ref, "S0", [])
    members.append(seed)
    members.append(start(JETPY, "S1", [f"nats-route://127.0.0.1:{seed.cluster_port}"]))
    await wait_mesh([m.url for m in members])
    jseed = start(JETPY, "S2", [])
    members.append(jseed)
    members.append(start(ref, "S3", [f"nats-route://127.0.0.1:{jseed.cluster_port}"]))
    await wait_mesh([members[2].url, members[3].url])
    assert "Traceback" not in "".join(m.proc.log() for m in members)
