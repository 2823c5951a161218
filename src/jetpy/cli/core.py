"""Core NATS verbs: `jetpy pub`, `sub`, `request` and `reply`.

Owns: publishing (``--count`` with body templates, headers, ``--jetstream`` waiting for PubAcks),
subscribing and replying until ``--count`` messages or ``--wait`` (a readiness line goes to
stderr once the subscription is registered with the server, so scripts can start publishing),
requests, and how a received message is printed (text, ``--raw`` payloads, ``--json`` lines).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from jetpy.cli import values as V
from jetpy.cli.common import options, parse_or_usage
from jetpy.cli.connect import Session, run
from jetpy.cli.output import CliError, info, usage
from jetpy.cli.templates import Template

if TYPE_CHECKING:
    from nats.aio.msg import Msg

__all__ = ["msg_to_json", "print_msg", "pub", "reply", "request", "sub"]

HeaderOpt = Annotated[
    list[str] | None, typer.Option("--header", "-H", help="A header as Key:Value (repeatable).")
]
JsonOut = Annotated[bool, typer.Option("--json", "-j", help="One JSON object per message.")]
RawOut = Annotated[bool, typer.Option("--raw", "-r", help="Only the payloads.")]


def _headers(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep or not key.strip() or any(c.isspace() for c in key.strip()):
            usage(f"--header: expected Key:Value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _body(body: str | None) -> tuple[Template | None, bytes]:
    """The body template, or raw bytes from stdin when no body argument was given."""
    if body is not None:
        try:
            return Template(body), b""
        except ValueError as exc:
            usage(f"body: {exc}")
    if not sys.stdin.isatty():
        return None, sys.stdin.buffer.read()
    return None, b""


def msg_to_json(msg: Msg) -> dict[str, Any]:
    try:
        data: Any = msg.data.decode()
    except UnicodeDecodeError:
        data = {"base64": base64.b64encode(msg.data).decode()}
    return {
        "subject": msg.subject,
        "reply": msg.reply or None,
        "headers": dict(msg.headers or {}),
        "data": data,
    }


def print_msg(msg: Msg, n: int, *, raw: bool, as_json: bool, verb: str = "Received") -> None:
    out = sys.stdout
    if as_json:
        out.write(json.dumps(msg_to_json(msg)) + "\n")
    elif raw:
        out.flush()
        out.buffer.write(msg.data + b"\n")
    else:
        reply = f" with reply {msg.reply!r}" if msg.reply else ""
        out.write(f"[#{n}] {verb} on {msg.subject!r}{reply}\n")
        for k, v in (msg.headers or {}).items():
            out.write(f"{k}: {v}\n")
        out.write("\n")
        out.flush()
        out.buffer.write(msg.data + b"\n\n")
    out.flush()


PROGRESS_MIN: Final = 1000
"""Below this many messages `pub` finishes before a progress bar would be worth drawing."""


class _Bar:
    """A rich progress bar on stderr (only on a terminal)."""

    def __init__(self, total: int, description: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._progress.add_task(description, total=total)
        self._progress.start()

    def advance(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def close(self) -> None:
        self._progress.stop()


def _progress(total: int, description: str) -> _Bar | None:
    if total < PROGRESS_MIN or not sys.stderr.isatty():
        return None
    return _Bar(total, description)


def pub(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="Subject to publish to.", show_default=False)],
    body: Annotated[
        str | None, typer.Argument(help="Message body (templates allowed; stdin if absent).")
    ] = None,
    count: Annotated[int, typer.Option("--count", min=1, help="Publish this many messages.")] = 1,
    sleep: Annotated[str | None, typer.Option("--sleep", help="Pause between messages: 10ms, 1s.")] = None,
    header: HeaderOpt = None,
    reply: Annotated[str | None, typer.Option("--reply", help="Reply subject to set.")] = None,
    jetstream: Annotated[
        bool, typer.Option("--jetstream", "-J", help="Publish to JetStream and wait for each PubAck.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing on success.")] = False,
) -> None:
    """Publish messages. Body templates: {{Count}} {{ID}} {{Time}} {{TimeStamp}} {{Unix}} {{UnixNano}}
    {{Random min max}}."""
    parse_or_usage(V.check_pub_subject, subject, "subject")
    if reply is not None:
        parse_or_usage(V.check_pub_subject, reply, "--reply")
    if reply is not None and jetstream:
        usage("--reply and --jetstream are exclusive (JetStream publishes use the reply for the ack)")
    pause = parse_or_usage(V.parse_duration, sleep, "--sleep") / 1e9 if sleep else 0.0
    headers = _headers(header)
    template, stdin_body = _body(body)

    async def go(s: Session) -> tuple[int, int, list[tuple[str, int, bool]]]:
        import nats.errors
        import nats.js.errors

        sent = size = 0
        acks: list[tuple[str, int, bool]] = []
        progress = _progress(count, f"Publishing to {subject}") if not quiet else None
        for i in range(1, count + 1):
            data = template.render(i) if template is not None else stdin_body
            if jetstream:
                try:
                    ack = await s.js.publish(subject, data, headers=headers, timeout=s.options.timeout)
                except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError) as exc:
                    raise CliError(f"no stream stores subject {subject!r} (no responders)") from exc
                acks.append((ack.stream, ack.seq, bool(ack.duplicate)))
            else:
                await s.nc.publish(subject, data, reply=reply or "", headers=headers)
            sent += 1
            size += len(data)
            if progress is not None:
                progress.advance(1)
            if pause and i < count:
                await s.nc.flush(timeout=max(1, int(s.options.timeout)))
                await asyncio.sleep(pause)
        await s.nc.flush(timeout=max(1, int(s.options.timeout)))
        if progress is not None:
            progress.close()
        return sent, size, acks

    sent, size, acks = run(options(ctx), go)
    if quiet:
        return
    if jetstream:
        for stream, seq, dup in acks[-20:] if count > 20 else acks:
            info(f"Stored in stream {stream} sequence {seq}{' (duplicate)' if dup else ''}")
    if count == 1:
        info(f"Published {size:,} bytes to {subject!r}")
    else:
        info(f"Published {sent:,} messages ({size:,} bytes) to {subject!r}")


def sub(
    ctx: typer.Context,
    subject: Annotated[
        str, typer.Argument(help="Subject to subscribe to (wildcards allowed).", show_default=False)
    ],
    queue: Annotated[str | None, typer.Option("--queue", help="Join this queue group.")] = None,
    count: Annotated[
        int, typer.Option("--count", min=0, help="Exit after this many messages (0: never).")
    ] = 0,
    wait: Annotated[
        str | None, typer.Option("--wait", help="Exit after this long; with --count, too few is an error.")
    ] = None,
    raw: RawOut = False,
    json_out: JsonOut = False,
) -> None:
    """Subscribe and print messages until interrupted, --count or --wait."""
    parse_or_usage(V.check_subject, subject, "subject")
    limit = parse_or_usage(V.parse_duration, wait, "--wait") / 1e9 if wait else None

    async def go(s: Session) -> int:
        queue_ = asyncio.Queue[Any]()
        sub_ = await s.nc.subscribe(subject, queue=queue or "", cb=queue_.put)
        await s.nc.flush()
        sys.stderr.write(f"Subscribing on {subject}\n")
        sys.stderr.flush()
        n = 0
        deadline = None if limit is None else asyncio.get_running_loop().time() + limit
        try:
            while count == 0 or n < count:
                left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                if left is not None and left <= 0:
                    break
                try:
                    msg = await asyncio.wait_for(queue_.get(), left)
                except TimeoutError:
                    break
                n += 1
                print_msg(msg, n, raw=raw, as_json=json_out)
        finally:
            await sub_.unsubscribe()
        return n

    try:
        n = run(options(ctx), go)
    except CliError as exc:
        if exc.exit_code == 130:  # interrupted: the normal way to end a subscription
            return
        raise
    if count and n < count:
        raise CliError(f"received {n} of {count} messages on {subject!r} within {wait}")


def request(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="Subject to send the request to.", show_default=False)],
    body: Annotated[
        str | None, typer.Argument(help="Request body (templates allowed; stdin if absent).")
    ] = None,
    header: HeaderOpt = None,
    raw: RawOut = False,
    json_out: JsonOut = False,
) -> None:
    """Send a request and print the reply (waits --timeout seconds)."""
    parse_or_usage(V.check_pub_subject, subject, "subject")
    headers = _headers(header)
    template, stdin_body = _body(body)
    data = template.render(1) if template is not None else stdin_body

    async def go(s: Session) -> Msg:
        import nats.errors

        try:
            return await s.nc.request(subject, data, timeout=s.options.timeout, headers=headers)
        except nats.errors.NoRespondersError as exc:
            raise CliError(f"no responders available for request on {subject!r}") from exc
        except nats.errors.TimeoutError as exc:
            raise CliError(
                f"timed out after {s.options.timeout:g}s waiting for a reply on {subject!r}"
            ) from exc

    msg = run(options(ctx), go)
    print_msg(msg, 1, raw=raw, as_json=json_out)


def reply(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="Subject to answer requests on.", show_default=False)],
    body: Annotated[
        str | None,
        typer.Argument(help="Reply body; templates allowed, {{Request}} is the request's payload."),
    ] = None,
    echo: Annotated[
        bool, typer.Option("--echo", help="Reply with the request's payload and headers.")
    ] = False,
    queue: Annotated[str, typer.Option("--queue", help="Queue group (replicas share requests).")] = "jetpy",
    count: Annotated[
        int, typer.Option("--count", min=0, help="Exit after this many requests (0: never).")
    ] = 0,
    wait: Annotated[str | None, typer.Option("--wait", help="Exit after this long.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print the requests.")] = False,
) -> None:
    """Answer requests on a subject until interrupted, --count or --wait."""
    parse_or_usage(V.check_subject, subject, "subject")
    if body is None and not echo:
        usage("give a reply body or --echo")
    template: Template | None = None
    if body is not None:
        try:
            template = Template(body, allow_request=True)
        except ValueError as exc:
            usage(f"body: {exc}")
    limit = parse_or_usage(V.parse_duration, wait, "--wait") / 1e9 if wait else None

    async def go(s: Session) -> int:
        queue_ = asyncio.Queue[Any]()
        sub_ = await s.nc.subscribe(subject, queue=queue, cb=queue_.put)
        await s.nc.flush()
        sys.stderr.write(f"Listening on {subject!r} in group {queue!r}\n")
        sys.stderr.flush()
        n = 0
        deadline = None if limit is None else asyncio.get_running_loop().time() + limit
        try:
            while count == 0 or n < count:
                left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                if left is not None and left <= 0:
                    break
                try:
                    msg = await asyncio.wait_for(queue_.get(), left)
                except TimeoutError:
                    break
                n += 1
                if not quiet:
                    print_msg(msg, n, raw=False, as_json=False)
                if not msg.reply:
                    continue
                if echo:
                    await s.nc.publish(msg.reply, msg.data, headers=msg.headers)
                else:
                    assert template is not None
                    await s.nc.publish(msg.reply, template.render(n, msg.data))
            await s.nc.flush()
        finally:
            await sub_.unsubscribe()
        return n

    try:
        run(options(ctx), go)
    except CliError as exc:
        if exc.exit_code == 130:
            return
        raise
