"""``jetpy store check``'s consumer half (``store.scan.read_consumers``): every fault of a
consumer's files is reported with the file, the byte offset where it shows and the reason, by
the same rules the recovering server applies (``consumer_state.check_framed``,
``state_problems``, ``past_last_seq``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from jetpy.store import ConsumerState, FileStore, StoreConfig
from jetpy.store.consumer_state import CONSUMER_MAGIC, write_framed_atomic
from jetpy.store.scan import FileFault, check_stream


def build(path: Path) -> Path:
    """A stopped stream of 20 messages with consumer C (state and metadata); returns C's dir."""
    s = FileStore(path, StoreConfig("s"))
    s.write_meta(b'{"config": {}}')
    for i in range(20):
        s.store_msg("a", b"", b"%d" % i)
    cs = s.consumer_store("C")
    cs.update(ConsumerState(10, 10, 8, 8, {9: (9, 1), 10: (10, 1)}))
    cs.write_meta(b'{"config": {}}')
    s.flush()
    s.sync()
    s.stop()
    return path / "obs" / "C"


def faults(path: Path) -> list[FileFault]:
    rep = check_stream("s", path)
    (c,) = rep.consumers
    assert rep.problems == c.problems  # nothing else is wrong with the stream
    return c.faults


def test_a_sound_consumer_has_no_faults(tmp_path: Path) -> None:
    build(tmp_path / "s")
    assert faults(tmp_path / "s") == []


@pytest.mark.parametrize("name", ["o.dat", "meta.dat"])
def test_a_missing_file(tmp_path: Path, name: str) -> None:
    (build(tmp_path / "s") / name).unlink()
    assert faults(tmp_path / "s") == [FileFault(f"obs/C/{name}", None, "missing")]


@pytest.mark.parametrize(
    ("damage", "offset", "reason"),
    [
        (lambda b: b[:10], 10, "truncated header (10 of 16 bytes)"),
        (lambda b: b[:-3], 8, "does not match file size"),
        (lambda b: b"XXXX" + b[4:], 0, "bad magic"),
        (lambda b: b[:4] + b"\x07" + b[5:], 4, "unknown version 7"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), 12, "checksum mismatch"),
    ],
)
def test_a_damaged_file_names_the_offset(
    tmp_path: Path, damage: Callable[[bytes], bytes], offset: int, reason: str
) -> None:
    for name in ("o.dat", "meta.dat"):
        cdir = build(tmp_path / name)
        (cdir / name).write_bytes(damage((cdir / name).read_bytes()))
        (f,) = faults(tmp_path / name)
        assert (f.file, f.offset) == (f"obs/C/{name}", offset) and reason in f.reason, f


def test_a_state_past_the_streams_last_sequence(tmp_path: Path) -> None:
    cdir = build(tmp_path / "s")
    past = ConsumerState(500, 500, 500, 500)
    write_framed_atomic(cdir / "o.dat", CONSUMER_MAGIC, msgspec.msgpack.encode(past))
    assert faults(tmp_path / "s") == [
        FileFault("obs/C/o.dat", 16, "delivered stream sequence 500 is past the stream's last sequence 20")
    ]


def test_an_impossible_state(tmp_path: Path) -> None:
    cdir = build(tmp_path / "s")
    bad = ConsumerState(5, 5, 3, 3, {2: (2, 1), 4: (4, 1)}, {7: 1})
    write_framed_atomic(cdir / "o.dat", CONSUMER_MAGIC, msgspec.msgpack.encode(bad))
    got = faults(tmp_path / "s")
    assert [(f.file, f.offset) for f in got] == [("obs/C/o.dat", 16)] * 2
    assert got[0].reason == "1 pending acks outside (3, 5], first 2"
    assert got[1].reason == "redelivery counts for messages that are not pending"
    assert str(got[0]) == "obs/C/o.dat at offset 16: 1 pending acks outside (3, 5], first 2"


def test_a_state_that_is_not_a_state(tmp_path: Path) -> None:
    cdir = build(tmp_path / "s")
    write_framed_atomic(cdir / "o.dat", CONSUMER_MAGIC, b"\xa3abc")
    assert faults(tmp_path / "s") == [FileFault("obs/C/o.dat", 16, "payload is not a consumer state")]
