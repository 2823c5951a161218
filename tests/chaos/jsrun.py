"""One run of the fault harness on real JetStream, and ``make chaos``'s command line for it.

    python -m chaos.jsrun --size 3 --duration 60 --seed 7 [--faults kill-leader,corrupt] [--out DIR]

(from ``tests/``). Starts ``size`` clustered JetStream servers (``jschaos``), creates a file
stream (R3 on three servers, R5 on five) with a durable consumer and an R3 KV bucket with
nats-py, runs the publishers, the consumer's worker and the KV registers (``jsworkload``) while the nemesis (``nemesis``, the test service's run's
own) inflicts faults on the stream's and the bucket's Raft groups, heals everything, waits until
every replica of both holds the same last sequence, drains the consumer, stops the servers and
reads every replica of the stream back from its own files. The checks (``checks``, ``linearizable``): on every
replica, each acknowledged id at the sequence its PubAck gave (the exact ids and sequences lost,
moved or duplicated are reported), no id twice (every retry of an id falls within the
de-duplication window), nothing nobody published; every replica of each stream identical; each
KV key's history linearizable; never two leaders in one term of a group; every acknowledged
message delivered by the consumer, none delivered again after its ack was confirmed, and the
consumer drained (its ack floor at the last one, nothing pending). Writes ``report.json``
and ``report.txt`` as ``chaos.run`` does; the exit status is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .checks import AppendCheck, check_appends
from .cluster import Settings
from .jschaos import ID_SUBJECT, KV_STREAM, PROBE_SUBJECT, STREAM, JsChaosCluster
from .jsworkload import JsWorkload
from .linearizable import Verdict, check_registers
from .nemesis import FAULTS, Nemesis
from .run import (
    RunResult,
    count_kinds,
    episode_docs,
    recovery_doc,
    recovery_problems,
    verdict_word,
    write_report,
)

CONVERGE_TIMEOUT = 60.0
DRAIN_TIMEOUT = 60.0  # seconds the consumer is given to deliver and see acknowledged what is left


@dataclass
class JsChecks:
    appends: dict[str, AppendCheck]  # per replica of the stream
    registers: list[Verdict]
    replicas: dict[str, dict[str, Any]]  # stream -> server -> its replica's state and digest
    split_terms: dict[str, list[str]]
    duplicated_at: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # server -> id -> sequences
    stuck: str = ""
    skipped: list[int] = field(default_factory=list)  # acknowledged, never delivered by the consumer
    again: list[int] = field(default_factory=list)  # delivered after a confirmed ack
    drained: bool = False

    @property
    def replicas_equal(self) -> bool:
        return all(
            len({(d["last_seq"], d["digest"]) for d in per.values()}) == 1 for per in self.replicas.values()
        )

    @property
    def ok(self) -> bool:
        return (
            not self.stuck
            and bool(self.appends)
            and all(a.ok for a in self.appends.values())
            and all(v.linearizable is True for v in self.registers)
            and self.replicas_equal
            and not self.split_terms
            and not self.skipped
            and not self.again
            and self.drained
        )


def _jsz_states(cluster: JsChaosCluster, name: str) -> dict[str, tuple[int, int] | None]:
    """Each server's replica of stream ``name`` as its /jsz reports it: (last_seq, messages)."""
    out: dict[str, tuple[int, int] | None] = {}
    for n, node in cluster.nodes.items():
        try:
            with urllib.request.urlopen(node.monitor + "/jsz?streams=true", timeout=2) as r:
                doc = json.load(r)
        except (OSError, ValueError):
            out[n] = None
            continue
        for acc in doc.get("account_details", []):
            for s in acc.get("stream_detail", []):
                if s["name"] == name:
                    out[n] = (s["state"]["last_seq"], s["state"]["messages"])
    return out


