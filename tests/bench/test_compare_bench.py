"""scripts/compare_bench.py (what `make bench` runs): argument parsing, the median/ratio
arithmetic on synthetic runs, the table, and the clear failure when natsbench is unavailable;
and the JetStream cluster the R3 scenarios start, with the reference server (three processes).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "scripts" / "compare_bench.py"
    spec = importlib.util.spec_from_file_location("compare_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare_bench"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cb = _load()


def test_defaults() -> None:
    args = cb.parse_args([])
    assert args.scenarios == list(cb.DEFAULT_SCENARIOS)
    assert (args.rounds, args.size, args.msgs, args.json_out, args.jetpy_cmd) == (3, 128, None, None, None)


def test_options() -> None:
    argv = ["--scenarios", "req, pubsub,req", "--msgs", "1000", "--rounds", "5", "--json-out", "x.json"]
    args = cb.parse_args([*argv, "--size", "16", "--jetpy-cmd", "nats-server --trace"])
    assert args.scenarios == ["req", "pubsub"]  # order kept, duplicates dropped
    assert (args.msgs, args.rounds, args.size, args.json_out) == (1000, 5, 16, Path("x.json"))
    assert cb.jetpy_command(args.jetpy_cmd) == ["nats-server", "--trace"]


def test_msgs_per_scenario() -> None:
    assert cb.SCENARIOS["pubsub"].msgs(None) == 1_000_000
    assert cb.SCENARIOS["pubsub"].msgs(5000) == 5000
    assert cb.SCENARIOS["req"].msgs(None) == 20_000
    assert cb.SCENARIOS["req"].msgs(1_000_000) == 20_000  # latency runs are capped
    assert cb.SCENARIOS["req"].msgs(500) == 500


def test_every_scenario_named_in_the_brief_exists() -> None:
    names = "pubsub req jspub-file jspub-memory jsfetch-explicit jsfetch-none jsordered jspush cluster-pubsub"
    for name in names.split():
        assert name in cb.SCENARIOS


def test_the_cluster_scenario_runs_three_servers_with_clusterbench(tmp_path: Path) -> None:
    scen = cb.SCENARIOS["cluster-pubsub"]
    assert scen.cluster == 3 and "cluster-pubsub" in cb.DEFAULT_SCENARIOS
    assert (cb.CLUSTERBENCH_SRC / "main.go").is_file()


def test_the_jetstream_cluster_scenarios_are_r3_and_r1_on_three_servers() -> None:
    for name, replicas in (("jspub-r3", "3"), ("jspub-r1-cluster", "1")):
        scen = cb.SCENARIOS[name]
        assert scen.cluster == 3 and scen.jetstream and name in cb.DEFAULT_SCENARIOS
        assert scen.args[scen.args.index("-replicas") + 1] == replicas


def test_a_jetstream_cluster_starts_with_one_meta_leader_and_stops(tmp_path: Path) -> None:
    reference = Path(sys.executable).parent / "nats-server"
    if not reference.exists():
        pytest.skip("the reference nats-server is not installed in this environment")
    with cb.running_js_cluster("ref", [str(reference)], tmp_path, 60.0, 3) as servers:
        assert len(servers) == 3 and all(s.proc.poll() is None for s in servers)
        pids = [s.proc.pid for s in servers]
        assert cb._cpu_seconds(pids) > 0
    assert all(s.proc.poll() is not None for s in servers)


@pytest.mark.parametrize("argv", [["--scenarios", "nope"], ["--scenarios", ","], ["--rounds", "0"]])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cb.parse_args(argv)
    assert exc.value.code == 2
    capsys.readouterr()


def test_jetpy_flag_is_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cb.parse_args(["--help"])
    assert "--jetpy-cmd" not in capsys.readouterr().out


def _run(scenario: str, side: str, rnd: int, **result: float) -> object:
    return cb.RunRecord(scenario, side, rnd, ok=True, result=dict(result))


def test_medians_and_ratios() -> None:
    records = [
        _run("pubsub", "nats-server", 1, msgs_per_s=100.0),
        _run("pubsub", "jetpy", 1, msgs_per_s=50.0),
        _run("pubsub", "nats-server", 2, msgs_per_s=300.0),
        _run("pubsub", "jetpy", 2, msgs_per_s=70.0),
        _run("pubsub", "nats-server", 3, msgs_per_s=200.0),
        _run("pubsub", "jetpy", 3, msgs_per_s=60.0),
        _run("req", "nats-server", 1, msgs_per_s=4000.0, p50_us=100.0, p99_us=300.0),
        _run("req", "jetpy", 1, msgs_per_s=1000.0, p50_us=400.0, p99_us=900.0),
        _run("req", "nats-server", 2, msgs_per_s=5000.0, p50_us=120.0, p99_us=500.0),
        _run("req", "jetpy", 2, msgs_per_s=2000.0, p50_us=500.0, p99_us=1000.0),
    ]
    rows = {(r.scenario, r.metric): r for r in cb.summarize(records, ["pubsub", "req"])}
    pubsub = rows["pubsub", "msgs/s"]
    assert (pubsub.nats, pubsub.jetpy) == (200.0, 60.0)  # medians of 3
    assert pubsub.ratio == pytest.approx(0.3)
    assert (pubsub.runs_nats, pubsub.runs_jetpy) == ("3/3", "3/3")
    p50 = rows["req", "p50 µs"]
    assert (p50.nats, p50.jetpy) == (110.0, 450.0)  # medians of 2 average the middle pair
    assert p50.ratio == pytest.approx(450 / 110)
    assert not p50.higher_is_better
    assert ("pubsub", "p50 µs") not in rows  # not reported by that scenario: no row
    table = cb.format_table(list(rows.values()))
    assert "0.300" in table and "4.091" in table


def test_failed_jetpy_scenario_is_reported_not_raised() -> None:
    records = [
        _run("jspush", "nats-server", 1, msgs_per_s=1000.0, server_cpu_us_per_msg=2.0),
        cb.RunRecord("jspush", "jetpy", 1, ok=False, error="natsbench exit 2: add stream: no responders"),
    ]
    rows = cb.summarize(records, ["jspush", "pubsub"])
    jspush = [r for r in rows if r.scenario == "jspush"]
    assert len(jspush) == 1  # only the throughput row when one side failed
    row = jspush[0]
    assert (row.nats, row.jetpy, row.ratio) == (1000.0, None, None)
    assert row.runs_jetpy == "0/1"
    assert "no responders" in row.error
    table = cb.format_table(rows)
    assert "FAILED" in table and "no responders" in table


def test_median_and_ratio_edges() -> None:
    assert cb.median([]) is None
    assert cb.median([3.0, 1.0, 2.0]) == 2.0
    assert cb.ratio(None, 1.0) is None
    assert cb.ratio(1.0, 0.0) is None
    assert cb.ratio(3.0, 2.0) == 1.5


def test_missing_natsbench_fails_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cb, "DEFAULT_NATSBENCH", tmp_path / "no-natsbench")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("JETPY_SHARED", str(tmp_path / "no-shared"))
    with pytest.raises(cb.Fatal, match="build script"):
        cb.find_natsbench(None)
    with pytest.raises(cb.Fatal, match="not an executable"):
        cb.find_natsbench(tmp_path / "missing")
