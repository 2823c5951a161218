"""Compression, encryption at rest and secure erase, end to end: jetpy-server processes on real
sockets, nats-py as the client, the store's files read back from disk.

Encryption is configured as nats-server's is: ``jetstream { key: $JS_KEY, cipher: aes }`` with the
key from the environment, started with ``-js -sd`` (the flags and the file merge)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from nats.js.api import StreamConfig

from conftest import JETPY_SERVER, Proc, start_process

KEY = "the-server-key-0123456789abcdef"
STREAM = "SECRETSTREAM"


def jetpy(tmp: Path, log: str, key: str | None = None, prev: str | None = None, cipher: str = "aes") -> Proc:
    conf = tmp / f"{log}.conf"
    block = ""
    if key is not None:
        block = f"key: $JS_KEY, cipher: {cipher}" + (", prev_encryption_key: $JS_PREV" if prev else "")
    conf.write_text(f"jetstream {{ {block} }}\n")
    env_before = dict(os.environ)
    os.environ.update({"JS_KEY": key or "", "JS_PREV": prev or ""})
    try:
        return start_process(
            [*JETPY_SERVER, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp / "sd")],
            tmp / f"{log}.log",
        )
    finally:
        os.environ.clear()
        os.environ.update(env_before)


async def api(nc: Client, subject: str, body: Any = b"") -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads((await nc.request("$JS.API." + subject, raw, timeout=5)).data)


def sdir(tmp: Path) -> Path:
    return tmp / "sd" / "jetstream" / "$G" / "streams" / STREAM


def files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "LOCK"}


def grep(root: Path, needle: bytes) -> list[str]:
    return [p.name for p, b in files(root).items() if needle in b]


async def fill(p: Proc, n: int = 300, **cfg: Any) -> None:
    nc = await nats.connect(p.url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=STREAM, subjects=["secret.topic.>"], **cfg))
    for i in range(n):
        await js.publish(
            f"secret.topic.{i % 3}", b"PAYLOADMARKER-%05d " % i * 4, headers={"X-Card": "HDRMARKER"}
        )
    sub = await js.pull_subscribe("secret.topic.>", durable="READER")
    for m in await sub.fetch(40):
        await m.ack()
    await nc.close()


async def test_an_encrypted_store_shows_no_plaintext_and_survives_restarts(tmp_path: Path) -> None:
    p = jetpy(tmp_path, "a", KEY)
    try:
        assert "Encryption:      AES-GCM" in p.log()
        await fill(p)
    finally:
        p.stop()
    for needle in (b"PAYLOADMARKER", b"HDRMARKER", b"secret.topic", STREAM.encode(), b"READER"):
        assert grep(tmp_path / "sd", needle) == [], needle
    p = jetpy(tmp_path, "b", KEY)
    try:
        assert f"Restored 300 messages for stream '{STREAM}'" in p.log()
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        msg = await js.get_msg(STREAM, 7)
        assert msg.data == b"PAYLOADMARKER-00006 " * 4 and msg.headers == {"X-Card": "HDRMARKER"}
        info = await js.consumer_info(STREAM, "READER")
        assert info.ack_floor.stream_seq == 40 and info.num_pending == 260
        await nc.close()
    finally:
        p.stop(signal.SIGKILL)  # and after a kill -9 too
    p = jetpy(tmp_path, "c", KEY)
    try:
        assert f"Restored 300 messages for stream '{STREAM}'" in p.log()
    finally:
        p.stop()


async def test_the_wrong_key_keeps_the_stream_offline_says_why_and_destroys_nothing(tmp_path: Path) -> None:
    p = jetpy(tmp_path, "a", KEY)
    try:
        await fill(p)
    finally:
        p.stop()
    before = files(sdir(tmp_path))
    for log, key in (("wrong", "not-the-key"), ("none", None)):
        p = jetpy(tmp_path, log, key)
        try:
            text = p.log()
            assert f"stream '{STREAM}' is offline: encryption key mismatch" in text, text
            nc = await nats.connect(p.url)
            err = (await api(nc, f"STREAM.INFO.{STREAM}"))["error"]
            assert err["err_code"] == 10194 and "encryption key" in err["description"]
            await nc.close()
        finally:
            p.stop()
        assert files(sdir(tmp_path)) == before, "nothing changed"
    p = jetpy(tmp_path, "right", KEY)
    try:
        nc = await nats.connect(p.url)
        assert (await nc.jetstream().stream_info(STREAM)).state.messages == 300
        await nc.close()
    finally:
        p.stop()


async def test_prev_encryption_key_rotates_the_key(tmp_path: Path) -> None:
    new = "the-new-key-0123456789abcdef"
    p = jetpy(tmp_path, "a", KEY, cipher="chachapoly")
    try:
        await fill(p)
    finally:
        p.stop()
    p = jetpy(tmp_path, "rotate", new, prev=KEY)
    try:
        assert f"Restored 300 messages for stream '{STREAM}'" in p.log()
    finally:
        p.stop()
    p = jetpy(tmp_path, "new", new)  # everything was re-encrypted: the new key alone opens it
    try:
        assert f"Restored 300 messages for stream '{STREAM}'" in p.log()
        nc = await nats.connect(p.url)
        assert (await nc.jetstream().consumer_info(STREAM, "READER")).ack_floor.stream_seq == 40
        await nc.close()
    finally:
        p.stop()
    p = jetpy(tmp_path, "old", KEY)
    try:
        assert f"stream '{STREAM}' is offline: encryption key mismatch" in p.log()
    finally:
        p.stop()


async def test_a_plaintext_store_is_encrypted_once_a_key_is_set(tmp_path: Path) -> None:
    p = jetpy(tmp_path, "a")
    try:
        await fill(p)
    finally:
        p.stop()
    assert grep(tmp_path / "sd", b"PAYLOADMARKER")
    p = jetpy(tmp_path, "b", KEY)
    try:
        assert f"Restored 300 messages for stream '{STREAM}'" in p.log()
    finally:
        p.stop()
    assert grep(tmp_path / "sd", b"PAYLOADMARKER") == []


async def test_a_flipped_bit_in_an_encrypted_block_is_reported_and_the_rest_served(tmp_path: Path) -> None:
    p = jetpy(tmp_path, "a", KEY)
    try:
        await fill(p, 2000, max_bytes=1 << 20)  # 256 KB blocks
    finally:
        p.stop()
    blocks = sorted((sdir(tmp_path) / "msgs").glob("*.blk"))
    raw = bytearray(blocks[0].read_bytes())
    raw[384 + 28 + 500] ^= 0x01  # inside the first data frame's sealed body
    blocks[0].write_bytes(bytes(raw))
    p = jetpy(tmp_path, "b", KEY)
    try:
        assert "failed authentication" in p.log()
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        info = await api(nc, f"STREAM.INFO.{STREAM}")
        lost = info["state"]["lost"]["msgs"]
        assert lost and len(lost) < 300  # one frame's messages (a frame per commit here)
        assert info["state"]["messages"] == 2000 - len(lost)
        for seq in (min(lost) - 1, max(lost) + 1):
            if seq >= 1:
                assert (await js.get_msg(STREAM, seq)).seq == seq
        assert (await js.get_msg(STREAM, 2000)).data == b"PAYLOADMARKER-01999 " * 4
        await nc.close()
    finally:
        p.stop()


async def test_compression_is_on_disk_and_read_back_after_a_restart(tmp_path: Path) -> None:
    event = b'{"event": "click", "user": "u%04d", "page": "/home", "agent": "Mozilla/5.0"} ' * 8
    p = jetpy(tmp_path, "a")
    try:
        nc = await nats.connect(p.url)
        cfg = {"name": STREAM, "subjects": ["secret.topic.>"], "compression": "s2", "max_bytes": 120_000}
        assert (await api(nc, f"STREAM.CREATE.{STREAM}", cfg))["config"]["compression"] == "s2"
        js = nc.jetstream()
        for i in range(150):  # 32 KB blocks (max_bytes, as nats-server sizes them)
            await js.publish("secret.topic.a", event % ((i % 50,) * 8))
        msgs = sdir(tmp_path) / "msgs"
        deadline = time.monotonic() + 10
        while not (sealed := sorted(msgs.glob("*.blk"))[:-1]) or any(
            b.read_bytes()[:4] != b"JPBF" for b in sealed
        ):
            assert time.monotonic() < deadline, "sealed blocks not compressed"
            await js.publish("secret.topic.b", b"x")  # a commit puts finished copies in place
            await asyncio.sleep(0.05)
        total = (await js.stream_info(STREAM)).state.messages
        await nc.close()
    finally:
        p.stop()
    assert sum(b.stat().st_size for b in sealed) * 4 < len(sealed) * 32_000
    p = jetpy(tmp_path, "b")
    try:
        nc = await nats.connect(p.url)
        js = nc.jetstream()
        assert (await js.stream_info(STREAM)).state.messages == total
        assert (await js.get_msg(STREAM, 1)).data == event % ((0,) * 8)
        # off again: what is compressed stays readable
        cfg = (await api(nc, f"STREAM.INFO.{STREAM}"))["config"]
        updated = await api(nc, f"STREAM.UPDATE.{STREAM}", {**cfg, "compression": "none"})
        assert updated["config"]["compression"] == "none"
        assert (await js.get_msg(STREAM, 2)).data == event % ((1,) * 8)
        await nc.close()
    finally:
        p.stop()


async def test_erase_and_purge_overwrite_the_bytes_on_disk(tmp_path: Path) -> None:
    """The seeds' "cleanse specific messages (GDPR)": a deleted (erased) message and a purged
    subject leave no byte in any file, plain, compressed or encrypted."""
    for form, key, comp in (
        ("plain", None, "none"),
        ("s2", None, "s2"),
        ("enc", KEY, "none"),
        ("both", KEY, "s2"),
    ):
        tmp = tmp_path / form
        tmp.mkdir()
        p = jetpy(tmp, "a", key)
        try:
            nc = await nats.connect(p.url)
            await api(
                nc,
                f"STREAM.CREATE.{STREAM}",
                {"name": STREAM, "subjects": ["gdpr.>"], "compression": comp, "max_bytes": 1 << 20},
            )
            js = nc.jetstream()
            for i in range(2000):
                await js.publish(f"gdpr.user{i % 10}", b"PERSONAL-%04d " % i * 10)
            if form == "plain":  # the needles are there to be found before
                assert grep(tmp / "sd", b"PERSONAL-0005 ")
            assert (await api(nc, f"STREAM.MSG.DELETE.{STREAM}", {"seq": 6}))["success"]
            assert (await api(nc, f"STREAM.MSG.DELETE.{STREAM}", {"seq": 1999}))["success"]
            assert (await api(nc, f"STREAM.PURGE.{STREAM}", {"filter": "gdpr.user3"}))["purged"] == 200
            await nc.close()
        finally:
            p.stop()
        for gone in (5, 1998, 3, 13, 1003, 1993):
            assert grep(tmp / "sd", b"PERSONAL-%04d " % gone) == [], (form, gone)
        p = jetpy(tmp, "b", key)
        try:
            nc = await nats.connect(p.url)
            st = (await api(nc, f"STREAM.INFO.{STREAM}"))["state"]
            assert st["messages"] == 1798 and "lost" not in st
            await nc.close()
        finally:
            p.stop()
