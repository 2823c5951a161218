"""A Go client on nats.go (the library the nats CLI is built on) backs up and restores on jetpy
and on nats-server 2.15.1 as jsm.go does (``tests/go/snapgo``): jetpy's snapshot and restore
protocol is nats-server's for nats.go too, not only for the Python client.

Built from Debian's packages in GOPATH mode, as ``/work/shared/bench``'s natsbench is; without
``go`` or Debian's nats.go the test skips and says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest
from test_backup_restore import STREAM, api, fill, view

from conftest import REPO, Proc

GOPATH = "/usr/share/gocode"


@pytest.fixture(scope="module")
def snapgo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("go") is None or not Path(GOPATH, "src/github.com/nats-io/nats.go").is_dir():
        pytest.skip(
            "needs go and Debian's nats.go (apt-get install golang-go golang-github-nats-io-go-nats-dev)"
        )
    out = tmp_path_factory.mktemp("go") / "snapgo"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "GOFLAGS": "", "GOPROXY": "off"}
    env["GOCACHE"] = str(out.parent / "cache")
    subprocess.run(
        ["go", "build", "-o", str(out), "./tests/go/snapgo"], cwd=REPO, env=env, check=True, timeout=300
    )
    return out


def go(binary: Path, *args: str) -> dict[str, Any]:
    p = subprocess.run([str(binary), *args], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    out: dict[str, Any] = json.loads(p.stdout)
    return out


@pytest.fixture(params=["jetpy", "nats-server"])
def any_server(request: pytest.FixtureRequest) -> Proc:
    proc: Proc = request.getfixturevalue("jetpy_proc" if request.param == "jetpy" else "newest_proc")
    return proc


async def test_the_go_client_backs_up_and_restores(any_server: Proc, snapgo: Path, tmp_path: Path) -> None:
    nc = await nats.connect(any_server.url)
    try:
        await fill(nc)
        before = await view(nc)
        sent = go(snapgo, "backup", any_server.url, STREAM, str(tmp_path / "bk"))
        assert sent["bytes"] == (tmp_path / "bk" / "stream.tar.s2").stat().st_size
        await api(nc, f"STREAM.DELETE.{STREAM}")
        restored = go(snapgo, "restore", any_server.url, str(tmp_path / "bk"))
        assert restored["state"]["messages"] == 285
        after = await view(nc)
        del after["state"]["last_ts"], before["state"]["last_ts"]  # nats-server drops it (see README)
        assert after == before
    finally:
        await nc.close()
