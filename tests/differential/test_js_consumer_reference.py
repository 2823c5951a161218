"""Differential: JetStream consumers, jetpy against Debian's nats-server 2.9.10.

The same raw requests go to both servers (``nc.request`` for the JSON API; pull requests and acks
published with a reply inbox we subscribe to, so status messages are seen as they are sent), and
the answers are compared after normalizing what differs by nature (times, generated names, the
timestamp token of ack subjects).

jetpy models nats-server 2.10/2.11 where those changed the consumer API. Each such case is listed
in ``DELIBERATE`` with the reason, and is still run against both servers: the reference must
answer what 2.9 answers, jetpy what the newer servers answer, so a change on either side shows.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from conftest import JETPY_SERVER, Proc, reference_cmd, start_process

pytestmark = pytest.mark.differential

TIME_KEYS = {"created", "ts", "last_active"}
ACK_TS = re.compile(r"^(\$JS\.ACK\.[^.]+\.[^.]+\.\d+\.\d+\.\d+\.)\d+(\.\d+)$")

Scenario = Callable[[Client], Awaitable[Any]]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp: Path = tmp_path_factory.mktemp("consumer-reference")
    ref = start_process(reference_cmd(tmp, "-js", "-sd", str(tmp / "ref")), tmp / "ref.log")
    try:
        jp = start_process(
            [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(tmp / "jp")], tmp / "jp.log"
        )
    except BaseException:
        ref.stop(signal.SIGKILL)
        raise
    yield {"reference": ref, "jetpy": jp}
    ref.stop(signal.SIGKILL)
    jp.stop(signal.SIGKILL)


async def on_both(servers: dict[str, Proc], scenario: Scenario) -> tuple[Any, Any]:
    out = []
    for name in ("reference", "jetpy"):
        nc = await nats.connect(servers[name].url)
        try:
            out.append(await scenario(nc))
        finally:
            await nc.close()
    return out[0], out[1]


def normalize(doc: Any, legacy: bool = False) -> Any:
    """Times become markers; for consumers made on the legacy subjects ``config.name`` goes
    (2.10+ fill it in, 2.9 leaves it empty); ``ts`` (2.10+) goes."""
    if isinstance(doc, dict):
        out = {k: ("<time>" if k in TIME_KEYS else normalize(v, legacy)) for k, v in doc.items() if k != "ts"}
        cfg = out.get("config")
        if legacy and isinstance(cfg, dict) and "stream_name" in out:
            cfg.pop("name", None)
        return out
    if isinstance(doc, list):
        return [normalize(v, legacy) for v in doc]
    return doc


def body(o: Any) -> bytes:
    return o if isinstance(o, bytes) else json.dumps(o).encode()


async def api(nc: Client, subject: str, req: Any = None) -> Any:
    msg = await nc.request("$JS.API." + subject, b"" if req is None else body(req), timeout=2)
    return json.loads(msg.data)


def cfg(stream: str, **config: Any) -> dict[str, Any]:
    return {"stream_name": stream, "config": config}


# -- create / update ----------------------------------------------------------------------------

# (subject after $JS.API., request body, legacy subject): run in order on a stream "CR"
CREATE_CASES: list[tuple[str, Any, bool]] = [
    # the name form, repeated (idempotent) and with immutable fields changed
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="explicit", max_deliver=4), False),
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="none"), False),
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="all"), False),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg("CR", durable_name="D1", ack_policy="explicit", deliver_policy="new"),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg(
            "CR",
            durable_name="D1",
            ack_policy="explicit",
            deliver_policy="by_start_sequence",
            opt_start_seq=3,
        ),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg("CR", durable_name="D1", ack_policy="explicit", deliver_subject="dd"),
        False,
    ),
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="explicit", max_waiting=7), False),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg("CR", durable_name="D1", ack_policy="explicit", replay_policy="original"),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg("CR", durable_name="D1", ack_policy="explicit", filter_subject="cr.x"),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg(
            "CR",
            durable_name="D1",
            ack_policy="explicit",
            max_ack_pending=5,
            description="d",
            ack_wait=5_000_000_000,
            max_batch=3,
            max_expires=1_000_000_000,
            max_bytes=100,
            headers_only=True,
            sample_freq="50%",
        ),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.D1",
        cfg("CR", durable_name="D1", ack_policy="explicit", filter_subject="zz"),
        False,
    ),
    ("CONSUMER.CREATE.CR.D1", cfg("CR", durable_name="D1", ack_policy="explicit", num_replicas=3), False),
    # push consumers: config rules and immutable fields
    (
        "CONSUMER.CREATE.CR.DP",
        cfg("CR", durable_name="DP", deliver_subject="dp", ack_policy="explicit", max_waiting=3),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.DP",
        cfg("CR", durable_name="DP", deliver_subject="dp", ack_policy="explicit", idle_heartbeat=50_000_000),
        False,
    ),
    ("CONSUMER.CREATE.CR.DP", cfg("CR", durable_name="DP", ack_policy="explicit", flow_control=True), False),
    (
        "CONSUMER.CREATE.CR.DP",
        cfg("CR", durable_name="DP", ack_policy="explicit", idle_heartbeat=1_000_000_000),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.DP",
        cfg("CR", durable_name="DP", deliver_subject="dp", ack_policy="explicit", flow_control=True),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.DP",
        cfg("CR", durable_name="DP", deliver_subject="dp", ack_policy="explicit", max_batch=3),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.DP",
        cfg(
            "CR",
            durable_name="DP",
            deliver_subject="dp",
            ack_policy="explicit",
            rate_limit_bps=1000,
            idle_heartbeat=1_000_000_000,
            flow_control=True,
        ),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.DP",
        cfg(
            "CR",
            durable_name="DP",
            deliver_subject="dp2",
            ack_policy="explicit",
            rate_limit_bps=1000,
            idle_heartbeat=1_000_000_000,
            flow_control=True,
        ),
        False,
    ),
    ("CONSUMER.CREATE.CR.DP", cfg("CR", durable_name="DP", ack_policy="explicit"), False),
    (
        "CONSUMER.CREATE.CR.DR",
        cfg("CR", durable_name="DR", ack_policy="explicit", rate_limit_bps=1000),
        False,
    ),
    # invalid configs
    (
        "CONSUMER.CREATE.CR.DS",
        cfg("CR", durable_name="DS", ack_policy="explicit", deliver_policy="by_start_sequence"),
        False,
    ),
    ("CONSUMER.CREATE.CR.DS", cfg("CR", durable_name="DS", ack_policy="explicit", opt_start_seq=3), False),
    (
        "CONSUMER.CREATE.CR.DS",
        cfg("CR", durable_name="DS", ack_policy="explicit", deliver_policy="last_per_subject"),
        False,
    ),
    ("CONSUMER.CREATE.CR.DS", cfg("CR", durable_name="DS", ack_policy="explicit", sample_freq="x"), False),
    (
        "CONSUMER.CREATE.CR.DS",
        cfg("CR", durable_name="DS", ack_policy="explicit", description="x" * 5000),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.DS",
        cfg("CR", durable_name="DS", ack_policy="explicit", max_deliver=3, backoff=[1_000_000_000] * 2),
        False,
    ),
    # durable / name / subject mismatches
    ("CONSUMER.CREATE.CR.D3", cfg("CR", durable_name="X", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR.D3", cfg("CR", name="X", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR.DX", cfg("CR", durable_name="DX", name="DY", ack_policy="explicit"), False),
    ("CONSUMER.DURABLE.CREATE.CR.D6", cfg("CR", ack_policy="explicit"), True),
    ("CONSUMER.DURABLE.CREATE.CR.D6", cfg("CR", durable_name="X", ack_policy="explicit"), True),
    ("CONSUMER.DURABLE.CREATE.CR.D6", cfg("CR", durable_name="D6", ack_policy="explicit"), True),
    ("CONSUMER.CREATE.CR", cfg("CR", durable_name="D7", ack_policy="explicit"), True),
    ("CONSUMER.CREATE.CR", cfg("CR", name="DZ", durable_name="DZ", ack_policy="explicit"), True),
    ("CONSUMER.CREATE.CR", cfg("CR", name="N9", ack_policy="explicit"), True),
    ("CONSUMER.CREATE.CR.a/b", cfg("CR", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR", cfg("CR", durable_name="a.b", ack_policy="explicit"), True),
    # filters in the subject
    (
        "CONSUMER.CREATE.CR.D4.cr.a",
        cfg("CR", durable_name="D4", ack_policy="explicit", filter_subject="cr.b"),
        False,
    ),
    (
        "CONSUMER.CREATE.CR.D4.cr.a",
        cfg("CR", durable_name="D4", ack_policy="explicit", filter_subject="cr.a"),
        False,
    ),
    ("CONSUMER.CREATE.CR.D4.cr.a", cfg("CR", durable_name="D4", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR.D9.cr.*", cfg("CR", ack_policy="explicit", filter_subject="cr.*"), False),
    ("CONSUMER.CREATE.CR.DA.*", cfg("CR", ack_policy="explicit", filter_subject="*"), False),
    # request bodies
    ("CONSUMER.CREATE.CR.DE", cfg("XX", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.NOPE.DE", cfg("NOPE", ack_policy="explicit"), False),
    ("CONSUMER.CREATE.CR.DE", {"stream_name": "CR"}, False),  # no config: the zero config
    ("CONSUMER.CREATE.CR", {"config": {"ack_policy": "explicit"}}, True),
    ("CONSUMER.CREATE.CR", b"", True),
    ("CONSUMER.CREATE.CR", b"{}", True),
    ("CONSUMER.CREATE.CR", b"[1]", True),
    ("CONSUMER.CREATE.CR", b"garbage", True),
    ("CONSUMER.CREATE.CR", {"stream_name": "CR", "config": []}, True),
    ("CONSUMER.CREATE.CR", {"stream_name": "CR", "config": {"ack_policy": 5}}, True),
    ("CONSUMER.CREATE.CR", {"stream_name": "CR", "config": {"ack_policy": "bogus"}}, True),
    ("CONSUMER.CREATE.CR", {"stream_name": "CR", "config": {"max_deliver": "x"}}, True),
    ("CONSUMER.CREATE.CR", cfg("CR", ack_policy="explicit", inactive_threshold=5_000_000_000), True),
]

# Cases where jetpy answers as nats-server 2.10+ does: (subject, body, what 2.9.10 answers
# (err_code, or 0 for success), what jetpy answers, why)
DELIBERATE: list[tuple[str, Any, int, int, str]] = [
    (
        "CONSUMER.CREATE.CR.DL",
        {**cfg("CR", durable_name="DL", ack_policy="explicit", max_deliver=9), "action": "create"},
        0,
        10148,
        "2.10 'action': create refuses to change an existing consumer (2.9 ignores action and updates)",
    ),
    (
        "CONSUMER.CREATE.CR.DU",
        {**cfg("CR", ack_policy="explicit"), "action": "update"},
        0,
        10149,
        "2.10 'action': update refuses to create (2.9 ignores action and creates)",
    ),
    (
        "CONSUMER.CREATE.CR.DM.cr.a",
        cfg("CR", durable_name="DM", ack_policy="explicit", filter_subjects=["cr.a"]),
        10131,
        10137,
        "2.10 filter_subjects: refused on the filtered subject form (2.9 ignores the field)",
    ),
    (
        "CONSUMER.CREATE.CR.DN.cr",
        cfg("CR", ack_policy="explicit"),
        0,
        10131,
        "2.9.10 ignores a one-token filter in the create subject (an off-by-one); the filter must match",
    ),
    (
        "CONSUMER.CREATE.CR.DW",
        cfg("CR", durable_name="DW", ack_policy="explicit", ack_wait=-1),
        0,
        10183,
        "2.11 refuses a negative ack_wait (2.9 stores it)",
    ),
    (
        "CONSUMER.CREATE.CR.DB",
        cfg("CR", durable_name="DB", ack_policy="explicit", backoff=[1_000_000_000]),
        10116,
        0,
        "2.10 allows backoff with unlimited max_deliver (2.9 needs max_deliver > len(backoff))",
    ),
    (
        "CONSUMER.CREATE.CR.DC",
        cfg("CR", durable_name="DC", ack_policy="explicit", max_deliver=2, backoff=[1_000_000_000] * 2),
        10116,
        0,
        "2.10 allows max_deliver == len(backoff) (2.9 needs more)",
    ),
]

# jetpy answers where the reference stays silent: the legacy durable subject with a token too few
# or too many does not match nats-server's `DURABLE.CREATE.*.*` route; jetpy says 10016 instead of
# letting the client time out.
UNROUTED = ["CONSUMER.DURABLE.CREATE.CR", "CONSUMER.DURABLE.CREATE.CR.DD.x"]


async def test_create_update_and_errors(servers: dict[str, Proc]) -> None:
    async def scenario(nc: Client) -> list[Any]:
        await api(nc, "STREAM.CREATE.CR", {"name": "CR", "subjects": ["cr.>"], "storage": "memory"})
        out = []
        for subject, req, legacy in CREATE_CASES:
            resp = await api(nc, subject, req)
            if legacy and "name" in resp and not resp.get("config", {}).get("durable_name"):
                resp["name"] = "<generated>"
            out.append(normalize(resp, legacy))
        names = await api(nc, "CONSUMER.NAMES.CR")
        names["consumers"] = sorted("<generated>" if len(n) == 8 else n for n in names["consumers"])
        out.append(names)
        return out

    ref, jp = await on_both(servers, scenario)
    for (subject, req, _), a, b in zip([*CREATE_CASES, ("NAMES", None, False)], ref, jp, strict=True):
        assert a == b, f"{subject} {req!r}\nreference: {a}\njetpy:     {b}"


async def test_deliberate_differences(servers: dict[str, Proc]) -> None:
    async def scenario(nc: Client) -> list[int]:
        await api(nc, "STREAM.CREATE.CR", {"name": "CR", "subjects": ["cr.>"], "storage": "memory"})
        await api(nc, "CONSUMER.CREATE.CR.DL", cfg("CR", durable_name="DL", ack_policy="explicit"))
        codes = []
        for subject, req, *_ in DELIBERATE:
            resp = await api(nc, subject, req)
            codes.append(resp["error"]["err_code"] if "error" in resp else 0)
        return codes

    ref, jp = await on_both(servers, scenario)
    for (subject, _, want_ref, want_jp, why), a, b in zip(DELIBERATE, ref, jp, strict=True):
        assert (a, b) == (want_ref, want_jp), f"{subject}: {why}"
    # routes the reference does not have
    nc = await nats.connect(servers["reference"].url)
    try:
        for subject in UNROUTED:
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request("$JS.API." + subject, body(cfg("CR", durable_name="DD")), timeout=0.3)
    finally:
        await nc.close()
    nc = await nats.connect(servers["jetpy"].url)
    try:
        for subject in UNROUTED:
            assert (await api(nc, subject, cfg("CR", durable_name="DD")))["error"]["err_code"] == 10016
    finally:
        await nc.close()


async def test_info_names_list_delete(servers: dict[str, Proc]) -> None:
    async def scenario(nc: Client) -> list[Any]:
        await api(nc, "STREAM.CREATE.IN", {"name": "IN", "subjects": ["in.>"], "storage": "file"})
        for i in range(5):
            await api(
                nc,
                f"CONSUMER.CREATE.IN.C{i}",
                cfg("IN", durable_name=f"C{i}", ack_policy="explicit", filter_subject=f"in.{i}"),
            )
        await api(
            nc,
            "CONSUMER.CREATE.IN.P",
            cfg("IN", durable_name="P", deliver_subject="in.deliver", ack_policy="none"),
        )
        out = []
        for subject, req in [
            ("CONSUMER.INFO.IN.C1", None),
            ("CONSUMER.INFO.IN.P", None),
            ("CONSUMER.INFO.IN.NOPE", None),
            ("CONSUMER.INFO.NOPE.C1", None),
            ("CONSUMER.NAMES.IN", None),
            ("CONSUMER.NAMES.IN", {"offset": 2}),
            ("CONSUMER.NAMES.IN", {"offset": 100}),
            ("CONSUMER.LIST.IN", None),
            ("CONSUMER.LIST.IN", {"offset": 4}),
            ("CONSUMER.LIST.IN", {"offset": 100}),
            ("CONSUMER.DELETE.IN.C1", None),
            ("CONSUMER.DELETE.IN.C1", None),
            ("CONSUMER.DELETE.NOPE.C1", None),
            ("CONSUMER.INFO.IN.C1", None),
            ("CONSUMER.NAMES.IN", None),
        ]:
            out.append(normalize(await api(nc, subject, req)))
        # errors of the paged calls: compared by their error object (nats-server also writes
        # empty paging fields next to it)
        paged: list[tuple[str, Any]] = [
            ("CONSUMER.NAMES.NOPE", None),
            ("CONSUMER.LIST.NOPE", None),
            ("CONSUMER.NAMES.IN", {"offset": "x"}),
            ("CONSUMER.NAMES.IN", b"xx"),
        ]
        for subject, req in paged:
            out.append((await api(nc, subject, req))["error"])
        return out

    ref, jp = await on_both(servers, scenario)
    for i, (a, b) in enumerate(zip(ref, jp, strict=True)):
        assert a == b, f"step {i}\nreference: {a}\njetpy:     {b}"


# -- pull requests and status messages ----------------------------------------------------------


def _msg(m: Any, inbox: str) -> tuple[str, str, str, dict[str, str]]:
    reply = m.reply or ""
    match = ACK_TS.match(reply)
    if match:
        reply = f"{match.group(1)}<ts>{match.group(2)}"
    return ("<inbox>" if m.subject == inbox else m.subject, reply, m.data.decode(), dict(m.headers or {}))


async def pull(
    nc: Client,
    stream: str,
    consumer: str,
    req: Any,
    wait: float = 0.5,
    during: Callable[[], Awaitable[None]] | None = None,
) -> list[Any]:
    """Publish a pull request with a reply inbox; collect what arrives until a terminal status
    or ``wait`` seconds."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body(req), reply=inbox)
    await nc.flush()
    if during is not None:
        await during()
    got: list[Any] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + wait
    while (left := end - loop.time()) > 0:
        try:
            m = await sub.next_msg(timeout=left)
        except nats.errors.TimeoutError:
            break
        got.append(_msg(m, inbox))
        status = (m.headers or {}).get("Status")
        if status and status != "100":
            break
    await sub.unsubscribe()
    return got


