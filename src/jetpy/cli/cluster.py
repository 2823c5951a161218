"""`jetpy cluster up`: a local cluster (or super cluster) in one command, for development and tests.

Owns starting ``--size`` jetpy servers as child processes (``python -m jetpy.server``, nothing of
the server imported here), each routed to the first one so that gossip forms the mesh, on
consecutive ports from ``--port``/``--cluster-port``/``--http-port`` (0: any free port, read back
from the server's own log line); with ``--clusters N``, N such clusters joined by gateways (ports
from ``--gateway-port``; gateways have no command-line flags, so each server also gets a config
file holding its ``gateway {}`` block, in a temporary directory removed at the end), every
server's gateway pointed at the first server of the first cluster, the rest learned by gossip;
with ``--js``, clustered JetStream (each server ``-js`` with its own store under ``--store-dir``
or a temporary directory, every server given every route, its own too, and the meta leader
waited for through ``/jsz``); their logs
interleaved on stdout with each server's name in front, the URLs printed once every server is
ready, and the stop: on Ctrl-C (or SIGTERM) every
child gets SIGTERM by its PID, SIGKILL after :data:`STOP_TIMEOUT`, and the command exits 0. A
server that dies on its own stops the others and exits 1. Children run in their own session, so
a Ctrl-C in the terminal reaches this command only and the servers stop in order.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Annotated, Final

import typer

from jetpy.cli.output import EXIT_USAGE, CliError

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

START_TIMEOUT: Final = 30.0  # seconds a server may take to be ready (a cold Python start)
STOP_TIMEOUT: Final = 5.0  # seconds between SIGTERM and SIGKILL
MAX_SIZE: Final = 32  # servers in one local cluster: a full mesh of n has n*(n-1)/2 routes
MAX_CLUSTERS: Final = 8  # clusters in one local super cluster
_CLIENT = re.compile(r"Listening for client connections on (\S+):(\d+)")
_ROUTE = re.compile(r"Listening for route connections on (\S+):(\d+)")
_HTTP = re.compile(r"Starting http monitor on (\S+):(\d+)", re.IGNORECASE)
_GATEWAY = re.compile(r"Listening for gateways connections on (\S+):(\d+)")


@dataclass
class Member:
    name: str
    proc: subprocess.Popen[str]
    client_port: int = 0
    route_port: int = 0
    http_port: int = 0
    gateway_port: int = 0
    ready: threading.Event = field(default_factory=threading.Event)
    route_known: threading.Event = field(default_factory=threading.Event)
    gateway_known: threading.Event = field(default_factory=threading.Event)


def _pump(m: Member, out: IO[str], quiet: bool, lock: threading.Lock) -> None:
    """Copy a child's log to stdout with its name in front, noting its ports and readiness."""
    assert m.proc.stdout is not None
    for line in m.proc.stdout:
        if c := _CLIENT.search(line):
            m.client_port = int(c.group(2))
        elif r := _ROUTE.search(line):
            m.route_port = int(r.group(2))
            m.route_known.set()
        elif h := _HTTP.search(line):
            m.http_port = int(h.group(2))
        elif g := _GATEWAY.search(line):
            m.gateway_port = int(g.group(2))
            m.gateway_known.set()
        if "Server is ready" in line:
            m.ready.set()
        if not quiet:
            with lock:
                out.write(f"[{m.name}] {line}")
                out.flush()
    m.ready.set()
    m.route_known.set()
    m.gateway_known.set()


def _start(cmd: list[str], name: str, quiet: bool, lock: threading.Lock) -> Member:
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,  # Ctrl-C reaches `jetpy cluster up`, which stops the servers in order
    )
    m = Member(name, proc)
    threading.Thread(target=_pump, args=(m, sys.stdout, quiet, lock), daemon=True).start()
    return m


def _stop(members: list[Member]) -> None:
    for m in members:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for m in members:
        try:
            m.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            m.proc.kill()
            m.proc.wait()


class _Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted


