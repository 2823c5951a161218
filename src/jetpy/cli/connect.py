"""Connecting to a server and talking to its JetStream API, with every failure mapped to an exit code.

Owns: turning the global options into a nats-py connection (one attempt per URL, no reconnects,
nats-py's own error logging silenced so that a failure is exactly one line), ``Session`` (the
connection plus a raw ``$JS.API`` request helper that keeps the server's full JSON, error codes
included), and ``run``, which every networked command goes through: it connects, runs the
command's coroutine and translates nats-py exceptions into ``CliError`` with the right exit code.
nats-py is imported only when a command actually connects.
Must not know: what any command does with the session.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from jetpy.cli.output import EXIT_API, EXIT_CONNECT, EXIT_INTERRUPTED, CliError, reader_gone

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

__all__ = ["API_PREFIX", "DEFAULT_SERVER", "ApiFailure", "ApiTimeout", "ConnectOptions", "Session", "run"]

DEFAULT_SERVER: Final = "nats://127.0.0.1:4222"
API_PREFIX: Final = "$JS.API."
CONNECT_TIMEOUT: Final = 3.0
"""Seconds one connection attempt may take (TCP connect plus INFO/CONNECT/PONG)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """How to reach the server (the CLI's global options)."""

    server: str = DEFAULT_SERVER
    user: str | None = None
    password: str | None = None
    creds: str | None = None
    timeout: float = 5.0

    def urls(self) -> list[str]:
        out = []
        for u in self.server.split(","):
            u = u.strip()
            if not u:
                continue
            out.append(u if "://" in u else f"nats://{u}")
        return out


class ApiFailure(CliError):
    """A JetStream API error response: the server's ``code``, ``err_code`` and ``description``."""

    def __init__(self, what: str, error: dict[str, Any]) -> None:
        self.code = int(error.get("code") or 0)
        self.description = str(error.get("description") or "unknown error")
        err_code = error.get("err_code")
        super().__init__(
            f"{what}: {self.description}" if what else self.description,
            EXIT_API,
            int(err_code) if isinstance(err_code, int) else None,
        )


class ApiTimeout(CliError):
    """No server answered a JetStream API request in time."""