async def _converge(cluster: JsChaosCluster) -> str:
    """Once healed: a publish to each stream through its leader (so every replica learns all is
    committed), then every replica at the same last sequence. An empty answer, or what is stuck."""
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    pending = {STREAM: PROBE_SUBJECT, KV_STREAM: "$KV.REG.probe"}
    while pending and time.monotonic() < deadline:
        for name, subject in list(pending.items()):
            for node in cluster.nodes.values():
                if node.nc is None:
                    continue
                try:
                    msg = await node.nc.request(subject, b"final", timeout=2)
                except Exception:
                    continue
                if b'"seq"' in msg.data and b'"error"' not in msg.data:
                    del pending[name]
                    break
        await asyncio.sleep(0.2)
    if pending:
        return f"no publish to {sorted(pending)} acknowledged within {CONVERGE_TIMEOUT:g} s of the heal"
    states: dict[str, dict[str, tuple[int, int] | None]] = {}
    while time.monotonic() < deadline:
        states = {s: await asyncio.to_thread(_jsz_states, cluster, s) for s in (STREAM, KV_STREAM)}
        if all(len(set(per.values())) == 1 for per in states.values()):
            return ""
        await asyncio.sleep(0.2)
    return f"the replicas did not converge within {CONVERGE_TIMEOUT:g} s of the heal: {states}"


