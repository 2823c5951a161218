"""`jetpy store check` / `dump` on compressed and encrypted stores: compressed blocks are read as
they are, an encrypted store with the server's key (``--key`` or ``$JETPY_STORE_KEY``); without
it, or with another, every file is named as written with another key (exit 1), never as damage,
and nothing is written."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import nats

from cli.conftest import CLI, api, cli_env, run_many
from conftest import JETPY_SERVER, start_process

KEY = "cli-store-key-0123456789abcdef"


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


async def make_store(tmp_path: Path) -> Path:
    """A stopped encrypted server's store: stream Z (compressed, 32 KB blocks) with a consumer."""
    store = tmp_path / "store"
    conf = tmp_path / "key.conf"
    conf.write_text(f'jetstream {{ key: "{KEY}" }}\n')
    proc = start_process(
        [*JETPY_SERVER, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store)],
        tmp_path / "s.log",
    )
    try:
        cfg = {"name": "Z", "subjects": ["z.>"], "compression": "s2", "max_bytes": 120_000}
        await api(proc.url, "STREAM.CREATE.Z", cfg)
        nc = await nats.connect(proc.url)
        js = nc.jetstream()
        for i in range(120):
            await js.publish("z.secret", b"CONFIDENTIAL %04d " % i * 20)
        await js.pull_subscribe("z.>", durable="D")
        await nc.close()
    finally:
        proc.stop()
    return store


async def test_check_and_dump_an_encrypted_compressed_store(tmp_path: Path) -> None:
    store = await make_store(tmp_path)
    before = snapshot(store)
    by_env = await asyncio.to_thread(
        subprocess.run,
        [*CLI, "store", "check", str(store)],
        capture_output=True,
        timeout=60,
        env={**cli_env(), "JETPY_STORE_KEY": KEY},
        check=False,
    )
    assert by_env.returncode == 0, by_env
    with_key, no_key_text, no_key, wrong, dump = run_many(
        None,
        ["store", "check", str(store), "--key", KEY, "--json"],
        ["store", "check", str(store)],
        ["store", "check", str(store), "--json"],
        ["store", "check", str(store), "--key", "not-the-key"],
        ["store", "dump", str(store), "Z", "--key", KEY, "--payload", "--max-payload", "20"],
    )
    assert with_key.code == 0, with_key
    doc = json.loads(with_key.out)
    z = doc["streams"][0]
    assert doc["ok"] and z["msgs"] == 120 and z["consumers"][0]["name"] == "D"
    assert {b["form"] for b in z["blocks"][:-1]} == {"s2+encrypted"} and z["blocks"][-1][
        "form"
    ] == "encrypted"
    assert no_key_text.code == 1
    assert "give the server's key with --key" in no_key_text.out + no_key_text.err
    assert no_key.code == 1
    problems = json.loads(no_key.out)["streams"][0]["problems"]
    assert problems and all("encryption key" in p for p in problems), problems
    assert wrong.code == 1 and "written with another encryption key" in wrong.out + wrong.err
    assert dump.code == 0 and "CONFIDENTIAL 0007" in dump.out and "subject z.secret" in dump.out
    assert snapshot(store) == before
