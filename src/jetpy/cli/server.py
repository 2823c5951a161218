"""`jetpy server info` and `jetpy server check`: what the server says about itself, and health checks
for scripts and monitoring.

Owns: reading the server's INFO (sent to every client, so no system account is needed), the
round-trip time, JetStream account information (``$JS.API.INFO``), and the checks `server check`
runs (connection, JetStream, optionally a stream's and a consumer's state), each printed as one
``OK``/``FAIL`` line; any failure exits 1.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from jetpy.cli import values as V
from jetpy.cli.cluster_ops import raft_app
from jetpy.cli.common import options, parse_or_usage
from jetpy.cli.connect import ApiFailure, Session, run
from jetpy.cli.output import CliError, emit_json, info, print_sections
from jetpy.cli.reports import server_report_jetstream

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

JsonOut = Annotated[bool, typer.Option("--json", "-j", help="Print JSON.")]


async def _rtt(s: Session) -> float:
    start = time.perf_counter()
    await s.nc.flush(timeout=max(1, int(s.options.timeout)))
    return (time.perf_counter() - start) * 1000


async def _account(s: Session) -> dict[str, Any] | None:
    """``$JS.API.INFO``, or None when JetStream is not enabled (no responders)."""
    try:
        return await s.api("INFO", what="JetStream account information")
    except ApiFailure:
        raise
    except CliError as exc:
        if "not enabled" in exc.message:
            return None
        raise


@app.command("info")
def info_cmd(ctx: typer.Context, json_out: JsonOut = False) -> None:
    """Show the connected server's identity, limits and JetStream usage."""

    async def go(s: Session) -> dict[str, Any]:
        rtt = await _rtt(s)
        srv = dict(s.nc._server_info)
        url = s.nc.connected_url
        return {
            "url": url.geturl() if url is not None else "",
            "rtt_ms": round(rtt, 3),
            "server": srv,
            "jetstream": await _account(s),
        }

    res = run(options(ctx), go)
    if json_out:
        emit_json(res)
        return
    srv = res["server"]
    js = res["jetstream"]
    ident: list[tuple[str, Any]] = [
        ("URL", res["url"]),
        ("Server ID", srv.get("server_id", "")),
        ("Name", srv.get("server_name", "")),
        ("Version", srv.get("version", "")),
        ("Go / Build", srv.get("go", "")),
        ("Host", f"{srv.get('host', '')}:{srv.get('port', '')}"),
        ("Protocol", srv.get("proto", "")),
        ("Headers", "yes" if srv.get("headers") else "no"),
        ("Max Payload", V.format_bytes(srv.get("max_payload"))),
        ("Auth Required", "yes" if srv.get("auth_required") else "no"),
        ("TLS Required", "yes" if srv.get("tls_required") else "no"),
        ("Client ID", srv.get("client_id", "")),
        ("Client IP", srv.get("client_ip", "")),
        ("RTT", f"{res['rtt_ms']:.3f} ms"),
    ]
    sections: list[tuple[str, list[tuple[str, Any]]]] = [("Server", ident)]
    if js is None:
        sections.append(("JetStream", [("Enabled", "no")]))
    else:
        limits = js.get("limits") or {}
        api = js.get("api") or {}
        sections.append(
            (
                "JetStream",
                [
                    ("Enabled", "yes"),
                    ("Streams", V.format_count(js.get("streams", 0))),
                    ("Consumers", V.format_count(js.get("consumers", 0))),
                    ("Memory Used", V.format_bytes(js.get("memory", 0))),
                    ("Storage Used", V.format_bytes(js.get("storage", 0))),
                    ("Max Memory", V.format_bytes(limits.get("max_memory", -1))),
                    ("Max Storage", V.format_bytes(limits.get("max_storage", -1))),
                    ("API Requests", V.format_count(api.get("total", 0))),
                    ("API Errors", V.format_count(api.get("errors", 0))),
                ],
            )
        )
    print_sections(sections)