def _digest(msgs: dict[int, tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for seq in sorted(msgs):
        subject, data = msgs[seq]
        h.update(b"%d %s %s\n" % (seq, subject.encode(), data))
    return h.hexdigest()[:16]


def _check(cluster: JsChaosCluster, workload: JsWorkload, stuck: str, drained: bool) -> JsChecks:
    history = workload.history
    appends: dict[str, AppendCheck] = {}
    duplicated_at: dict[str, dict[str, list[int]]] = {}
    replicas: dict[str, dict[str, Any]] = {STREAM: {}, KV_STREAM: {}}
    for name in cluster.nodes:
        for stream in (STREAM, KV_STREAM):
            msgs = cluster.replica_messages(name, stream)
            if msgs is None:
                continue
            replicas[stream][name] = {
                "last_seq": max(msgs, default=0),
                "messages": len(msgs),
                "digest": _digest(msgs),
            }
            if stream != STREAM:
                continue
            final: list[Any] = [None] * max(msgs, default=0)
            seqs: dict[str, list[int]] = {}
            for seq, (subject, data) in msgs.items():
                if subject == PROBE_SUBJECT:
                    continue  # the nemesis's probes carry no id
                value = data.decode(errors="replace") if subject.startswith(ID_SUBJECT + ".") else subject
                final[seq - 1] = value
                seqs.setdefault(value, []).append(seq)
            appends[name] = check_appends(history, final)
            duplicated_at[name] = {v: s for v, s in seqs.items() if len(s) > 1}
    split = {t: sorted(ids) for t, ids in cluster.leaders_seen.items() if len(ids) > 1}
    acked = {a.position for a in history.appends if a.outcome == "ok"}
    return JsChecks(
        appends,
        check_registers(history.ops),
        replicas,
        split,
        duplicated_at,
        stuck,
        skipped=sorted(acked - set(workload.delivered)),
        again=sorted(set(workload.again)),
        drained=drained,
    )


async def run(
    root: Path,
    size: int,
    duration: float,
    seed: int,
    faults: tuple[str, ...] = FAULTS,
    tick: float = 0.05,
    snapshot_entries: int = 200,
    kv_direct: bool = False,
) -> RunResult:
    settings = Settings(size=size, tick=tick, snapshot_entries=snapshot_entries, group="")
    cluster = JsChaosCluster(root, settings, stream_replicas=min(size, 5), kv_replicas=min(size, 3))
    started = time.monotonic()
    try:
        await cluster.start()
        await cluster.create(kv_direct=kv_direct)
        await cluster.leader(within=30)
        workload = JsWorkload(cluster, random.Random(seed + 1), direct=kv_direct)
        nemesis = Nemesis(cluster, random.Random(seed + 2), faults)
        workload.start()
        await nemesis.run(time.monotonic() + duration)
        await nemesis.heal()
        await asyncio.sleep(settings.election_timeout)
        await workload.stop()
        stuck = await _converge(cluster)
        last = max((a.position for a in workload.history.appends if a.outcome == "ok"), default=0)
        drained = not stuck and await workload.drain(last, DRAIN_TIMEOUT)
        await cluster.stop_gracefully()
        checks = _check(cluster, workload, stuck, drained)
        report = _report(cluster, seed, duration, faults, workload, nemesis, checks, kv_direct)
        report["wall_seconds"] = round(time.monotonic() - started, 1)
        text = _text(report)
        write_report(root, report, text)
        for v in checks.registers:
            if v.linearizable is not True:  # the key's whole history, for reading the failure
                ops = [asdict(o) for o in workload.history.ops if o.key == v.key]
                refused = [r for r in workload.refusals if r[0] == v.key]
                (root / f"history-{v.key}.json").write_text(json.dumps({"ops": ops, "refused": refused}))
        return RunResult(checks.ok, report, text)
    finally:
        await cluster.stop()


def _report(
    cluster: JsChaosCluster,
    seed: int,
    duration: float,
    faults: tuple[str, ...],
    workload: JsWorkload,
    nemesis: Nemesis,
    checks: JsChecks,
    kv_direct: bool,
) -> dict[str, Any]:
    h = workload.history
    acked = {a.value: a.position for a in h.appends if a.outcome == "ok"}
    per_replica = {
        name: {
            "final_length": a.final_length,
            "unknown_applied": a.unknown_applied,
            "lost": [[v, acked[v]] for v in a.lost],  # [id, the sequence its PubAck gave]
            "moved": a.moved,  # [id, acked at, found at]
            "duplicated": checks.duplicated_at.get(name, {}),  # id -> every sequence holding it
            "unexpected": a.unexpected,
        }
        for name, a in checks.appends.items()
    }
    any_check = next(iter(checks.appends.values()), None)
    return {
        "ok": checks.ok,
        "stuck": checks.stuck,
        "seed": seed,
        "servers": cluster.s.size,
        "stream": {"name": STREAM, "replicas": cluster.stream_replicas, "group": cluster.groups.get(STREAM)},
        "bucket": {
            "name": KV_STREAM,
            "replicas": cluster.kv_replicas,
            "group": cluster.groups.get(KV_STREAM),
            "direct_gets": kv_direct,
        },
        "duration": duration,
        "election_timeout": cluster.s.election_timeout,
        "faults_allowed": list(faults),
        "operations": {
            "register": {k: sum(1 for o in h.ops if o.outcome == k) for k in ("ok", "fail", "info")},
            "publish": {k: sum(1 for x in h.appends if x.outcome == k) for k in ("ok", "fail", "info")},
            "errors": h.errors,
        },
        "publishes": {
            "acked": any_check.acked if any_check else len(acked),
            "unknown": any_check.unknown if any_check else 0,
            "failed": any_check.failed if any_check else 0,
            "replicas": per_replica,
        },
        "consumer": {
            "delivered": len(workload.delivered),
            "deliveries": sum(workload.delivered.values()),
            "confirmed_acks": len(workload.confirmed),
            "skipped": checks.skipped,
            "delivered_after_confirmed_ack": checks.again,
            "drained": checks.drained,
        },
        "registers": [asdict(v) | {"witness": len(v.witness)} for v in checks.registers],
        "replicas_equal": checks.replicas_equal,
        "replicas": checks.replicas,
        "leaders_per_term_ok": not checks.split_terms,
        "split_terms": checks.split_terms,
        "recovery": recovery_doc(nemesis.episodes),
        "episodes": episode_docs(nemesis.episodes),
        "episodes_t0": nemesis.episodes[0].start if nemesis.episodes else None,  # the clock of the histories
        "server_logs": recovery_problems(cluster),
    }


def _text(r: dict[str, Any]) -> str:
    p = r["publishes"]
    ops = r["operations"]
    lines = [
        f"JetStream chaos run: {r['servers']} servers (stream R{r['stream']['replicas']}, "
        f"KV R{r['bucket']['replicas']}), {r['duration']:g} s of faults, seed {r['seed']}: "
        + ("PASS" if r["ok"] else "FAIL")
        + (f" ({r['stuck']})" if r["stuck"] else ""),
        f"  faults: {len(r['episodes'])} episodes: "
        + ", ".join(f"{k} x{n}" for k, n in sorted(count_kinds(e["kind"] for e in r["episodes"]).items())),
        f"  publishes: {p['acked']} acknowledged, {p['unknown']} unknown, {p['failed']} never sent",
    ]
    for name, a in sorted(p["replicas"].items()):
        lines.append(
            f"    {name}: last sequence {a['final_length']}, lost {len(a['lost'])}, moved {len(a['moved'])}, "
            f"duplicated {len(a['duplicated'])}, unexpected {len(a['unexpected'])}, "
            f"unknown found {a['unknown_applied']}"
        )
        for kind in ("lost", "moved", "duplicated", "unexpected"):
            if a[kind]:
                lines.append(f"      {kind}: {a[kind]}")
    c = r["consumer"]
    lines.append(
        f"  consumer: {c['delivered']} delivered ({c['deliveries']} deliveries), {c['confirmed_acks']} acks "
        f"confirmed; skipped {c['skipped'] or 'none'}; delivered again after a confirmed ack "
        f"{c['delivered_after_confirmed_ack'] or 'none'}; drained {c['drained']}"
    )
    lines += [
        f"  registers (KV {'direct gets' if r['bucket']['direct_gets'] else 'gets from the leader'}): "
        f"{ops['register']['ok']} ok, {ops['register']['info']} unknown; "
        + ", ".join(
            f"{v['key']}: {verdict_word(v['linearizable'])} ({v['ops']} ops)" for v in r["registers"]
        ),
        f"  replicas: {'identical' if r['replicas_equal'] else 'DIFFER'} {r['replicas']}",
        f"  leaders per term: {'one' if r['leaders_per_term_ok'] else 'SPLIT ' + str(r['split_terms'])}",
        f"  new leader after losing one (s): {r['recovery']['election']}",
        f"  first publish after losing the leader (s): {r['recovery']['first_write']}",
    ]
    killed = r["recovery"]["by_fault"].get("kill-leader")
    if killed:
        lines.append(
            f"    after kill -9 of the leader: new leader {killed['election']}, first publish {killed['first_write']}"
        )
    for v in r["registers"]:
        if v["linearizable"] is not True:
            lines.append(f"  {v['key']}: {v['detail']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="chaos.jsrun", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--size", type=int, default=3, choices=(3, 5))
    p.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--tick", type=float, default=0.05)
    p.add_argument("--snapshot-entries", type=int, default=200, help="the groups snapshot this often")
    p.add_argument("--kv-direct", action="store_true", help="KV gets as direct gets (any replica answers)")
    p.add_argument("--out", default="", help="directory for the servers' files and the report")
    ns = p.parse_args(argv)
    faults = tuple(f for f in re.split(r"[,\s]+", ns.faults) if f)
    unknown = set(faults) - set(FAULTS)
    if unknown:
        p.error(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
    seed = ns.seed if ns.seed is not None else random.randrange(1 << 30)
    root = Path(ns.out) if ns.out else Path(tempfile.mkdtemp(prefix=f"chaos-js-{ns.size}-"))
    if root.exists() and any(root.iterdir()):
        p.error(f"{root} is not empty: a run starts from empty servers")
    result = asyncio.run(
        run(root, ns.size, ns.duration, seed, faults, ns.tick, ns.snapshot_entries, ns.kv_direct)
    )
    print(result.text, end="")
    print(f"  report: {root / 'report.json'}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