NO_WAIT_ENDS_2_10 = ("no_wait, 3 of 10", "no_wait and expires, 3 of 10")


async def test_pull_status_messages(servers: dict[str, Proc]) -> None:
    async def scenario(nc: Client) -> dict[str, Any]:
        await api(nc, "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"], "storage": "memory"})

        async def make(name: str, **config: Any) -> None:
            await api(
                nc, f"CONSUMER.CREATE.P.{name}", cfg("P", durable_name=name, ack_policy="explicit", **config)
            )

        out: dict[str, Any] = {}
        await make("A")
        out["no_wait, nothing"] = await pull(nc, "P", "A", {"batch": 1, "no_wait": True})
        out["expires, nothing"] = await pull(nc, "P", "A", {"batch": 3, "expires": 200_000_000})
        out["empty body, nothing"] = await pull(nc, "P", "A", b"", wait=0.3)
        out["bad heartbeat"] = await pull(
            nc, "P", "A", {"batch": 1, "expires": 1_000_000_000, "idle_heartbeat": 900_000_000}
        )
        for i in range(3):
            await nc.publish(f"p.{i}", f"m{i}".encode())
        await nc.flush()
        await asyncio.sleep(0.1)  # the first request is still waiting for its message
        out["batch with expires, 3 of 10"] = await pull(nc, "P", "A", {"batch": 10, "expires": 300_000_000})
        await make("B")
        out["no_wait, 3 of 10"] = await pull(nc, "P", "B", {"batch": 10, "no_wait": True})
        await make("B2")
        out["no_wait and expires, 3 of 10"] = await pull(
            nc, "P", "B2", {"batch": 10, "no_wait": True, "expires": 300_000_000}
        )
        await make("B3")
        out["integer body"] = await pull(nc, "P", "B3", b"2", wait=0.3)
        await make("W", max_waiting=1)
        first = asyncio.create_task(pull(nc, "P", "W", {"batch": 100, "expires": 500_000_000}, wait=0.8))
        await asyncio.sleep(0.1)
        out["max_waiting exceeded"] = await pull(nc, "P", "W", {"batch": 100, "expires": 500_000_000})
        out["max_waiting first"] = await first
        await make("MB", max_batch=2)
        out["max_batch"] = await pull(nc, "P", "MB", {"batch": 3})
        await make("ME", max_expires=1_000_000_000)
        out["max_expires"] = await pull(nc, "P", "ME", {"batch": 1, "expires": 2_000_000_000})
        out["max_expires, no expires"] = await pull(nc, "P", "ME", {"batch": 1}, wait=0.3)
        await make("MX", max_bytes=1000)
        out["max_bytes"] = await pull(nc, "P", "MX", {"batch": 1, "max_bytes": 2000})
        await make("SZ")
        out["max_bytes below one message"] = await pull(
            nc, "P", "SZ", {"batch": 5, "max_bytes": 5, "expires": 300_000_000}
        )
        out["max_bytes for one message"] = await pull(
            nc, "P", "SZ", {"batch": 5, "max_bytes": 60, "expires": 300_000_000}
        )
        await make("SZ2")
        out["max_bytes for two, no_wait"] = await pull(
            nc, "P", "SZ2", {"batch": 5, "max_bytes": 100, "no_wait": True}
        )
        await make("MAP", max_ack_pending=1)
        out["max_ack_pending, first"] = await pull(nc, "P", "MAP", {"batch": 5, "no_wait": True}, wait=0.3)
        out["max_ack_pending, no_wait"] = await pull(nc, "P", "MAP", {"batch": 5, "no_wait": True}, wait=0.3)
        out["max_ack_pending, expires"] = await pull(nc, "P", "MAP", {"batch": 5, "expires": 300_000_000})
        await make("PU", deliver_subject="p-push.x")
        out["push consumer"] = await pull(nc, "P", "PU", {"batch": 1})
        await make("DEL", deliver_policy="new")

        async def delete() -> None:
            await asyncio.sleep(0.1)
            await api(nc, "CONSUMER.DELETE.P.DEL")

        out["consumer deleted"] = await pull(
            nc, "P", "DEL", {"batch": 2, "expires": 2_000_000_000}, during=delete
        )
        await make("HB", deliver_policy="new")
        out["idle heartbeats"] = await pull(
            nc, "P", "HB", {"batch": 2, "expires": 700_000_000, "idle_heartbeat": 200_000_000}, wait=1.0
        )
        # a malformed request: 400, the text after "Bad Request - " is the JSON decoder's own
        bad = await pull(nc, "P", "B3", b"{bad")
        out["bad json"] = [
            (s, r, d, {**h, "Description": h["Description"].split(" - ")[0]}) for s, r, d, h in bad
        ]
        return out

    ref, jp = await on_both(servers, scenario)
    assert ref.keys() == jp.keys()
    for k in ref:
        if k in NO_WAIT_ENDS_2_10:
            # nats-server 2.10+ ends a no_wait request that got some messages with 404 (2.9: 408
            # with what is left), as tests/differential/test_consumer_211_reference.py compares
            assert ref[k][:-1] == jp[k][:-1], f"{k}\nreference: {ref[k]}\njetpy:     {jp[k]}"
            assert ref[k][-1][3]["Status"] == "408" and jp[k][-1][3]["Status"] == "404"
            continue
        assert ref[k] == jp[k], f"{k}\nreference: {ref[k]}\njetpy:     {jp[k]}"
    # what the reference says is what the clients expect: spot-check it is not vacuous
    assert ref["no_wait, nothing"][0][3]["Status"] == "404"
    assert ref["max_waiting exceeded"][0][3]["Description"] == "Exceeded MaxWaiting"
    assert [h["Status"] for *_, h in ref["idle heartbeats"]] == ["100", "100", "100", "408"]


