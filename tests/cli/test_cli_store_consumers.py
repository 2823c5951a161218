"""`jetpy store check` on consumer files: a missing state or metadata file, a damaged state, a
state past the stream's last sequence, each printed with its file, offset and reason, and the
check exits 1; nothing is repaired."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from cli.conftest import run_many
from cli.test_cli_store import make_store, snapshot
from jetpy.store.base import ConsumerState
from jetpy.store.consumer_state import CONSUMER_MAGIC, write_framed_atomic


async def test_consumer_faults_are_reported_with_file_offset_and_reason(tmp_path: Path) -> None:
    store = await make_store(tmp_path)
    reader = store / "jetstream" / "$G" / "streams" / "EVENTS" / "obs" / "READER"
    clean = run_many(None, ["store", "check", str(store)])[0]
    assert clean.code == 0, clean

    # the state points past the stream's last sequence (6)
    write_framed_atomic(reader / "o.dat", CONSUMER_MAGIC, msgspec.msgpack.encode(ConsumerState(9, 9, 9, 9)))
    before = snapshot(store)
    check, as_json = run_many(None, ["store", "check", str(store)], ["store", "check", str(store), "--json"])
    assert check.code == 1, check
    assert (
        "EVENTS: consumer READER: obs/READER/o.dat at offset 16: delivered stream sequence 9 is past "
        "the stream's last sequence 6" in check.out
    )
    (ev,) = [s for s in json.loads(as_json.out)["streams"] if s["stream"] == "EVENTS"]
    assert ev["consumers"][0]["problems"] == [
        {
            "file": "obs/READER/o.dat",
            "offset": 16,
            "reason": "delivered stream sequence 9 is past the stream's last sequence 6",
        }
    ]
    assert snapshot(store) == before

    # missing state and metadata files
    (reader / "o.dat").unlink()
    (reader / "meta.dat").unlink()
    check = run_many(None, ["store", "check", str(store)])[0]
    assert check.code == 1, check
    assert "EVENTS: consumer READER: obs/READER/meta.dat: missing" in check.out
    assert "EVENTS: consumer READER: obs/READER/o.dat: missing" in check.out
