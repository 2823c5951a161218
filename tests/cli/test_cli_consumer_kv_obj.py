"""`jetpy consumer ...`, `jetpy kv ...` and `jetpy object ...` against Debian's nats-server (the
reference) and jetpy: the same commands, the same outcomes."""

from __future__ import annotations

import json
from pathlib import Path

from cli.conftest import api, finish, js_publish, run_cli, run_many, start_cli, wait_ready
from conftest import Proc


async def test_consumer_add_ls_info_next_rm(any_server: Proc) -> None:
    url = any_server.url
    await api(url, "STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.*"]})
    await js_publish(url, *[(f"orders.{s}", f"order {i}".encode()) for i, s in enumerate("nnxnn", 1)])
    add = run_cli(
        url,
        "consumer",
        "add",
        "ORDERS",
        "NEW",
        "--pull",
        "--filter",
        "orders.n",
        "--ack",
        "explicit",
        "--deliver",
        "all",
        "--wait",
        "10s",
        "--max-deliver",
        "5",
    )
    assert add.code == 0, add
    assert "Consumer ORDERS > NEW was created" in add.out and "Unprocessed Messages: 4" in add.out
    ls, info = run_many(url, ["consumer", "ls", "ORDERS"], ["consumer", "info", "ORDERS", "NEW", "--json"])
    row = next(x for x in ls.out.splitlines() if "│ NEW " in x)
    assert "pull" in row and "orders.n" in row
    cfg = json.loads(info.out)["config"]
    assert (cfg["ack_policy"], cfg["filter_subject"], cfg["ack_wait"], cfg["max_deliver"]) == (
        "explicit",
        "orders.n",
        10 * 10**9,
        5,
    )

    nxt = run_cli(url, "consumer", "next", "ORDERS", "NEW", "--count", "3", "--json")
    assert nxt.code == 0, nxt
    got = [json.loads(x) for x in nxt.out.splitlines()]
    assert [(m["data"], m["stream_seq"]) for m in got] == [("order 1", 1), ("order 2", 2), ("order 4", 4)]
    state = await api(url, "CONSUMER.INFO.ORDERS.NEW")
    assert (state["num_ack_pending"], state["num_pending"], state["ack_floor"]["stream_seq"]) == (0, 1, 4)
    rest = run_cli(url, "consumer", "next", "ORDERS", "NEW", "--count", "5", "--wait", "500ms", "--raw")
    assert rest.code == 0 and rest.out == "order 5\n", rest
    empty = run_cli(url, "consumer", "next", "ORDERS", "NEW", "--wait", "300ms")
    assert empty.code == 1 and "no message received" in empty.err

    refused, gone = run_many(url, ["consumer", "rm", "ORDERS", "NEW"], ["consumer", "info", "ORDERS", "NOPE"])
    assert refused.code == 2
    assert gone.code == 1 and "10014" in gone.err
    assert run_cli(url, "consumer", "rm", "ORDERS", "NEW", "-f").code == 0
    assert (await api(url, "CONSUMER.NAMES.ORDERS"))["consumers"] in (None, [])


