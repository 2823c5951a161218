"""Compression and encryption at rest where they show on the wire, compared with the newest
nats-server (2.15.1): ``compression`` in the configs that create, update and info answer, for
file and memory streams, the update rules (s2 <-> none both ways), the errors for values that
are not algorithms, and the startup log line of an encrypted server. What the bytes on disk are
is each server's own (tests/integration/test_js_at_rest.py holds jetpy to its format)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, newest_cmd, start_process

pytestmark = pytest.mark.differential


async def api(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(f"$JS.API.{subject}", data, timeout=3)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


def shown(doc: dict[str, Any]) -> Any:
    """What a create/update/info answer says of compression (or its error)."""
    if "error" in doc:
        return doc["error"]
    return doc["config"]["compression"], doc["state"]["messages"]


async def compression_run(url: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list[Any] = []
    for name, storage in (("F", "file"), ("M", "memory")):
        cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "storage": storage, "compression": "s2"}
        out.append(shown(await api(nc, f"STREAM.CREATE.{name}", cfg)))
        for i in range(20):
            await js.publish(f"{name.lower()}.x", b"compressible " * 20 + b"%d" % i)
        out.append(shown(await api(nc, f"STREAM.INFO.{name}")))
        for value in ("none", "s2", "none"):
            out.append(shown(await api(nc, f"STREAM.UPDATE.{name}", {**cfg, "compression": value})))
        out.append((await api(nc, f"STREAM.MSG.GET.{name}", {"seq": 20}))["message"]["seq"])
    for bad in ("s3", "S2", "", "gzip"):  # (a number is 10025 "invalid JSON", as any wrong type)
        cfg = {"name": "B", "subjects": ["b.>"], "compression": bad}
        out.append(shown(await api(nc, "STREAM.CREATE.B", cfg)))
    cfg = {"name": "F", "subjects": ["f.>"], "compression": "zstd"}
    out.append(shown(await api(nc, "STREAM.UPDATE.F", cfg)))
    await nc.close()
    return out


async def test_compression_on_the_wire_is_nats_servers(tmp_path: Path) -> None:
    ours_p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp_path / "jp")],
        tmp_path / "jp.log",
    )
    ref_p = start_process(newest_cmd("-js", "-sd", str(tmp_path / "ref")), tmp_path / "ref.log")
    try:
        ours, ref = await asyncio.gather(compression_run(ours_p.url), compression_run(ref_p.url))
    finally:
        ours_p.stop()
        ref_p.stop()
    assert ours == ref
    assert ref[0] == ("s2", 0) and ref[1] == ("s2", 20)


@pytest.mark.parametrize(
    ("cipher", "named"), [("", "ChaCha20-Poly1305"), ("chacha", "ChaCha20-Poly1305"), ("aes", "AES-GCM")]
)
async def test_an_encrypted_server_says_so_as_nats_server_does(
    tmp_path: Path, cipher: str, named: str
) -> None:
    conf = tmp_path / "js.conf"
    conf.write_text(
        'jetstream { key: "0123456789abcdef0123456789abcdef"'
        + (f", cipher: {cipher}" if cipher else "")
        + " }\n"
    )
    ours_p = start_process(
        [*JETPY_SERVER, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp_path / "jp")],
        tmp_path / "jp.log",
    )
    ref_p = start_process(
        newest_cmd("-c", str(conf), "-js", "-sd", str(tmp_path / "ref")), tmp_path / "ref.log"
    )
    try:
        for p in (ours_p, ref_p):
            assert f"Encryption:      {named}" in p.log(), p.log()
            nc = await nats.connect(p.url)
            cfg = {"name": "E", "subjects": ["e.>"]}
            assert "error" not in await api(nc, "STREAM.CREATE.E", cfg)
            await nc.close()
    finally:
        ours_p.stop()
        ref_p.stop()
