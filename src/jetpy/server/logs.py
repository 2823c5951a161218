"""Logs: where the server's log lines go and how they look.

Owns the logging set-up of ``jetpy-server`` (``-l``/``log_file``, ``logtime``, ``-D``/``-V``/
``-DV``, ``log_format``) and the two line formats:

- ``text``, nats-server's: ``[pid] 2006/01/02 15:04:05.000000 [INF] message`` (the time only
  with ``logtime``), levels ``FTL ERR WRN INF DBG TRC``;
- ``json``, one object per line for log shippers: ``{"time": RFC 3339 UTC, "level": "info",
  "pid": …, "logger": "jetpy.server", "msg": …}`` (plus ``"error"`` with a traceback).

Every line is bounded: a message longer than ``MAX_MESSAGE`` characters is cut (and says by how
much), and line breaks inside a message are escaped, so no client-supplied string (a subject, a
client name, a payload in a trace) can make a multi-megabyte log line or forge a second line.
``-D`` shows debug lines, ``-V`` the protocol trace (``TRACE``) without debug, ``-DV`` both, as
nats-server. Knows nothing of what is logged.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Final, TextIO

from jetpy.server.options import LOG_FORMATS, ServerOptions
from jetpy.server.trace import TRACE as TRACE_LEVEL

__all__ = ["LOG_FORMATS", "MAX_MESSAGE", "TRACE", "JsonFormatter", "TextFormatter", "setup_logging"]

TRACE: Final = TRACE_LEVEL  # below DEBUG: the protocol trace of -V
MAX_MESSAGE: Final = 4096
"""Characters of one log message kept: a long subject, client name or traced payload fits; a
client sending megabytes cannot turn into megabytes of log."""
ROOT_LOGGER: Final = "jetpy"
_LEVEL_TAGS: Final = {
    logging.CRITICAL: "FTL",
    logging.ERROR: "ERR",
    logging.WARNING: "WRN",
    logging.INFO: "INF",
    logging.DEBUG: "DBG",
    TRACE: "TRC",
}
_LEVEL_NAMES: Final = {TRACE: "trace", logging.CRITICAL: "fatal", logging.WARNING: "warn"}
logging.addLevelName(TRACE, "TRACE")


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line (CR and LF escaped) and at most about ``limit`` characters."""
    cut = len(text) - limit
    if cut > 0:
        text = f"{text[:limit]}... [{cut} more characters]"
    if "\n" in text or "\r" in text:
        text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a bad format string in a log call must not lose the line
        return f"{record.msg!r} {record.args!r}"


class TextFormatter(logging.Formatter):
    """nats-server's line: ``[pid] [date time.micro] [TAG] message``."""

    def __init__(self, logtime: bool) -> None:
        super().__init__()
        self.logtime = logtime
        self.pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        tag = _LEVEL_TAGS.get(record.levelno) or record.levelname[:3]
        msg = _message(record)
        if record.exc_info:
            msg = f"{msg}: {self.formatException(record.exc_info)}"
        stamp = ""
        if self.logtime:
            secs = int(record.created)
            micros = int((record.created - secs) * 1_000_000)
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(secs)) + f".{micros:06d} "
        return f"[{self.pid}] {stamp}[{tag}] {bounded(msg)}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line (``--log_format json``)."""

    def __init__(self) -> None:
        super().__init__()
        self.pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        secs = int(record.created)
        micros = int((record.created - secs) * 1_000_000)
        doc = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{micros:06d}Z",
            "level": _LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
            "pid": self.pid,
            "logger": record.name,
            "msg": bounded(_message(record)),
        }
        if record.exc_info:
            doc["error"] = bounded(self.formatException(record.exc_info), 4 * MAX_MESSAGE)
        return json.dumps(doc, ensure_ascii=False)


class _NoDebug(logging.Filter):
    """-V without -D: trace lines, but no debug lines (nats-server's levels are not nested)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno != logging.DEBUG


def setup_logging(opts: ServerOptions, stream: TextIO | None = None) -> logging.Handler:
    """Send the ``jetpy`` loggers to ``log_file`` (appended) or stderr, in ``log_format``."""
    handler: logging.Handler = (
        logging.FileHandler(opts.log_file, encoding="utf-8")
        if opts.log_file
        else logging.StreamHandler(stream or sys.stderr)
    )
    handler.setFormatter(JsonFormatter() if opts.log_format == "json" else TextFormatter(opts.logtime))
    if opts.trace and not opts.debug:
        handler.addFilter(_NoDebug())
    root = logging.getLogger(ROOT_LOGGER)
    root.handlers[:] = [handler]
    root.setLevel(TRACE if opts.trace else logging.DEBUG if opts.debug else logging.INFO)
    root.propagate = False
    return handler