async def test_kv_verbs(any_server: Proc) -> None:
    url = any_server.url
    add = run_cli(url, "kv", "add", "CONFIG", "--history", "5", "--ttl", "1h")
    assert add.code == 0 and "History: 5" in add.out, add
    cfg = (await api(url, "STREAM.INFO.KV_CONFIG"))["config"]
    assert (cfg["subjects"], cfg["max_msgs_per_subject"], cfg["max_age"]) == (
        ["$KV.CONFIG.>"],
        5,
        3600 * 10**9,
    )
    assert cfg["allow_rollup_hdrs"] and cfg["deny_delete"] and cfg["discard"] == "new"
    assert [run_cli(url, "kv", "put", "CONFIG", "app.color", v).out for v in ("blue", "red")] == [
        "1\n",
        "2\n",
    ]
    assert run_cli(url, "kv", "put", "CONFIG", "app.name", input=b"piped value").out == "3\n"
    watch = start_cli(url, "kv", "watch", "CONFIG", "app.*", "--count", "3", "--json", "--wait", "30s")
    wait_ready(watch, b"Watching bucket CONFIG")
    get, raw, rev1, hist, keys, buckets, missing = run_many(
        url,
        ["kv", "get", "CONFIG", "app.color"],
        ["kv", "get", "CONFIG", "app.name", "--raw"],
        ["kv", "get", "CONFIG", "app.color", "--revision", "1", "--json"],
        ["kv", "history", "CONFIG", "app.color", "--json"],
        ["kv", "ls", "CONFIG"],
        ["kv", "ls"],
        ["kv", "get", "CONFIG", "app.none"],
    )
    assert get.code == 0 and "CONFIG > app.color revision: 2" in get.out and get.out.rstrip().endswith("red")
    assert raw.out == "piped value"
    assert json.loads(rev1.out)["value"] == "blue"
    assert [(h["revision"], h["value"], h["operation"]) for h in json.loads(hist.out)] == [
        (1, "blue", "PUT"),
        (2, "red", "PUT"),
    ]
    assert keys.out.split() == ["app.color", "app.name"]
    assert "│ CONFIG " in buckets.out
    assert missing.code == 1 and "key 'app.none' not found" in missing.err
    assert run_cli(url, "kv", "del", "CONFIG", "app.name").code == 0
    seen = finish(watch, timeout=30)
    assert seen.code == 0, seen
    updates = [json.loads(x) for x in seen.out.splitlines()]
    # the current values first, then the delete as it happens
    assert [(u["key"], u["operation"]) for u in updates] == [
        ("app.color", "PUT"),
        ("app.name", "PUT"),
        ("app.name", "DEL"),
    ]
    deleted = run_cli(url, "kv", "get", "CONFIG", "app.name")
    assert deleted.code == 1 and "(deleted)" in deleted.err
    refused = run_cli(url, "kv", "del", "CONFIG")
    assert refused.code == 2 and "KV_CONFIG" in (await api(url, "STREAM.NAMES"))["streams"]
    assert run_cli(url, "kv", "rm", "CONFIG", "-f").code == 0
    nob = run_cli(url, "kv", "get", "CONFIG", "app.color")
    assert nob.code == 1 and "bucket 'CONFIG' not found" in nob.err


async def test_object_verbs(any_server: Proc, tmp_path: Path) -> None:
    url = any_server.url
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 1200)  # 300 KiB: three 128 KiB chunks
    assert run_cli(url, "object", "add", "FILES", "--description", "test files").code == 0
    put = run_cli(url, "object", "put", "FILES", str(blob))
    assert put.code == 0 and "Stored 'blob.bin' in bucket FILES: 300.0 KiB in 3 chunks" in put.out, put
    named = run_cli(url, "object", "put", "FILES", "-", "--name", "notes/readme.txt", input=b"hello objects")
    assert named.code == 0, named
    out = tmp_path / "copy.bin"
    ls, buckets, get, to_stdout = run_many(
        url,
        ["object", "ls", "FILES", "--json"],
        ["object", "ls"],
        ["object", "get", "FILES", "blob.bin", "-O", str(out)],
        ["object", "get", "FILES", "notes/readme.txt", "-O", "-"],
    )
    assert {(o["name"], o["size"]) for o in json.loads(ls.out)} == {
        ("blob.bin", 307200),
        ("notes/readme.txt", 13),
    }
    assert "│ FILES " in buckets.out and "test files" in buckets.out
    assert get.code == 0 and out.read_bytes() == blob.read_bytes(), get
    assert to_stdout.out == "hello objects"
    exists = run_cli(url, "object", "get", "FILES", "blob.bin", "-O", str(out))
    assert exists.code == 2 and "--force" in exists.err
    assert run_cli(url, "object", "rm", "FILES", "blob.bin", "-f").code == 0
    gone = run_cli(url, "object", "get", "FILES", "blob.bin", "-O", str(tmp_path / "never.bin"))
    assert gone.code == 1 and "not found" in gone.err
    assert not (tmp_path / "never.bin").exists() and not (tmp_path / "never.bin.partial").exists()
    assert run_cli(url, "object", "rm", "FILES", "-f").code == 0
    assert "OBJ_FILES" not in ((await api(url, "STREAM.NAMES"))["streams"] or [])
