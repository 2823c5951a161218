"""The nats CLI's habits: global options anywhere on the line, nats CLI contexts, and the
`stream report`, `consumer report` and `server report jetstream` tables (against jetpy)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli.conftest import CLI, CLI_TIMEOUT, Result, api, as_system_user, cli_env, js_publish, run_many
from conftest import Proc
from jetpy.cli.reports import CONSUMER_COLUMNS, STREAM_COLUMNS


def run_env(*args: str, env: dict[str, str]) -> Result:
    p = subprocess.run(
        [*CLI, *args], input=b"", capture_output=True, timeout=CLI_TIMEOUT, env={**cli_env(), **env}
    )
    return Result(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


async def test_global_options_anywhere_on_the_line(jetpy: Proc) -> None:
    url = jetpy.url
    await api(url, "STREAM.CREATE.HABITS", {"name": "HABITS", "subjects": ["habits.>"]})
    before, after, equals, mixed, alias = run_many(
        None,
        ["-s", url, "stream", "ls", "--names"],
        ["stream", "ls", "--names", "--server", url],
        ["stream", "ls", "--server=" + url, "--names"],
        ["stream", "--timeout", "3", "ls", "-s", url, "--names"],
        ["str", "ls", "-n", "-s", url],
    )
    for r in (before, after, equals, mixed, alias):
        assert r.code == 0, r
        assert "HABITS" in r.out.split(), r
    # a global option after `--` is the command's argument, not an option
    pub = run_env("-s", url, "pub", "habits.x", "--", "--server", env={})
    assert pub.code == 2 or pub.code == 0, pub


async def test_nats_contexts(jetpy: Proc, tmp_path: Path) -> None:
    url = jetpy.url
    await api(url, "STREAM.CREATE.CTXS", {"name": "CTXS", "subjects": ["ctxs.>"]})
    ctx_dir = tmp_path / "nats" / "context"
    ctx_dir.mkdir(parents=True)
    (ctx_dir / "dev.json").write_text(json.dumps({"description": "dev", "url": url}))
    (ctx_dir / "broken.json").write_text(json.dumps({"url": "nats://127.0.0.1:1"}))
    env = {"XDG_CONFIG_HOME": str(tmp_path)}

    named = run_env("--context", "dev", "stream", "ls", "-n", env=env)
    assert named.code == 0 and "CTXS" in named.out, named
    anywhere = run_env("stream", "ls", "-n", "--context", "dev", env=env)
    assert anywhere.code == 0 and "CTXS" in anywhere.out, anywhere
    by_path = run_env("--context", str(ctx_dir / "dev.json"), "stream", "ls", "-n", env=env)
    assert by_path.code == 0 and "CTXS" in by_path.out, by_path
    by_env = run_env("stream", "ls", "-n", env={**env, "NATS_CONTEXT": "dev"})
    assert by_env.code == 0 and "CTXS" in by_env.out, by_env
    (tmp_path / "nats" / "context.txt").write_text("dev\n")  # `nats context select dev`
    selected = run_env("stream", "ls", "-n", env=env)
    assert selected.code == 0 and "CTXS" in selected.out, selected
    # a flag or NATS_URL wins over the context
    flag_wins = run_env("--context", "broken", "-s", url, "stream", "ls", "-n", env=env)
    assert flag_wins.code == 0 and "CTXS" in flag_wins.out, flag_wins
    env_wins = run_env("--context", "broken", "stream", "ls", "-n", env={**env, "NATS_URL": url})
    assert env_wins.code == 0 and "CTXS" in env_wins.out, env_wins
    unreachable = run_env("--context", "broken", "stream", "ls", env=env)
    assert unreachable.code == 3 and "127.0.0.1:1" in unreachable.err, unreachable
    missing = run_env("--context", "nope", "stream", "ls", env=env)
    assert missing.code == 2 and "nope" in missing.err, missing


async def test_report_tables(jetpy: Proc) -> None:
    url = jetpy.url
    await api(
        url, "STREAM.CREATE.REPORTS", {"name": "REPORTS", "subjects": ["reports.>"], "storage": "memory"}
    )
    await js_publish(url, *[("reports.a", b"x" * 10)] * 5)
    await api(
        url,
        "CONSUMER.CREATE.REPORTS.WORKER",
        {"stream_name": "REPORTS", "config": {"durable_name": "WORKER", "ack_policy": "explicit"}},
    )
    streams, consumers, no_stream = run_many(
        url, ["stream", "report"], ["consumer", "report", "REPORTS"], ["consumer", "report", "NOPE"]
    )
    # the server report asks the $SYS requests: the system account's user may
    servers, servers_json, refused = run_many(
        as_system_user(url),
        ["server", "report", "jetstream", "--wait", "0.3"],
        ["server", "report", "jetstream", "--wait", "0.3", "--json"],
        ["--user", "app", "--password", "app", "server", "report", "jetstream", "--wait", "0.3"],
    )
    assert streams.code == 0, streams
    assert "Stream Report" in streams.out
    for col in STREAM_COLUMNS:
        assert col in streams.out, col
    (row,) = [ln for ln in streams.out.splitlines() if " REPORTS " in ln]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:2] == ["REPORTS", "Memory"] and cells[3:5] == ["1", "5"] and cells[5].endswith(" B"), cells
    assert consumers.code == 0, consumers
    for col in CONSUMER_COLUMNS:
        assert col in consumers.out, col
    (crow,) = [ln for ln in consumers.out.splitlines() if " WORKER " in ln]
    ccells = [c.strip() for c in crow.strip("│ ").split("│")]
    assert ccells[:3] == ["WORKER", "Pull", "Explicit"] and ccells[6] == "5", ccells
    assert servers.code == 0, servers
    assert "JetStream Summary" in servers.out and "API Req" in servers.out
    (doc,) = json.loads(servers_json.out)
    assert doc["data"]["streams"] >= 1 and doc["server"]["id"]
    assert no_stream.code == 1 and "NOPE" in no_stream.err
    assert refused.code == 1 and "is this user allowed the system subjects?" in refused.err
