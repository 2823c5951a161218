"""Logging as nats-server does it (``-l``, ``logtime``, ``-D``/``-V``/``-DV``), the JSON format
for log shippers, and log lines bounded whatever a client sends.

The server runs as its own process (its real command line) with real nats-py clients.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
from pathlib import Path

import nats
import pytest

from conftest import JETPY_SERVER, start_process
from jetpy.server.logs import MAX_MESSAGE, JsonFormatter, TextFormatter, bounded

TEXT_LINE = re.compile(r"^\[\d+\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[(FTL|ERR|WRN|INF|DBG|TRC)\] ")
FORGED = "\n[1] 2030/01/01 00:00:00.000000 [ERR] forged line"


async def chatter(url: str) -> None:
    """A client whose name tries to forge a line, publishing a megabyte and receiving it back."""
    nc = await nats.connect(url, name="evil" + FORGED)
    try:
        sub = await nc.subscribe("big.subject")
        await nc.publish("big.subject", b"x" * (1024 * 1024 - 64))
        await sub.next_msg(timeout=5)
    finally:
        await nc.close()


async def test_debug_and_trace_to_a_log_file_in_nats_servers_format(tmp_path: Path) -> None:
    log_file = tmp_path / "server.log"
    p = start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-DV", "-l", str(log_file)], log_file)
    try:
        await chatter(p.url)
    finally:
        p.stop(signal.SIGTERM)
    lines = log_file.read_text().splitlines()
    assert lines and all(TEXT_LINE.match(line) for line in lines), [
        ln for ln in lines if not TEXT_LINE.match(ln)
    ][:3]
    text = "\n".join(lines)
    assert "[INF] Server is ready" in text
    assert (
        "[DBG] 127.0.0.1:" in text
        and "Client connection created" in text
        and "Client connection closed" in text
    )
    assert re.search(r"\[TRC\] 127\.0\.0\.1:\d+ - cid:\d+ - (.* - )?<<- \[CONNECT \{", text)
    assert "<<- [PUB big.subject 1048512]" in text and '<<- MSG_PAYLOAD: ["xxxx' in text
    assert re.search(r"->> \[MSG big\.subject \d+ 1048512\]", text)
    # a megabyte in, a megabyte out, and a name with a line break: every line stays short and one line
    assert max(map(len, lines)) < MAX_MESSAGE + 200
    assert not any(line.startswith("[1] 2030/01/01") for line in lines)
    assert "forged line" in text  # shown, escaped, inside the trace line that carries it


async def test_trace_without_debug_and_no_timestamps(tmp_path: Path) -> None:
    log_file = tmp_path / "server.log"
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-V", "--logtime=false", "-l", str(log_file)], log_file
    )
    try:
        await chatter(p.url)
    finally:
        p.stop(signal.SIGTERM)
    text = log_file.read_text()
    assert "[TRC]" in text and "[DBG]" not in text
    assert re.match(r"^\[\d+\] \[INF\] ", text)


async def test_json_log_format_for_log_shippers(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    log_file = tmp_path / "server.log"
    conf.write_text(f'log_file: "{log_file}"\nlog_format: json\ndebug: true\n')
    p = start_process([*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-c", str(conf)], log_file)
    try:
        await chatter(p.url)
    finally:
        p.stop(signal.SIGTERM)
    docs = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert docs and all(set(d) >= {"time", "level", "pid", "logger", "msg"} for d in docs)
    assert {"info", "debug"} <= {d["level"] for d in docs}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", docs[0]["time"])
    assert any(d["msg"] == "Server is ready" for d in docs)


@pytest.mark.parametrize(
    "args", [["--log_format", "xml"], ["--log_format=yaml"]], ids=["flag-xml", "flag-yaml"]
)
def test_an_unknown_log_format_is_refused(args: list[str]) -> None:
    p = subprocess.run([*JETPY_SERVER, *args, "-p", "-1"], capture_output=True, timeout=30)
    assert p.returncode != 0 and b"log_format" in p.stderr


def test_bounded_lines_and_formatters() -> None:
    assert bounded("a\nb\rc") == "a\\nb\\rc"
    long = bounded("y" * (MAX_MESSAGE * 100))
    assert len(long) < MAX_MESSAGE + 40 and long.endswith(f"[{MAX_MESSAGE * 99} more characters]")
    record = logging.LogRecord("jetpy.server", logging.WARNING, __file__, 1, "hello %s", ("x" * 10**6,), None)
    line = TextFormatter(logtime=True).format(record)
    assert TEXT_LINE.match(line) and "[WRN] hello xxx" in line and len(line) < MAX_MESSAGE + 100
    doc = json.loads(JsonFormatter().format(record))
    assert doc["level"] == "warn" and len(doc["msg"]) < MAX_MESSAGE + 40
