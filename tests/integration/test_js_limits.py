"""The server's JetStream limits across a restart: what recovered streams use counts at once."""

from __future__ import annotations

import json
from pathlib import Path

import nats

import jetpy


async def test_recovered_usage_counts_against_a_lowered_limit(tmp_path: Path) -> None:
    store = str(tmp_path / "js")
    async with jetpy.Server(port=0, store_dir=store, max_file_store=1 << 20) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="D", subjects=["d"])
        for _ in range(150):
            await js.publish("d", b"x" * 1000)
        await nc.close()
    async with jetpy.Server(port=0, store_dir=store, max_file_store=100 * 1024) as srv:
        nc = await nats.connect(srv.client_url)
        ack = json.loads((await nc.request("d", b"y", timeout=3)).data)
        assert ack["error"]["err_code"] == 10023  # 150 KB stored already: over 100 KB
        await nc.close()