def _wait(event: threading.Event, m: Member, what: str) -> None:
    if not event.wait(START_TIMEOUT) or m.proc.poll() is not None:
        raise CliError(f"server {m.name} did not {what} (exit code {m.proc.poll()})")


@app.command()
def up(
    size: Annotated[int, typer.Option("--size", "-n", help="Servers in the cluster.")] = 3,
    name: Annotated[str, typer.Option("--name", help="The cluster's name.")] = "jetpy",
    host: Annotated[str, typer.Option("--host", help="Address every server listens on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="First client port (then +1 per server); 0: any free port.")
    ] = 4222,
    cluster_port: Annotated[
        int, typer.Option("--cluster-port", help="First route port (then +1 per server); 0: any free port.")
    ] = 6222,
    http_port: Annotated[
        int, typer.Option("--http-port", help="First monitoring port (then +1 per server); -1: any, 0: none.")
    ] = 8222,
    clusters: Annotated[
        int, typer.Option("--clusters", help="Clusters of --size servers each, joined by gateways.")
    ] = 1,
    gateway_port: Annotated[
        int,
        typer.Option(
            "--gateway-port",
            help="First gateway port (then +1 per server; with --clusters 2+); 0: any free port.",
        ),
    ] = 7222,
    jetstream: Annotated[
        bool,
        typer.Option(
            "--jetstream", "--js", help="Clustered JetStream: every server with -js and a store of its own."
        ),
    ] = False,
    store_dir: Annotated[
        str,
        typer.Option(
            "--store-dir",
            help="With --js: the servers' stores go in DIR/<server> (kept); default: a temporary "
            "directory removed at the end.",
        ),
    ] = "",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print the URLs only, not the servers' logs.")
    ] = False,
    server_args: Annotated[
        list[str] | None,
        typer.Argument(
            help="Flags for every server, after --: e.g. -- -D --user a --pass b", show_default=False
        ),
    ] = None,
) -> None:
    """Start a local cluster of jetpy servers (child processes), or with --clusters a super
    cluster of such clusters joined by gateways, and run it until Ctrl-C."""
    if not 1 <= size <= MAX_SIZE:
        raise CliError(f"--size must be between 1 and {MAX_SIZE}", EXIT_USAGE)
    if not 1 <= clusters <= MAX_CLUSTERS:
        raise CliError(f"--clusters must be between 1 and {MAX_CLUSTERS}", EXIT_USAGE)
    if jetstream and clusters > 1:
        raise CliError(
            "--js with --clusters: JetStream across gateways is not supported by jetpy yet", EXIT_USAGE
        )
    if store_dir and not jetstream:
        raise CliError("--store-dir is for --js", EXIT_USAGE)
    extra = list(server_args or [])
    stores = tempfile.TemporaryDirectory(prefix="jetpy-cluster-js-") if jetstream and not store_dir else None
    store_root = Path(stores.name if stores is not None else store_dir)
    lock = threading.Lock()
    members: list[Member] = []
    old_int = signal.signal(signal.SIGINT, _interrupt)
    old_term = signal.signal(signal.SIGTERM, _interrupt)
    confs = tempfile.TemporaryDirectory(prefix="jetpy-cluster-up-") if clusters > 1 else None
    seed_gateway = 0
    try:
        for c in range(clusters):
            cname = name if clusters == 1 else f"{name}{c + 1}"
            seed_route = 0
            # clustered JetStream wants routes at start (a server with none is refused, as by
            # nats-server): every server is given the whole list, so its ports are chosen first
            js_routes = [
                cluster_port + c * size + i if cluster_port else _free_port(host)
                for i in range(size)
                if jetstream
            ]
            for i in range(size):
                k = c * size + i  # the server's place: its ports are the first ones + k
                sname = f"n{i + 1}" if clusters == 1 else f"c{c + 1}n{i + 1}"
                cmd = [sys.executable, "-m", "jetpy.server", "-a", host, "-n", sname, "--cluster_name", cname]
                cmd += ["-p", str(port + k if port else -1)]
                route_port = js_routes[i] if jetstream else (cluster_port + k if cluster_port else -1)
                cmd += ["--cluster", f"nats://{host}:{route_port}"]
                if http_port:
                    cmd += ["-m", str(http_port + k if http_port > 0 else -1)]
                if jetstream:  # every server's route (its own too), as nats-server's documentation shows
                    cmd += ["--routes", ",".join(f"nats-route://{host}:{r}" for r in js_routes)]
                    cmd += ["-js", "-sd", str(store_root / sname)]
                elif i:
                    cmd += ["--routes", f"nats-route://{host}:{seed_route}"]
                if confs is not None:
                    conf = Path(confs.name) / f"{sname}.conf"
                    conf.write_text(
                        _gateway_conf(
                            cname, host, gateway_port + k if gateway_port else -1, name, seed_gateway
                        )
                    )
                    cmd += ["-c", str(conf)]
                m = _start([*cmd, *extra], sname, quiet, lock)
                members.append(m)
                _wait(m.route_known, m, "listen for routes")
                if not i:
                    seed_route = m.route_port
                if confs is not None and not seed_gateway:
                    _wait(m.gateway_known, m, "listen for gateways")
                    seed_gateway = m.gateway_port
        for m in members:
            _wait(m.ready, m, "start")
        leader = _meta_leader(host, members) if jetstream else ""
        with lock:
            if clusters == 1:
                print(f"cluster {name!r}: {size} server(s) up; Ctrl-C stops them", flush=True)
            else:
                print(
                    f"super cluster: {clusters} clusters of {size} server(s) up; Ctrl-C stops them",
                    flush=True,
                )
            for m in members:
                mon = f"  monitor http://{host}:{m.http_port}" if m.http_port else ""
                gw = f"  gateway nats://{host}:{m.gateway_port}" if confs is not None else ""
                print(
                    f"  {m.name}  pid {m.proc.pid}  nats://{host}:{m.client_port}  "
                    f"route nats-route://{host}:{m.route_port}{gw}{mon}",
                    flush=True,
                )
            if jetstream:
                where = f"stores in {store_root}" + (" (removed at the end)" if stores is not None else "")
                print(f"  JetStream meta leader: {leader or '(see the servers /jsz)'}; {where}", flush=True)
            urls = ",".join(f"nats://{host}:{m.client_port}" for m in members)
            print(f"  NATS_URL={urls}", flush=True)
        while True:
            for m in members:
                if m.proc.poll() is not None:
                    raise CliError(
                        f"server {m.name} exited with code {m.proc.returncode}; stopping the others"
                    )
            time.sleep(0.2)
    except _Interrupted:
        with lock:
            print("stopping the cluster", flush=True)
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        _stop(members)
        if confs is not None:
            confs.cleanup()
        if stores is not None:
            stores.cleanup()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _meta_leader(host: str, members: list[Member]) -> str:
    """The JetStream meta leader once every server's ``/jsz`` names the same one (without
    monitoring ports: not waited for, "")."""
    if not all(m.http_port for m in members):
        return ""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        seen = set()
        for m in members:
            if m.proc.poll() is not None:
                raise CliError(f"server {m.name} exited with code {m.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://{host}:{m.http_port}/jsz", timeout=1.0) as resp:
                    seen.add(str((json.loads(resp.read()).get("meta_cluster") or {}).get("leader") or ""))
            except (OSError, ValueError):
                seen.add("")
        if len(seen) == 1 and "" not in seen:
            return seen.pop()
        time.sleep(0.2)
    raise CliError(f"the servers did not agree on a JetStream meta leader within {START_TIMEOUT:g}s")


def _gateway_conf(cluster: str, host: str, port: int, name: str, seed: int) -> str:
    """A server's ``gateway {}`` block: its cluster, its listen address and, after the first
    server, the first cluster's first server (the rest of the super cluster is learned)."""
    remotes = f'gateways: [ {{ name: "{name}1", urls: ["nats://{host}:{seed}"] }} ]' if seed else ""
    return f'gateway {{ name: "{cluster}", listen: "{host}:{port}", {remotes} }}\n'