# -- acks and consumer state ----------------------------------------------------------------------


def core(info: dict[str, Any]) -> dict[str, Any]:
    keys = ("delivered", "ack_floor", "num_ack_pending", "num_redelivered", "num_pending", "num_waiting")
    out: dict[str, Any] = normalize({k: info.get(k) for k in keys})
    return out


async def test_acks_and_consumer_info(servers: dict[str, Proc]) -> None:
    async def scenario(nc: Client) -> dict[str, Any]:
        await api(nc, "STREAM.CREATE.Q", {"name": "Q", "subjects": ["q.>"], "storage": "file"})
        for i in range(10):
            await nc.publish(f"q.{i % 3}", f"m{i}".encode())
        await nc.flush()
        out: dict[str, Any] = {}
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)

        async def fetch(consumer: str, n: int, req: Any) -> list[Any]:
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.Q.{consumer}", body(req), reply=inbox)
            return [await sub.next_msg(timeout=2) for _ in range(n)]

        async def info(consumer: str) -> dict[str, Any]:
            return core(await api(nc, f"CONSUMER.INFO.Q.{consumer}"))

        await api(nc, "CONSUMER.CREATE.Q.I", cfg("Q", durable_name="I", ack_policy="explicit", max_deliver=3))
        msgs = await fetch("I", 5, {"batch": 5, "no_wait": True})
        out["replies"] = [_msg(m, inbox)[1] for m in msgs]
        await nc.publish(msgs[0].reply, b"+ACK")
        confirm = await nc.request(msgs[2].reply, b"+ACK", timeout=2)  # the double ack
        out["double ack"] = (confirm.data, confirm.headers)
        await nc.publish(msgs[1].reply, b"-NAK")
        await nc.publish(msgs[3].reply, b"+TERM")
        await nc.publish(msgs[4].reply, b"+WPI")
        await nc.flush()
        await asyncio.sleep(0.1)  # the same race as below, for acks that have no confirmation here
        out["after ack/nak/term/wpi"] = await info("I")
        again = await fetch("I", 1, {"batch": 1, "no_wait": True})
        out["redelivery"] = _msg(again[0], inbox)[1]
        out["after redelivery"] = await info("I")
        # a double ack: nats-server handles acks off its read loop, so an info right after a
        # plain ack can race it; the confirmation says the ack was applied
        await nc.request(again[0].reply, b"+ACK", timeout=2)
        out["floor moves"] = await info("I")
        nxt_inbox = nc.new_inbox()
        nxt_sub = await nc.subscribe(nxt_inbox)
        await nc.publish(msgs[4].reply, b"+NXT", reply=nxt_inbox)
        nxt = await nxt_sub.next_msg(timeout=2)
        out["+NXT"] = _msg(nxt, nxt_inbox)
        out["after +NXT"] = await info("I")
        waiting = nc.new_inbox()
        await nc.subscribe(waiting)
        await nc.publish(
            "$JS.API.CONSUMER.MSG.NEXT.Q.I", body({"batch": 50, "expires": 2_000_000_000}), reply=waiting
        )
        await nc.flush()
        await asyncio.sleep(0.2)
        out["waiting request"] = await info("I")

        await api(nc, "CONSUMER.CREATE.Q.AA", cfg("Q", durable_name="AA", ack_policy="all"))
        ms = await fetch("AA", 6, {"batch": 6, "no_wait": True})
        await nc.request(ms[3].reply, b"+ACK", timeout=2)
        out["ack all"] = await info("AA")
        await nc.request(ms[1].reply, b"+ACK", timeout=2)
        out["ack all below the floor"] = await info("AA")

        await api(nc, "CONSUMER.CREATE.Q.NN", cfg("Q", durable_name="NN", ack_policy="none"))
        await fetch("NN", 4, {"batch": 4, "no_wait": True})
        out["ack none"] = await info("NN")

        await api(
            nc, "CONSUMER.CREATE.Q.F", cfg("Q", durable_name="F", ack_policy="explicit", filter_subject="q.1")
        )
        ms = await fetch("F", 2, {"batch": 2, "no_wait": True})
        out["filtered replies"] = [_msg(m, inbox)[1] for m in ms]
        await nc.request(ms[1].reply, b"+ACK", timeout=2)
        out["filtered, ack above the floor"] = await info("F")
        await nc.request(ms[0].reply, b"+ACK", timeout=2)
        out["filtered, ack at the floor"] = await info("F")
        return out

    ref, jp = await on_both(servers, scenario)
    for k in ref:
        assert ref[k] == jp[k], f"{k}\nreference: {ref[k]}\njetpy:     {jp[k]}"
    assert ref["double ack"] == (b"", None)
    assert ref["after redelivery"]["num_redelivered"] == 1


