"""Object Store buckets through nats-py, against jetpy and against the reference nats-server.

An object store (ADR-20) is the stream ``OBJ_<bucket>`` with chunk subjects
``$O.<bucket>.C.<nuid>`` and one meta subject per object ``$O.<bucket>.M.<base64url(name)>``
(rolled up with ``Nats-Rollup: sub``). nats-py writes chunks with acked publishes, reads the meta
with ``STREAM.MSG.GET last_by_subj``, and reads the chunks back through an ordered push consumer
(flow control, heartbeats) checking a SHA-256 digest. Every test runs against both servers
through the ``target`` fixture from test_kv.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import time
from pathlib import Path

import pytest
import test_kv
from nats.js.api import ObjectMeta, ObjectMetaOptions
from nats.js.errors import (
    BadRequestError,
    DigestMismatchError,
    LinkIsABucketError,
    NotFoundError,
    ObjectNotFoundError,
)
from nats.js.object_store import ObjectStore
from test_kv import Target, stop, update

target = test_kv.target  # the two-server fixture

pytestmark = pytest.mark.asyncio

CHUNK = 128 * 1024  # nats-py's default chunk size
BIG = 50 * 1024 * 1024  # an object of 400 chunks


def digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


async def read(obs: ObjectStore, name: str) -> bytes:
    """Get an object into a buffer (nats-py's default concatenation is quadratic in chunks)."""
    buf = io.BytesIO()
    await obs.get(name, writeinto=buf)
    return buf.getvalue()


async def test_large_object_round_trip_with_digest(target: Target, tmp_path: Path) -> None:
    """50 MB from a file and back into a file: 400 acked chunk publishes, then an ordered consumer."""
    js = await target.js()
    obs = await js.create_object_store("big", description="blobs")
    data = os.urandom(BIG)
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(data)
    start = time.monotonic()
    with src.open("rb") as f:
        info = await obs.put("video.bin", f)
    assert (info.name, info.bucket, info.size, info.chunks) == ("video.bin", "big", BIG, BIG // CHUNK)
    assert info.digest == digest(data)
    with dst.open("wb") as f:
        res = await obs.get("video.bin", writeinto=f)  # nats-py checks the digest while reading
    assert res.info.digest == info.digest
    assert dst.read_bytes() == data
    assert time.monotonic() - start < 60

    st = await obs.status()
    assert st.bucket == "big" and st.description == "blobs" and not st.sealed
    assert st.stream_info.state.messages == BIG // CHUNK + 1  # chunks + one meta message
    assert st.size > BIG
    cfg = st.stream_info.config
    assert cfg.allow_rollup_hdrs and cfg.allow_direct and cfg.subjects == ["$O.big.C.>", "$O.big.M.>"]


async def test_sizes_around_the_chunk_boundary(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("sizes")
    for size in (0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK):
        data = os.urandom(size)
        info = await obs.put(f"o{size}", data)
        assert info.size == size and info.chunks == -(-size // CHUNK)
        if size:
            assert await read(obs, f"o{size}") == data
        else:
            res = await obs.get("o0")
            assert res.data == b"" and res.info.size == 0
    small = await js.create_object_store("chunky")
    data = os.urandom(10_000)
    meta = ObjectMeta(name="c", options=ObjectMetaOptions(max_chunk_size=1000))
    info = await small.put("c", data, meta=meta)
    assert info.chunks == 10 and await read(small, "c") == data


async def test_info_list_and_delete(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("files")
    a = os.urandom(3 * CHUNK + 5)
    await obs.put(
        "a.txt", a, meta=ObjectMeta(name="a.txt", description="first", headers={"X-Kind": ["text"]})
    )
    await obs.put("dir/b.bin", b"bee")
    info = await obs.get_info("a.txt")
    assert (info.name, info.size, info.chunks, info.digest) == ("a.txt", len(a), 4, digest(a))
    assert info.description == "first" and info.headers == {"X-Kind": ["text"]}
    assert not info.deleted and info.nuid
    with pytest.raises(ObjectNotFoundError):
        await obs.get_info("nope")
    listed = await obs.list()
    assert sorted((i.name, i.size) for i in listed) == [("a.txt", len(a)), ("dir/b.bin", 3)]

    # the meta is an ordinary message on the object's base64url subject
    raw = await js.get_last_msg("OBJ_files", meta_subject("files", "a.txt"))
    assert raw.data is not None and json.loads(raw.data)["nuid"] == info.nuid

    await obs.delete("a.txt")
    with pytest.raises(ObjectNotFoundError):
        await obs.get_info("a.txt")
    with pytest.raises(ObjectNotFoundError):
        await obs.get("a.txt")
    gone = await obs.get_info("a.txt", show_deleted=True)
    assert gone.deleted and gone.size == 0 and gone.chunks == 0
    # the chunks were purged: two metas and b's single chunk remain
    assert (await obs.status()).stream_info.state.messages == 3
    assert [i.name for i in await obs.list(ignore_deletes=True)] == ["dir/b.bin"]
    assert sorted((i.name, bool(i.deleted)) for i in await obs.list()) == [
        ("a.txt", True),
        ("dir/b.bin", False),
    ]

    await obs.delete("dir/b.bin")
    with pytest.raises(NotFoundError):
        await obs.list(ignore_deletes=True)
    assert await js.delete_object_store("files")
    with pytest.raises(NotFoundError):
        await js.object_store("files")


async def test_overwrite_replaces_the_chunks(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("ow")
    first = await obs.put("x", os.urandom(2 * CHUNK))
    second_data = os.urandom(CHUNK + 10)
    second = await obs.put("x", second_data)
    assert second.nuid != first.nuid
    assert await read(obs, "x") == second_data
    assert (await obs.get_info("x")).digest == digest(second_data)
    # the first version's chunks are gone; one meta (rolled up) and two chunks are left
    assert (await obs.status()).stream_info.state.messages == 3
    purged = await js.stream_info("OBJ_ow", subjects_filter=f"$O.ow.C.{first.nuid}")
    assert not purged.state.subjects


async def test_digest_mismatch_is_detected(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("dg")
    info = await obs.put("f", os.urandom(2 * CHUNK))
    # rewrite the meta with another digest, as a corrupted store would present it
    bad = info.as_dict()
    bad["digest"] = digest(b"something else")
    await js.publish(meta_subject("dg", "f"), json.dumps(bad).encode(), headers={"Nats-Rollup": "sub"})
    with pytest.raises(DigestMismatchError):
        await read(obs, "f")


async def test_links_to_objects_and_buckets(target: Target) -> None:
    """nats-py follows links on get; links are meta messages with ``options.link`` (ADR-20)."""
    js = await target.js()
    src = await js.create_object_store("src")
    dst = await js.create_object_store("dst")
    data = os.urandom(CHUNK + 1)
    await src.put("real", data)
    for name, link in (("to-real", {"bucket": "src", "name": "real"}), ("to-bucket", {"bucket": "src"})):
        meta = {"name": name, "bucket": "dst", "nuid": f"link{len(name)}", "size": 0, "chunks": 0,
                "mtime": "2024-01-01T00:00:00Z", "options": {"link": link}}  # fmt: skip
        await js.publish(meta_subject("dst", name), json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})
    info = await dst.get_info("to-real")
    assert info.is_link() and info.options is not None and info.options.link is not None
    assert info.options.link.name == "real"
    assert (await dst.get("to-real")).data == data
    with pytest.raises(LinkIsABucketError):
        await dst.get("to-bucket")


async def test_watch_reports_puts_and_deletes(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("wt")
    await obs.put("a", b"1")
    await obs.put("b", b"22")
    await obs.put("a", b"333")
    w = await obs.watch()
    first = []
    while (e := await update(w, 5)) is not None:
        first.append(e)
    assert [(i.name, i.size) for i in first] == [("b", 2), ("a", 3)]  # the latest meta per object
    await obs.put("c", b"4444")
    u = await update(w, 5)
    assert u is not None and (u.name, u.size, u.deleted) == ("c", 4, False)
    await obs.delete("b")
    u = await update(w, 5)
    assert u is not None and (u.name, u.deleted) == ("b", True)
    await stop(w)

    # updates_only skips the current state; include_history replays every meta
    w2 = await obs.watch(updates_only=True)
    await obs.put("d", b"5")
    u = await update(w2, 5)
    assert u is not None and u.name == "d"
    await stop(w2)
    w3 = await obs.watch(include_history=True)
    hist = []
    while (e := await update(w3, 5)) is not None:
        hist.append(e.name)
    assert hist == ["a", "c", "b", "d"]  # a's first meta was rolled up by its second put
    await stop(w3)


async def test_update_meta(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("um")
    data = os.urandom(CHUNK + 3)
    await obs.put("obj", data)
    await obs.update_meta("obj", ObjectMeta(name="obj", description="described", headers={"K": ["v"]}))
    info = await obs.get_info("obj")
    assert (info.description, info.headers, info.size) == ("described", {"K": ["v"]}, len(data))
    assert await read(obs, "obj") == data
    # one meta message per object: the update rolled up the first
    assert (await obs.status()).stream_info.state.messages == 3


async def test_sealed_bucket_refuses_writes(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("sl")
    await obs.put("keep", b"k")
    await obs.seal()  # type: ignore[no-untyped-call]
    st = await obs.status()
    assert st.sealed
    with pytest.raises(BadRequestError) as err:
        await obs.put("more", b"m")
    assert (err.value.err_code, err.value.description) == (10109, "invalid operation on sealed stream")
    assert await read(obs, "keep") == b"k"


async def test_bucket_ttl(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("tl", ttl=1.0)
    assert (await obs.status()).ttl == 1.0
    await obs.put("o", os.urandom(2 * CHUNK))
    deadline = time.monotonic() + 6
    while True:
        try:
            await obs.get_info("o")
        except ObjectNotFoundError:
            break
        assert time.monotonic() < deadline, "object did not expire"
        await asyncio.sleep(0.1)
    assert (await obs.status()).stream_info.state.messages == 0


async def test_objects_survive_restart(target: Target) -> None:
    js = await target.js()
    obs = await js.create_object_store("rs")
    data = os.urandom(5 * CHUNK + 7)
    await obs.put("o", data)
    await obs.put("gone", b"g")
    await obs.delete("gone")
    await target.restart()
    js = await target.js()  # a fresh client: no reliance on reconnect timing
    obs = await js.object_store("rs")
    assert await read(obs, "o") == data
    assert [i.name for i in await obs.list(ignore_deletes=True)] == ["o"]
    w = await obs.watch()
    seen = []
    while (e := await update(w, 5)) is not None:
        seen.append((e.name, bool(e.deleted)))
    assert seen == [("o", False), ("gone", True)]
    await obs.put("after", b"a")
    u = await update(w, 5)
    assert u is not None and u.name == "after"
    await stop(w)
