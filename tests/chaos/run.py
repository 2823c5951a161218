"""One run of the fault harness, and ``make chaos``'s command line.

    python -m chaos.run --size 3 --duration 60 --seed 7 [--faults kill-leader,corrupt] [--out DIR]

(from ``tests/``). Starts the cluster (``cluster``), runs the workloads (``workload``) while the
nemesis (``nemesis``) inflicts faults, then heals everything, waits until every server has
applied the same state, reads the final list through the log, runs the checks (``checks``) and
writes a report: ``report.json`` (everything, including the exact lost, duplicated and
unexpected values and every fault with its timing) and ``report.txt`` (the summary printed).
The exit status is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .checks import RunChecks, check_run
from .cluster import ChaosCluster, Settings
from .nemesis import FAULTS, Episode, Nemesis
from .workload import APPEND_KEY, Workload

CONVERGE_TIMEOUT = 60.0


@dataclass
class RunResult:
    ok: bool
    report: dict[str, Any]
    text: str


async def _converge(cluster: ChaosCluster) -> dict[str, Any]:
    """Every server's own applied index and state digest, once all agree (or as they are after
    ``CONVERGE_TIMEOUT``)."""
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    states: dict[str, Any] = {}
    while time.monotonic() < deadline:
        leader, _ = await cluster.leader(within=30)
        await cluster.request(leader, {"op": "put", "k": "final", "v": time.time()}, 5)  # commit reaches all
        await asyncio.sleep(cluster.s.election_timeout)
        states = {}
        for name in cluster.founders:
            try:
                states[name] = await cluster.request(name, {"op": "local"}, 5)
            except Exception as exc:
                states[name] = {"error": str(exc)}
        if len({(d.get("applied"), d.get("digest")) for d in states.values()}) == 1:
            break
    return states


def write_report(root: Path, report: dict[str, Any], text: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (root / "report.txt").write_text(text)


def recovery_problems(cluster: ChaosCluster) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, node in cluster.nodes.items():
        text = node.log.read_text(errors="replace") if node.log.exists() else ""
        found = [
            line.split("] ", 2)[-1] for line in text.splitlines() if "recovery:" in line or "[ERR]" in line
        ]
        if found:
            out[name] = found
    return out


def recovery_doc(episodes: list[Episode]) -> dict[str, Any]:
    """The times to a new leader and to the first write after losing one, over the episodes."""
    kinds = sorted({e.kind for e in episodes if e.election is not None})
    return {
        "election": _times([e.election for e in episodes if e.election is not None]),
        "first_write": _times([e.first_write for e in episodes if e.first_write is not None]),
        "by_fault": {
            k: {
                "election": _times([e.election for e in episodes if e.kind == k and e.election is not None]),
                "first_write": _times(
                    [e.first_write for e in episodes if e.kind == k and e.first_write is not None]
                ),
            }
            for k in kinds
        },
    }


def episode_docs(episodes: list[Episode]) -> list[dict[str, Any]]:
    """Every fault with its timing, for the report."""
    t0 = episodes[0].start if episodes else 0.0
    return [
        {
            "kind": e.kind,
            "at": round(e.start - t0, 2),
            "lasted": round(e.end - e.start, 2),
            "targets": e.targets,
            "election": None if e.election is None else round(e.election, 3),
            "first_write": None if e.first_write is None else round(e.first_write, 3),
            "notes": e.notes,
        }
        for e in episodes
    ]


def _times(values: list[float]) -> dict[str, Any]:
    if not values:
        return {}
    return {
        "n": len(values),
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


async def run(
    root: Path,
    size: int,
    duration: float,
    seed: int,
    faults: tuple[str, ...] = FAULTS,
    tick: float = 0.05,
    lying_fsync: bool = False,
    snapshot_entries: int = 200,
) -> RunResult:
    settings = Settings(size=size, tick=tick, lying_fsync=lying_fsync, snapshot_entries=snapshot_entries)
    cluster = ChaosCluster(root, settings)
    started = time.monotonic()
    try:
        await cluster.start()
        await cluster.leader(within=30)
        workload = Workload(cluster, random.Random(seed + 1))
        nemesis = Nemesis(cluster, random.Random(seed + 2), faults)
        workload.start()
        await nemesis.run(time.monotonic() + duration)
        await nemesis.heal()
        await asyncio.sleep(settings.election_timeout)
        await workload.stop()
        stuck = ""
        replicas: dict[str, Any] = {}
        final: list[Any] = []
        try:
            replicas = await _converge(cluster)
            leader, _ = await cluster.leader(within=30)
            final = (await cluster.request(leader, {"op": "read", "k": APPEND_KEY}, 10)).get("vs", [])
        except Exception as exc:
            stuck = f"the cluster did not recover after healing: {type(exc).__name__}: {exc}"
        checks = check_run(workload.history, final, replicas, cluster.leaders_seen, stuck)
        report = _report(cluster, settings, seed, duration, faults, workload, nemesis.episodes, checks, final)
        report["wall_seconds"] = round(time.monotonic() - started, 1)
        text = _text(report)
        write_report(root, report, text)
        return RunResult(checks.ok, report, text)
    finally:
        await cluster.stop()


def _report(
    cluster: ChaosCluster,
    settings: Settings,
    seed: int,
    duration: float,
    faults: tuple[str, ...],
    workload: Workload,
    episodes: list[Episode],
    checks: RunChecks,
    final: list[Any],
) -> dict[str, Any]:
    h = workload.history
    a = checks.appends
    return {
        "ok": checks.ok,
        "stuck": checks.stuck,
        "seed": seed,
        "servers": settings.size,
        "duration": duration,
        "election_timeout": settings.election_timeout,
        "faults_allowed": list(faults),
        "operations": {
            "register": {k: sum(1 for o in h.ops if o.outcome == k) for k in ("ok", "fail", "info")},
            "append": {k: sum(1 for x in h.appends if x.outcome == k) for k in ("ok", "fail", "info")},
            "errors": h.errors,
        },
        "appends": {
            "acked": a.acked,
            "unknown": a.unknown,
            "unknown_applied": a.unknown_applied,
            "failed": a.failed,
            "final_length": a.final_length,
            "lost": a.lost,
            "moved": a.moved,
            "duplicated": a.duplicated,
            "unexpected": a.unexpected,
        },
        "registers": [asdict(v) | {"witness": len(v.witness)} for v in checks.registers],
        "replicas_equal": checks.replicas_equal,
        "replicas": checks.replica_states,
        "leaders_per_term_ok": checks.leaders_per_term_ok,
        "split_terms": checks.split_terms,
        "recovery": recovery_doc(episodes),
        "episodes": episode_docs(episodes),
        "server_logs": recovery_problems(cluster),
    }


def _text(r: dict[str, Any]) -> str:
    a = r["appends"]
    ops = r["operations"]
    lines = [
        f"chaos run: {r['servers']} servers, {r['duration']:g} s of faults, seed {r['seed']}: "
        + ("PASS" if r["ok"] else "FAIL")
        + (f" ({r['stuck']})" if r["stuck"] else ""),
        f"  faults: {len(r['episodes'])} episodes: "
        + ", ".join(f"{k} x{n}" for k, n in sorted(count_kinds(e["kind"] for e in r["episodes"]).items())),
        f"  appends: {a['acked']} acknowledged, {a['unknown']} unknown ({a['unknown_applied']} of them applied), "
        f"{a['failed']} refused; final list {a['final_length']}",
        f"    lost {len(a['lost'])}, moved {len(a['moved'])}, duplicated {len(a['duplicated'])}, "
        f"unexpected {len(a['unexpected'])}",
        f"  registers: {ops['register']['ok']} ok, {ops['register']['fail']} refused, {ops['register']['info']} unknown; "
        + ", ".join(
            f"{v['key']}: {verdict_word(v['linearizable'])} ({v['ops']} ops)" for v in r["registers"]
        ),
        f"  replicas: {'identical' if r['replicas_equal'] else 'DIFFER'} {r['replicas']}",
        f"  leaders per term: {'one' if r['leaders_per_term_ok'] else 'SPLIT ' + str(r['split_terms'])}",
        f"  new leader after losing one (s): {r['recovery']['election']}",
        f"  first write after losing the leader (s): {r['recovery']['first_write']}",
    ]
    for kind in ("lost", "moved", "duplicated", "unexpected"):
        if a[kind]:
            lines.append(f"  {kind}: {a[kind]}")
    for v in r["registers"]:
        if v["linearizable"] is not True:
            lines.append(f"  {v['key']}: {v['detail']}")
    return "\n".join(lines) + "\n"


def verdict_word(v: bool | None) -> str:
    return {True: "linearizable", False: "NOT linearizable", None: "undecided"}[v]


def count_kinds(kinds: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in kinds:
        out[k] = out.get(k, 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="chaos.run", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--size", type=int, default=3)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--tick", type=float, default=0.05)
    p.add_argument("--out", default="", help="directory for the servers' files and the report")
    p.add_argument("--lying-fsync", action="store_true", help="run broken servers (their fsync lies)")
    ns = p.parse_args(argv)
    faults = tuple(f for f in re.split(r"[,\s]+", ns.faults) if f)
    unknown = set(faults) - set(FAULTS)
    if unknown:
        p.error(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
    seed = ns.seed if ns.seed is not None else random.randrange(1 << 30)
    root = Path(ns.out) if ns.out else Path(tempfile.mkdtemp(prefix=f"chaos-{ns.size}-"))
    if root.exists() and any(root.iterdir()):
        p.error(
            f"{root} is not empty: a run starts from empty servers (their state would mix with the last run's)"
        )
    result = asyncio.run(run(root, ns.size, ns.duration, seed, faults, ns.tick, ns.lying_fsync))
    print(result.text, end="")
    print(f"  report: {root / 'report.json'}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