async def test_advisory_fields(servers: dict[str, Proc]) -> None:
    """The consumer advisories carry the same fields (terminated's ``reason`` is 2.11's)."""

    async def scenario(nc: Client) -> dict[str, list[str]]:
        seen: dict[str, list[str]] = {}

        async def on_event(msg: Any) -> None:
            adv = json.loads(msg.data)
            seen[msg.subject] = sorted(adv)
            assert adv["type"].startswith("io.nats.jetstream.advisory.v1.")

        await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.>", cb=on_event)
        await api(nc, "STREAM.CREATE.AD", {"name": "AD", "subjects": ["ad"], "storage": "memory"})
        for i in range(3):
            await nc.publish("ad", b"%d" % i)
        await api(
            nc, "CONSUMER.CREATE.AD.C", cfg("AD", durable_name="C", ack_policy="explicit", max_deliver=1)
        )
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.AD.C", body({"batch": 3, "no_wait": True}), reply=inbox)
        m1, m2, _ = [await sub.next_msg(timeout=2) for _ in range(3)]
        await nc.request(m1.reply, b"-NAK", timeout=2)
        await nc.request(m2.reply, b"+TERM", timeout=2)
        # nats-server 2.9 gives up on the naked message when it next tries to deliver it
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.AD.C", body({"batch": 1, "no_wait": True}), reply=inbox)
        await nc.flush()

        async def until(n: int) -> None:
            for _ in range(50):
                if len(seen) >= n:
                    return
                await asyncio.sleep(0.05)

        # nats-server handles that pull request on its own goroutine: a DELETE sent at once can
        # overtake it, and MAX_DELIVERIES never comes
        await until(4)
        await api(nc, "CONSUMER.DELETE.AD.C")
        await until(5)
        return seen

    ref, jp = await on_both(servers, scenario)
    want = sorted(
        f"$JS.EVENT.ADVISORY.CONSUMER.{e}.AD.C"
        for e in ("CREATED", "MSG_NAKED", "MSG_TERMINATED", "MAX_DELIVERIES", "DELETED")
    )
    assert sorted(jp) == want, "jetpy"
    assert sorted(ref) == want, "reference"
    assert ref == jp
