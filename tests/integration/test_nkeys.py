"""nkey users: the nonce in INFO, nats-py connecting with ``nkeys_seed=``, and every way a
signature can be wrong (another key, a replayed signature of an earlier nonce, no signature,
a malformed key or signature), each refused with 'Authorization Violation' and a closed
connection, the server still serving. The raw exchanges are compared with nats-server 2.15.1."""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import nats
import nkeys
import pytest

from conftest import JETPY_SERVER, REFERENCE_NEWEST, Proc, start_process


def new_user() -> tuple[bytes, str]:
    """A fresh user seed and its public key."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    return seed, nkeys.from_seed(seed).public_key.decode()


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    # refused nats-py clients leave finalizers behind; collect them now rather than while
    # CPython 3.11.7 builds an AST later (it can trip over them there)
    yield
    gc.collect()


SEED, PUBLIC = new_user()
OTHER_SEED, OTHER_PUBLIC = new_user()


def config() -> str:
    return f"""
authorization {{
  users [
    {{nkey: {PUBLIC}, permissions: {{publish: "allowed.>", subscribe: ">"}}}}
    {{user: a, password: a}}
  ]
}}
"""


def _start(cmd: list[str], tmp: Path, name: str) -> Proc:
    conf = tmp / f"{name}.conf"
    conf.write_text(config())
    return start_process([*cmd, "-c", str(conf), "-a", "127.0.0.1", "-p", "-1"], tmp / f"{name}.log")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp = tmp_path_factory.mktemp("nkeys")
    procs = {"jetpy": _start(JETPY_SERVER, tmp, "jetpy")}
    if REFERENCE_NEWEST is not None:
        procs["2.15.1"] = _start([REFERENCE_NEWEST], tmp, "newest")
    try:
        yield procs
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


def sign(seed: bytes, nonce: str, url_safe: bool = True) -> str:
    raw = nkeys.from_seed(seed).sign(nonce.encode())
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode() if url_safe else base64.b64encode(raw).decode()


async def exchange(port: int, make_connect: object) -> tuple[dict[str, object], bytes]:
    """Read INFO, send what ``make_connect(nonce)`` builds, return (INFO, the answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    info = json.loads((await reader.readline())[5:])
    writer.write(make_connect(str(info.get("nonce", ""))))  # type: ignore[operator]
    out = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(4096), 0.5)
            if not chunk:
                out += b"<closed>"
                break
            out += chunk
    except TimeoutError:
        pass
    writer.close()
    return info, out


def connect_line(nkey: str, sig: str | None) -> bytes:
    fields: dict[str, object] = {"verbose": False, "nkey": nkey}
    if sig is not None:
        fields["sig"] = sig
    return f"CONNECT {json.dumps(fields)}\r\nPUB other 1\r\nx\r\nPING\r\n".encode()


REFUSED = b"-ERR 'Authorization Violation'\r\n<closed>"
CASES = {
    "signed": (
        lambda n: connect_line(PUBLIC, sign(SEED, n)),
        b"-ERR 'Permissions Violation for Publish to \"other\"'\r\nPONG\r\n",
    ),
    "standard_base64": (lambda n: connect_line(PUBLIC, sign(SEED, n, url_safe=False)), None),
    "other_key_signed": (lambda n: connect_line(PUBLIC, sign(OTHER_SEED, n)), REFUSED),
    "unknown_nkey": (lambda n: connect_line(OTHER_PUBLIC, sign(OTHER_SEED, n)), REFUSED),
    "no_signature": (lambda n: connect_line(PUBLIC, None), REFUSED),
    "garbage_signature": (lambda n: connect_line(PUBLIC, "!!notbase64!!"), REFUSED),
    "truncated_key": (lambda n: connect_line(PUBLIC[:-4], sign(SEED, n)), REFUSED),
    "empty_nonce_signed": (lambda n: connect_line(PUBLIC, sign(SEED, "")), REFUSED),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_nkey_connects_as_nats_server(servers: dict[str, Proc], case: str) -> None:
    make, expected = CASES[case]
    info, ours = await exchange(servers["jetpy"].port, make)
    nonce = info["nonce"]
    assert isinstance(nonce, str) and len(nonce) == 15 and list(info)[-1] == "nonce"
    if expected is not None:
        assert ours == expected
    if "2.15.1" in servers:
        _, theirs = await exchange(servers["2.15.1"].port, make)
        assert ours == theirs


async def test_replayed_signature_is_refused(servers: dict[str, Proc]) -> None:
    port = servers["jetpy"].port
    first_nonce: list[str] = []

    def record(n: str) -> bytes:
        first_nonce.append(n)
        return connect_line(PUBLIC, sign(SEED, n))

    await exchange(port, record)
    _, replay = await exchange(port, lambda n: connect_line(PUBLIC, sign(SEED, first_nonce[0])))
    assert replay == REFUSED
    assert 'authentication error - Nkey "' + PUBLIC + '"' in servers["jetpy"].log()


async def test_nats_py_with_a_seed_file(servers: dict[str, Proc], tmp_path: Path) -> None:
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(SEED)
    nc = await nats.connect(servers["jetpy"].url, nkeys_seed=str(seed_file), allow_reconnect=False)
    sub = await nc.subscribe("allowed.x")
    await nc.publish("allowed.x", b"signed in")
    assert (await sub.next_msg(timeout=2)).data == b"signed in"
    await nc.close()
    other = tmp_path / "other.nk"
    other.write_bytes(OTHER_SEED)
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            servers["jetpy"].url, nkeys_seed=str(other), allow_reconnect=False, max_reconnect_attempts=0
        )
    # a password user of the same server still connects, and sees no nonce problem
    nc = await nats.connect(servers["jetpy"].url, user="a", password="a", allow_reconnect=False)
    await nc.flush(timeout=2)
    await nc.close()


async def test_log_names_the_nkey_user(servers: dict[str, Proc]) -> None:
    await exchange(servers["jetpy"].port, lambda n: connect_line(PUBLIC, sign(SEED, n)))
    await asyncio.sleep(0.1)
    assert f'"$G/nkey:{PUBLIC}" - Publish Violation - Subject "other"' in servers["jetpy"].log()
