"""Fast-producer stalls: a publisher faster than a subscriber that does keep reading is paced
(as nats-server stalls it), instead of the subscriber being cut off as a slow consumer."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import jetpy

PAYLOAD = 8 * 1024
COUNT = 4000  # 32 MB, eight times max_pending
MAX_PENDING = 4 * 1024 * 1024


def _slow_reader(port: int, got: list[int], ready: threading.Event, done: threading.Event) -> None:
    """A subscriber that reads 64 KB at a time with a pause: about 60 MB/s, slower than the
    server can copy 8 KB messages, fast enough to keep up with a paced publisher."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nPING\r\n')
        buf = b""
        while b"PONG\r\n" not in buf:
            buf += s.recv(4096)
        ready.set()
        total = 0
        want = COUNT * (PAYLOAD + len(b"MSG flood 1 8192\r\n\r\n"))
        s.settimeout(10)
        while total < want:
            chunk = s.recv(64 * 1024)
            if not chunk:
                break
            total += len(chunk)
            time.sleep(0.001)
        got.append(total)
    done.set()


async def test_a_fast_publisher_is_paced_not_its_subscriber_cut_off() -> None:
    async with jetpy.Server(port=0, max_pending=MAX_PENDING) as srv:
        got: list[int] = []
        ready, done = threading.Event(), threading.Event()
        reader = threading.Thread(target=_slow_reader, args=(srv.port, got, ready, done), daemon=True)
        reader.start()
        assert await asyncio.to_thread(ready.wait, 10)
        r, w = await asyncio.open_connection("127.0.0.1", srv.port)
        await r.readline()  # INFO
        frame = b"PUB flood %d\r\n%b\r\n" % (PAYLOAD, b"x" * PAYLOAD)
        w.write(b'CONNECT {"verbose":false}\r\n' + frame * COUNT + b"PING\r\n")
        await w.drain()
        assert await asyncio.wait_for(r.readline(), 30) == b"PONG\r\n"
        await asyncio.to_thread(done.wait, 30)
        w.close()
        assert got and got[0] >= COUNT * (PAYLOAD + len(b"MSG flood 1 8192\r\n\r\n"))
        assert srv.slow_consumers == 0