@app.command("check")
def check(
    ctx: typer.Context,
    jetstream: Annotated[
        bool, typer.Option("--jetstream/--no-jetstream", help="Check that JetStream answers.")
    ] = True,
    stream: Annotated[
        str | None, typer.Option("--stream", help="Check this stream exists and is healthy.")
    ] = None,
    consumer: Annotated[
        str | None, typer.Option("--consumer", help="With --stream: check this consumer exists.")
    ] = None,
    min_msgs: Annotated[
        int | None, typer.Option("--min-msgs", min=0, help="With --stream: fail below this many messages.")
    ] = None,
    max_pending: Annotated[
        int | None,
        typer.Option("--max-pending", min=0, help="With --consumer: fail above this many pending."),
    ] = None,
    max_rtt: Annotated[
        str | None, typer.Option("--max-rtt", help="Fail if the round trip takes longer: 100ms, 1s.")
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """Health checks: connection, JetStream, a stream, a consumer. Exit 0 if all pass, 1 if any fails."""
    if stream is not None:
        parse_or_usage(V.check_stream_name, stream, "--stream")
    if consumer is not None:
        if stream is None:
            raise typer.BadParameter("--consumer needs --stream", param_hint="--consumer")
        parse_or_usage(V.check_consumer_name, consumer, "--consumer")
    if min_msgs is not None and stream is None:
        raise typer.BadParameter("--min-msgs needs --stream", param_hint="--min-msgs")
    if max_pending is not None and consumer is None:
        raise typer.BadParameter("--max-pending needs --consumer", param_hint="--max-pending")
    rtt_limit = parse_or_usage(V.parse_duration, max_rtt, "--max-rtt") / 1e6 if max_rtt else None
    # imported before the clock starts, so that "connected in" measures the server, not Python
    import nats  # noqa: F401

    start = time.perf_counter()

    async def go(s: Session) -> list[dict[str, Any]]:
        connected_ms = (time.perf_counter() - start) * 1000
        results: list[dict[str, Any]] = []

        def add(name: str, ok: bool, detail: str) -> None:
            results.append({"check": name, "ok": ok, "detail": detail})

        rtt = await _rtt(s)
        ok = rtt_limit is None or rtt <= rtt_limit
        limit_txt = f" (limit {rtt_limit:g} ms)" if rtt_limit is not None else ""
        add(
            "connection",
            ok,
            f"connected to {s.nc.connected_url.geturl() if s.nc.connected_url else '?'} "
            f"in {connected_ms:.1f} ms, rtt {rtt:.2f} ms{limit_txt}",
        )
        if jetstream or stream:
            try:
                acct = await _account(s)
            except CliError as exc:
                add("jetstream", False, exc.message)
                acct = None
            else:
                if acct is None:
                    add("jetstream", False, "JetStream is not enabled")
                else:
                    add(
                        "jetstream",
                        True,
                        f"{acct.get('streams', 0)} streams, {acct.get('consumers', 0)} consumers, "
                        f"{V.format_bytes(acct.get('storage', 0))} stored",
                    )
        if stream:
            try:
                si = await s.api(f"STREAM.INFO.{stream}", what=f"stream {stream}")
            except CliError as exc:
                add("stream", False, exc.message)
            else:
                st = si.get("state") or {}
                msgs = int(st.get("messages", 0))
                lost = (st.get("lost") or {}).get("msgs") or []
                problems = []
                if min_msgs is not None and msgs < min_msgs:
                    problems.append(f"{msgs} messages, fewer than {min_msgs}")
                if lost:
                    problems.append(f"{len(lost)} messages lost")
                add(
                    "stream",
                    not problems,
                    f"stream {stream}: "
                    + (
                        "; ".join(problems)
                        if problems
                        else f"{msgs:,} messages, last sequence {st.get('last_seq', 0):,}"
                    ),
                )
        if stream and consumer:
            try:
                ci = await s.api(f"CONSUMER.INFO.{stream}.{consumer}", what=f"consumer {stream} > {consumer}")
            except CliError as exc:
                add("consumer", False, exc.message)
            else:
                pending = int(ci.get("num_pending", 0))
                ack_pending = int(ci.get("num_ack_pending", 0))
                bad = max_pending is not None and pending > max_pending
                add(
                    "consumer",
                    not bad,
                    f"consumer {stream} > {consumer}: {pending:,} pending"
                    + (f", more than {max_pending}" if bad else "")
                    + f", {ack_pending:,} awaiting ack",
                )
        return results

    results = run(options(ctx), go)
    if json_out:
        emit_json({"ok": all(r["ok"] for r in results), "checks": results})
    else:
        for r in results:
            info(f"{'OK  ' if r['ok'] else 'FAIL'} {r['check']}: {r['detail']}")
    failed = [r["check"] for r in results if not r["ok"]]
    if failed:
        raise CliError(f"check failed: {', '.join(failed)}")


report_app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
report_app.command("jetstream")(server_report_jetstream)
app.add_typer(
    raft_app, name="raft", help="The JetStream meta group (the nats CLI's `server raft`; system account)."
)
app.add_typer(report_app, name="report", help="Reports across servers (the nats CLI's `server report`).")