class Session:
    """A connected client and the JetStream API over it."""

    def __init__(self, nc: Client, options: ConnectOptions) -> None:
        self.nc = nc
        self.options = options
        self._js: JetStreamContext | None = None

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            self._js = self.nc.jetstream(timeout=self.options.timeout)
        return self._js

    async def api(
        self, subject: str, body: dict[str, Any] | None = None, *, what: str = "", wait: float = 0.0
    ) -> dict[str, Any]:
        """``$JS.API.<subject>`` with a JSON body, answered within ``wait`` seconds (the
        options' timeout if 0); the decoded response, or ``ApiFailure``."""
        import nats.errors

        full = API_PREFIX + subject
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        wait = wait or self.options.timeout
        try:
            msg = await self.nc.request(full, payload, timeout=wait)
        except nats.errors.NoRespondersError as exc:
            raise CliError(
                f"{what + ': ' if what else ''}JetStream is not enabled on this server "
                f"(no responders for {full})"
            ) from exc
        except nats.errors.TimeoutError as exc:
            raise ApiTimeout(
                f"{what + ': ' if what else ''}timed out after {wait:g}s waiting for the "
                f"JetStream API ({full})"
            ) from exc
        try:
            resp = json.loads(msg.data)
        except ValueError as exc:
            raise CliError(f"invalid JSON from the server on {full}") from exc
        if not isinstance(resp, dict):
            raise CliError(f"unexpected response from the server on {full}")
        err = resp.get("error")
        if isinstance(err, dict):
            raise ApiFailure(what, err)
        return resp

    async def paged(self, subject: str, key: str, body: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a paged list/names API (``offset`` until ``total``)."""
        items: list[Any] = []
        while True:
            resp = await self.api(subject, {**(body or {}), "offset": len(items)})
            page = resp.get(key) or []
            items.extend(page)
            if not page or len(items) >= int(resp.get("total") or 0):
                return items


async def _noop(*_args: Any) -> None:
    return None


async def _connect(options: ConnectOptions) -> Client:
    import nats
    import nats.errors

    urls = options.urls()
    if not urls:
        raise CliError("no server URL given (--server or NATS_URL)", EXIT_CONNECT)
    kwargs: dict[str, Any] = {}
    if options.creds:
        kwargs["user_credentials"] = options.creds
    if options.user and options.password is None:
        kwargs["token"] = options.user  # as the nats CLI: --user without --password is a token
    elif options.user or options.password:
        kwargs["user"] = options.user or ""
        kwargs["password"] = options.password or ""
    errors: list[BaseException] = []

    async def remember(exc: Exception) -> None:
        errors.append(exc)

    try:
        return await nats.connect(
            servers=urls,
            name="jetpy-cli",
            connect_timeout=int(CONNECT_TIMEOUT),
            allow_reconnect=False,
            max_reconnect_attempts=1,  # with allow_reconnect off: each URL is tried, then NoServersError
            reconnect_time_wait=0.05,
            dont_randomize=True,
            error_cb=remember,
            disconnected_cb=_noop,
            closed_cb=_noop,
            reconnected_cb=_noop,
            **kwargs,
        )
    except Exception as exc:
        cause = errors[-1] if errors else exc
        raise CliError(_describe_connect_error(options, cause), EXIT_CONNECT) from exc


def _describe_connect_error(options: ConnectOptions, exc: BaseException) -> str:
    import nats.errors

    where = options.server
    text = str(exc).strip()
    if isinstance(exc, nats.errors.AuthorizationError) or "authorization" in text.lower():
        return f"authorization failed connecting to {where}: check --user/--password/--creds"
    if "authentication" in text.lower():
        return f"authentication failed connecting to {where}: check --user/--password/--creds"
    if isinstance(exc, asyncio.TimeoutError):
        return f"timed out connecting to {where}"
    if isinstance(exc, ConnectionRefusedError):
        return f"could not connect to {where}: connection refused"
    if isinstance(exc, OSError):
        return f"could not connect to {where}: {exc.strerror or text or type(exc).__name__}"
    if isinstance(exc, nats.errors.NoServersError):
        return f"could not connect to {where}: no server reachable"
    return f"could not connect to {where}: {text or type(exc).__name__}"


async def _session(options: ConnectOptions, fn: Callable[[Session], Awaitable[T]]) -> T:
    import nats.errors
    import nats.js.errors

    nc = await _connect(options)
    try:
        return await fn(Session(nc, options))
    except nats.js.errors.APIError as exc:
        raise CliError(exc.description or str(exc), EXIT_API, exc.err_code) from exc
    except nats.errors.NoRespondersError as exc:
        raise CliError("JetStream is not enabled on this server (no responders)") from exc
    except nats.errors.TimeoutError as exc:
        raise CliError(f"timed out after {options.timeout:g}s waiting for the server") from exc
    except (nats.errors.ConnectionClosedError, nats.errors.StaleConnectionError) as exc:
        raise CliError("the connection to the server was lost", EXIT_CONNECT) from exc
    finally:
        try:
            await asyncio.wait_for(nc.close(), 2)
        except Exception:
            pass


def run(options: ConnectOptions, fn: Callable[[Session], Awaitable[T]]) -> T:
    """Connect, run ``fn`` with the session, close; failures become ``CliError``."""
    if options.creds and not os.path.isfile(options.creds):
        raise CliError(f"credentials file {options.creds!r} not found", EXIT_CONNECT)
    try:
        return asyncio.run(_session(options, fn))
    except KeyboardInterrupt as exc:
        raise CliError("interrupted", EXIT_INTERRUPTED) from exc
    except BrokenPipeError as exc:
        raise reader_gone() from exc
