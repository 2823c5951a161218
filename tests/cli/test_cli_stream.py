"""`jetpy stream ...` end to end: the CLI as a subprocess against jetpy and Debian's nats-server.

The seed workflows first: `stream add` with the nats CLI's flags, `stream subjects` showing
per-subject counts and the total; then the other verbs operators use. State is set up and
checked with nats-py where the verb under test is not the one creating it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli.conftest import Result, api, js_publish, run_cli, run_many
from conftest import Proc

DAY_NS = 86400 * 1_000_000_000
SEED_ADD = [
    "--subjects",
    "logs.>",
    "--storage",
    "file",
    "--retention",
    "limits",
    "--max-msgs=-1",
    "--max-bytes=-1",
    "--max-age",
    "1d",
]


def one_error_line(r: Result) -> str:
    """Errors are exactly one line on stderr."""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r
    assert lines[0].startswith("jetpy: error: "), r
    return lines[0]


async def config_of(url: str, stream: str) -> dict[str, Any]:
    cfg: dict[str, Any] = (await api(url, f"STREAM.INFO.{stream}"))["config"]
    return cfg


async def test_seed_stream_add_with_nats_cli_flags(any_server: Proc) -> None:
    url = any_server.url
    r = run_cli(url, "str", "add", "LOGS", *SEED_ADD)
    assert r.code == 0, r
    assert "Stream LOGS was created" in r.out
    assert "Maximum Age: 1d" in r.out and "Storage: file" in r.out and "Maximum Messages: unlimited" in r.out
    cfg = await config_of(url, "LOGS")
    assert cfg["subjects"] == ["logs.>"]
    assert cfg["allow_direct"] is True  # on unless told, as the nats CLI creates streams
    assert (cfg["storage"], cfg["retention"]) == ("file", "limits")
    assert (cfg["max_msgs"], cfg["max_bytes"], cfg["max_age"]) == (-1, -1, DAY_NS)
    # the same command again is fine (same config); a different config is the server's 10058
    again, clash = run_many(
        url,
        ["stream", "add", "LOGS", *SEED_ADD],
        ["stream", "add", "LOGS", "--subjects", "logs.>", "--max-age", "2d"],
    )
    assert again.code == 0, again
    assert clash.code == 1, clash
    assert "10058" in one_error_line(clash)
    assert (await config_of(url, "LOGS"))["max_age"] == DAY_NS


async def test_stream_add_direct_get_flag(any_server: Proc, tmp_path: Path) -> None:
    url = any_server.url
    assert run_cli(url, "stream", "add", "NODIRECT", "--subjects", "nd.>", "--no-allow-direct").code == 0
    assert (await config_of(url, "NODIRECT"))["allow_direct"] is False
    conf = tmp_path / "s.json"  # a config file says for itself: absent means off
    conf.write_text(json.dumps({"name": "DIRECTFILE", "subjects": ["df.>"]}))
    assert run_cli(url, "stream", "add", "--config", str(conf)).code == 0
    assert (await config_of(url, "DIRECTFILE")).get("allow_direct", False) is False


async def test_seed_subjects_counts_and_listing(any_server: Proc) -> None:
    url = any_server.url
    r = run_cli(
        url,
        "stream",
        "add",
        "answers",
        "--subjects",
        "answers.significant,answers.throwaway",
        "--max-msgs",
        "1000",
        "--max-bytes",
        "1MB",
        "--max-age",
        "5d",
    )
    assert r.code == 0, r
    sig, thr = run_many(
        url,
        ["pub", "answers.significant", "{{Count}}", "--count", "308", "-J", "-q"],
        ["pub", "answers.throwaway", "{{Count}}", "--count", "92", "-J", "-q"],
    )
    assert sig.code == 0 and thr.code == 0, (sig, thr)
    table, as_json, by_count, filtered, ls, ls_json = run_many(
        url,
        ["stream", "subjects", "answers"],
        ["stream", "subjects", "answers", "--json"],
        ["stream", "subjects", "answers", "--sort", "count"],
        ["stream", "subjects", "answers", "answers.throwaway", "--json"],
        ["stream", "ls"],
        ["stream", "ls", "--json"],
    )
    assert table.code == 0, table
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in table.out.splitlines()
        if line.count("│") == 3 and "answers." in line
    }
    assert rows == {"answers.significant": "308", "answers.throwaway": "92"}
    assert "Total: 400 messages in 2 subjects" in table.out
    assert json.loads(as_json.out) == {"answers.significant": 308, "answers.throwaway": 92}
    assert by_count.out.index("answers.significant") < by_count.out.index("answers.throwaway")
    assert json.loads(filtered.out) == {"answers.throwaway": 92}
    line = next(x for x in ls.out.splitlines() if "│ answers " in x)
    assert "│      400 │" in line
    listed = {s["config"]["name"]: s["state"]["messages"] for s in json.loads(ls_json.out)}
    assert listed["answers"] == 400


async def test_get_and_view_messages(any_server: Proc) -> None:
    url = any_server.url
    await api(url, "STREAM.CREATE.VIEW", {"name": "VIEW", "subjects": ["view.*"]})
    p = run_cli(url, "pub", "view.a", "first", "-J", "-H", "X-Trace:abc")
    assert p.code == 0 and "Stored in stream VIEW sequence 1" in p.out, p
    await js_publish(url, ("view.b", b"second"), ("view.a", b"third"))
    get, last, raw, missing, view_raw, view_a, view_since = run_many(
        url,
        ["stream", "get", "VIEW", "1"],
        ["stream", "get", "VIEW", "--last-for", "view.a", "--json"],
        ["stream", "get", "VIEW", "2", "--raw"],
        ["stream", "get", "VIEW", "99"],
        ["stream", "view", "VIEW", "--raw"],
        ["stream", "view", "VIEW", "--subject", "view.a", "--json"],
        ["stream", "view", "VIEW", "--since", "2", "-n", "1", "--raw"],
    )
    assert get.code == 0, get
    assert "Subject: view.a" in get.out and "X-Trace: abc" in get.out and "first" in get.out
    doc = json.loads(last.out)
    assert (doc["seq"], doc["subject"], doc["data"]) == (3, "view.a", "third")
    assert raw.out == "second\n"
    assert missing.code == 1 and "10037" in one_error_line(missing)
    assert view_raw.out.splitlines() == ["first", "second", "third"]
    assert [json.loads(x)["seq"] for x in view_a.out.splitlines()] == [1, 3]
    assert view_since.out.splitlines() == ["second"]


async def test_edit_shows_the_diff_and_dry_run_changes_nothing(jetpy: Proc, tmp_path: Path) -> None:
    url = jetpy.url
    await api(url, "STREAM.CREATE.EDIT", {"name": "EDIT", "subjects": ["edit.>"], "max_msgs": 10})
    dry = run_cli(url, "stream", "edit", "EDIT", "--max-msgs", "20", "--description", "new", "--dry-run")
    assert dry.code == 0, dry
    assert "~ max_msgs: 10 -> 20" in dry.out and '~ description: null -> "new"' in dry.out
    assert "nothing was changed" in dry.out
    assert (await config_of(url, "EDIT"))["max_msgs"] == 10
    unasked = run_cli(url, "stream", "edit", "EDIT", "--max-msgs", "20")  # no terminal to ask, no -f
    assert unasked.code == 2 and "~ max_msgs: 10 -> 20" in unasked.out, unasked
    assert "refusing without --force" in one_error_line(unasked)
    assert (await config_of(url, "EDIT"))["max_msgs"] == 10
    real = run_cli(url, "stream", "edit", "EDIT", "--max-msgs", "20", "--max-age", "1h", "-f")
    assert real.code == 0 and "Stream EDIT was updated" in real.out, real
    cfg = await config_of(url, "EDIT")
    assert (cfg["max_msgs"], cfg["max_age"]) == (20, 3600 * 10**9)
    to_memory = tmp_path / "memory.json"
    to_memory.write_text(json.dumps({"storage": "memory", "max_msgs": 30}))
    same, nothing, refused = run_many(
        url,
        ["stream", "edit", "EDIT", "--max-msgs", "20"],
        ["stream", "edit", "EDIT"],
        ["stream", "edit", "EDIT", "--config", str(to_memory), "--force"],
    )
    assert same.code == 0 and "nothing to change" in same.out, same
    assert nothing.code == 2, nothing
    assert refused.code == 1, refused  # the server refuses a storage change: its error, one line
    assert "storage" in one_error_line(refused)
    assert (await config_of(url, "EDIT"))["max_msgs"] == 20


async def test_config_file(jetpy: Proc, tmp_path: Path) -> None:
    url = jetpy.url
    cfg = tmp_path / "orders.json"
    cfg.write_text(
        json.dumps({"name": "FROMFILE", "subjects": ["ff.>"], "max_msgs_per_subject": 3, "storage": "memory"})
    )
    r = run_cli(url, "stream", "add", "--config", str(cfg), "--max-age", "1h")
    assert r.code == 0, r
    got = await config_of(url, "FROMFILE")
    assert (got["max_msgs_per_subject"], got["storage"], got["max_age"]) == (3, "memory", 3600 * 10**9)
    exported = tmp_path / "exported.json"  # `stream info --json` output is accepted as a config
    exported.write_text(json.dumps(await api(url, "STREAM.INFO.FROMFILE")))
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "BROKEN", ')
    again, mismatch, bad = run_many(
        url,
        ["stream", "add", "FROMFILE", "--config", str(exported)],
        ["stream", "add", "OTHER", "--config", str(cfg)],
        ["stream", "add", "--config", str(broken)],
    )
    assert again.code == 0, again
    assert mismatch.code == 2 and "does not match" in one_error_line(mismatch)
    assert bad.code == 2 and "not valid JSON" in one_error_line(bad)
    names = (await api(url, "STREAM.NAMES"))["streams"]
    assert "BROKEN" not in names and "OTHER" not in names  # nothing was created


async def test_purge_and_rm(jetpy: Proc) -> None:
    url = jetpy.url
    await api(url, "STREAM.CREATE.GONE", {"name": "GONE", "subjects": ["gone.*"]})
    await js_publish(url, *[("gone.a", b"x")] * 5, *[("gone.b", b"y")] * 3)
    refused = run_cli(url, "stream", "purge", "GONE")
    assert refused.code == 2 and "--force" in one_error_line(refused)
    assert (await api(url, "STREAM.INFO.GONE"))["state"]["messages"] == 8
    p = run_cli(url, "stream", "purge", "GONE", "--subject", "gone.a", "--keep", "1", "-f", "--json")
    assert p.code == 0 and json.loads(p.out) == {"purged": 4}, p
    p = run_cli(url, "stream", "purge", "GONE", "-f")
    assert p.code == 0 and "Purged 4 messages" in p.out
    assert (await api(url, "STREAM.INFO.GONE"))["state"]["messages"] == 0

    refused = run_cli(url, "stream", "rm", "GONE")
    assert refused.code == 2
    assert "GONE" in (await api(url, "STREAM.NAMES"))["streams"]
    assert run_cli(url, "stream", "rm", "GONE", "-f").code == 0
    after, again = run_many(url, ["stream", "info", "GONE"], ["stream", "rm", "GONE", "-f"])
    assert after.code == 1 and "stream not found (err_code 10059)" in one_error_line(after)
    assert again.code == 1 and "10059" in one_error_line(again)


async def test_info_shows_a_mirror_and_sources(any_server: Proc) -> None:
    url = any_server.url
    await api(url, "STREAM.CREATE.CLIO", {"name": "CLIO", "subjects": ["clio.>"]})
    await js_publish(url, ("clio.a", b"1"))
    await api(
        url, "STREAM.CREATE.CLIM", {"name": "CLIM", "mirror": {"name": "CLIO", "filter_subject": "clio.a"}}
    )
    mapping = [{"src": "clio.>", "dest": "copied.>"}]
    await api(
        url,
        "STREAM.CREATE.CLIS",
        {"name": "CLIS", "sources": [{"name": "CLIO", "subject_transforms": mapping}]},
    )
    mirror, sources = run_many(url, ["stream", "info", "CLIM"], ["stream", "info", "CLIS"])
    assert mirror.code == 0 and sources.code == 0, (mirror, sources)
    assert "Mirror Information:" in mirror.out and "Stream Name: CLIO" in mirror.out
    assert "Lag:" in mirror.out and "Last Seen:" in mirror.out
    assert "Source Information:" in sources.out
    if "jetpy.server" in any_server.args:  # 2.9.10 echoes neither filters nor mappings in the info
        assert "Subject Filter: clio.a" in mirror.out
        assert "Subject Mapping: clio.> to copied.>" in sources.out
