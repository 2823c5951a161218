"""``http_base_path``, compared with the newest nats-server (2.15.1): the monitoring endpoints
move under it (``/nats/varz``), the index page is the base itself (``/nats``, not ``/nats/``),
everything else answers 404, and ``/varz`` reports the base as configured."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import JETPY_SERVER, free_port, newest_cmd, start_process

pytestmark = pytest.mark.differential

PATHS = (
    "/",
    "/varz",
    "/nats",
    "/nats/",
    "/nats/varz",
    "/nats/varz/",
    "/nats/healthz",
    "/natsvarz",
    "/nats/x",
)


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _answers(tmp: Path, name: str, cmd: list[str], base: str) -> dict[str, tuple[int, object]]:
    """Each path's status; for /varz its ``http_base_path``, for the index whether it links /varz."""
    http = free_port()
    conf = tmp / f"{name}.conf"
    conf.write_text(f'http: "127.0.0.1:{http}"\nhttp_base_path: "{base}"\n')
    proc = start_process([*cmd, "-c", str(conf)], tmp / f"{name}.log")
    try:
        out: dict[str, tuple[int, object]] = {}
        for path in PATHS:
            status, body = _get(http, path)
            detail: object = None
            if status == 200 and path.endswith("varz"):
                detail = json.loads(body)["http_base_path"]
            elif status == 200 and path == "/nats":
                detail = b"/nats/varz" in body
            out[path] = (status, detail)
        return out
    finally:
        proc.stop(signal.SIGKILL)


@pytest.mark.parametrize("base", ["/nats", "nats/"])
def test_endpoints_move_under_the_base_path_as_in_nats_server(tmp_path: Path, base: str) -> None:
    theirs = _answers(tmp_path, "newest", newest_cmd(), base)
    assert theirs["/nats/varz"] == (200, base) and theirs["/varz"][0] == 404, theirs
    assert theirs["/nats"] == (200, True), theirs  # the index links the endpoints under the base
    assert _answers(tmp_path, "jetpy", [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1"], base) == theirs
