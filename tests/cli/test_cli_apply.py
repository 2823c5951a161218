"""`jetpy apply -f FILE`: plan printed first, dry run changes nothing, apply converges, a second
apply is a no-op, updates show field diffs, and an invalid file creates nothing."""

from __future__ import annotations

import json
from pathlib import Path

from cli.conftest import api, run_cli, run_many
from conftest import Proc

SPEC = """
streams:
  - name: APPLIED
    subjects: ["applied.>"]
    storage: file
    max_age: 7d
    max_bytes: 1GB
    consumers:
      - name: PROCESSOR
        ack_policy: explicit
        filter_subject: applied.new
        ack_wait: 30s
consumers:
  - stream: APPLIED
    name: AUDIT
    ack_policy: none
kv:
  - bucket: APPSETTINGS
    history: 3
    ttl: 1h
"""


async def test_apply_plan_dry_run_converge_and_update(jetpy: Proc, tmp_path: Path) -> None:
    url = jetpy.url
    spec = tmp_path / "streams.yaml"
    spec.write_text(SPEC)
    dry = run_cli(url, "apply", "-f", str(spec), "--dry-run")
    assert dry.code == 0, dry
    for line in (
        "+ stream APPLIED",
        "    max_age: 7d",
        "+ kv APPSETTINGS",
        "+ consumer APPLIED > PROCESSOR",
        "+ consumer APPLIED > AUDIT",
        "Plan: 4 to create, 0 to update, 0 unchanged",
        "Dry run",
    ):
        assert line in dry.out, dry
    assert not {"APPLIED", "KV_APPSETTINGS"} & set((await api(url, "STREAM.NAMES"))["streams"] or [])

    done = run_cli(url, "apply", "-f", str(spec))
    assert done.code == 0 and "Apply complete" in done.out, done
    orders = (await api(url, "STREAM.INFO.APPLIED"))["config"]
    assert (orders["max_age"], orders["max_bytes"]) == (7 * 86400 * 10**9, 1024**3)
    kv = (await api(url, "STREAM.INFO.KV_APPSETTINGS"))["config"]
    assert (kv["max_msgs_per_subject"], kv["max_age"], kv["subjects"]) == (
        3,
        3600 * 10**9,
        ["$KV.APPSETTINGS.>"],
    )
    proc = (await api(url, "CONSUMER.INFO.APPLIED.PROCESSOR"))["config"]
    assert (proc["filter_subject"], proc["ack_wait"], proc["durable_name"]) == (
        "applied.new",
        30 * 10**9,
        "PROCESSOR",
    )
    assert (await api(url, "CONSUMER.INFO.APPLIED.AUDIT"))["config"]["ack_policy"] == "none"

    again = run_cli(url, "apply", "-f", str(spec), "--json")
    plan = json.loads(again.out)
    assert [c["action"] for c in plan["changes"]] == ["unchanged"] * 4

    spec.write_text(SPEC.replace("max_age: 7d", "max_age: 14d").replace("history: 3", "history: 10"))
    dry = run_cli(url, "apply", "-f", str(spec), "--dry-run")
    assert "~ stream APPLIED\n    max_age: 7d -> 14d" in dry.out, dry
    assert "~ kv APPSETTINGS\n    max_msgs_per_subject: 3 -> 10" in dry.out
    assert (await api(url, "STREAM.INFO.APPLIED"))["config"]["max_age"] == 7 * 86400 * 10**9
    real = run_cli(url, "apply", "-f", str(spec))
    assert real.code == 0 and "Updated stream APPLIED" in real.out and "Updated kv APPSETTINGS" in real.out, (
        real
    )
    assert (await api(url, "STREAM.INFO.APPLIED"))["config"]["max_age"] == 14 * 86400 * 10**9
    assert (await api(url, "STREAM.INFO.KV_APPSETTINGS"))["config"]["max_msgs_per_subject"] == 10


PAUSED_SPEC = """
streams:
  - name: APPLYPAUSE
    subjects: ["applypause.>"]
    consumers:
      - name: WORKER
        ack_policy: explicit
"""


async def test_apply_pauses_and_resumes_a_consumer(jetpy: Proc, tmp_path: Path) -> None:
    """An update never changes a consumer's pause on the server (as nats-server): apply sends
    CONSUMER.PAUSE for it, so the file converges."""
    url = jetpy.url
    spec = tmp_path / "paused.yaml"
    spec.write_text(PAUSED_SPEC)
    assert run_cli(url, "apply", "-f", str(spec)).code == 0
    spec.write_text(PAUSED_SPEC + '        pause_until: "2100-01-01T00:00:00Z"\n')
    paused = run_cli(url, "apply", "-f", str(spec))
    assert paused.code == 0 and "Updated consumer APPLYPAUSE > WORKER" in paused.out, paused
    info = await api(url, "CONSUMER.INFO.APPLYPAUSE.WORKER")
    assert info["paused"] and info["config"]["pause_until"] == "2100-01-01T00:00:00Z"
    again = json.loads(run_cli(url, "apply", "-f", str(spec), "--json").out)
    assert [c["action"] for c in again["changes"]] == ["unchanged", "unchanged"]
    spec.write_text(PAUSED_SPEC + '        pause_until: "2000-01-01T00:00:00Z"\n')
    assert run_cli(url, "apply", "-f", str(spec)).code == 0
    assert not (await api(url, "CONSUMER.INFO.APPLYPAUSE.WORKER")).get("paused")


async def test_invalid_files_are_usage_errors_and_change_nothing(jetpy: Proc, tmp_path: Path) -> None:
    url = jetpy.url
    files = {
        "typo.yaml": (
            "streams:\n  - name: TYPO\n    subjects: [typo.>]\n    max_msg: 10\n",
            "unknown field max_msg",
        ),
        "enum.yaml": (
            "streams:\n  - name: ENUM\n    retention: sometimes\n",
            "retention: 'sometimes' is not one of",
        ),
        "dur.yaml": ("streams:\n  - name: DUR\n    max_age: soon\n", "invalid duration 'soon'"),
        "yaml.yaml": ("streams: [\n  - name: X\n", "not valid YAML"),
        "bucket.yaml": ("streams:\n  - name: OK1\nkv:\n  - bucket: bad.bucket\n", "invalid bucket name"),
        "top.yaml": ("stream:\n  - name: X\n", "unknown top-level key stream"),
        "history.yaml": ("kv:\n  - bucket: H\n    history: 100\n", "history must be between 1 and 64"),
    }
    cmds = []
    for name, (text, _) in files.items():
        (tmp_path / name).write_text(text)
        cmds.append(["apply", "-f", str(tmp_path / name)])
    cmds.append(["apply", "-f", str(tmp_path / "missing.yaml")])
    results = run_many(url, *cmds)
    for r, (_, want) in zip(results, [*files.values(), ("", "cannot read")], strict=True):
        assert r.code == 2, r
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], r
    names = (await api(url, "STREAM.NAMES"))["streams"] or []
    assert not {"TYPO", "ENUM", "DUR", "OK1", "KV_H"} & set(names)  # OK1 was valid, but its file was not
