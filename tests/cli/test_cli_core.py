"""`jetpy pub`, `sub`, `request`, `reply` as subprocesses against jetpy (core NATS, no JetStream)."""

from __future__ import annotations

import json

from cli.conftest import finish, run_cli, run_many, start_cli, wait_ready
from conftest import Proc


def test_pub_with_count_and_templates_reaches_a_subscriber(jetpy: Proc) -> None:
    url = jetpy.url
    sub = start_cli(url, "sub", "greet.*", "--count", "3", "--json", "--wait", "20s")
    wait_ready(sub, b"Subscribing on greet.*")
    pub = run_cli(url, "pub", "greet.world", "n={{Count}} id={{ID}}", "--count", "3", "-H", "X-Test:yes")
    assert pub.code == 0 and "Published 3 messages" in pub.out, pub
    got = finish(sub)
    assert got.code == 0, got
    msgs = [json.loads(line) for line in got.out.splitlines()]
    assert [m["data"].split()[0] for m in msgs] == ["n=1", "n=2", "n=3"]
    assert len({m["data"].split()[1] for m in msgs}) == 3  # {{ID}} differs per message
    assert all(m["subject"] == "greet.world" and m["headers"] == {"X-Test": "yes"} for m in msgs)


def test_sub_text_output_stdin_body_and_queue_groups(jetpy: Proc) -> None:
    url = jetpy.url
    a = start_cli(url, "sub", "work", "--queue", "q", "--wait", "3s")
    b = start_cli(url, "sub", "work", "--queue", "q", "--wait", "3s")
    wait_ready(a, b"Subscribing")
    wait_ready(b, b"Subscribing")
    p = run_cli(url, "pub", "work", "--count", "10", input=b"from stdin")
    assert p.code == 0, p
    ra, rb = finish(a), finish(b)
    assert ra.code == 0 and rb.code == 0
    got = ra.out.count("Received on 'work'") + rb.out.count("Received on 'work'")
    assert got == 10  # a queue group: each message to exactly one member
    assert "from stdin" in ra.out + rb.out


def test_sub_wait_with_too_few_messages_fails(jetpy: Proc) -> None:
    r = run_cli(jetpy.url, "sub", "quiet.subject", "--count", "1", "--wait", "300ms")
    assert r.code == 1
    assert (
        r.err.strip().splitlines()[-1]
        == "jetpy: error: received 0 of 1 messages on 'quiet.subject' within 300ms"
    )


def test_request_and_reply(jetpy: Proc) -> None:
    url = jetpy.url
    rep = start_cli(url, "reply", "svc.time", "pong {{Count}}: {{Request}}", "--count", "2", "--wait", "20s")
    wait_ready(rep, b"Listening on")
    one, two = run_many(
        url, ["request", "svc.time", "ping", "--raw"], ["request", "svc.time", "hello", "--json"]
    )
    assert one.code == 0 and two.code == 0, (one, two)
    bodies = {one.out.strip(), json.loads(two.out)["data"]}
    assert bodies in ({"pong 1: ping", "pong 2: hello"}, {"pong 2: ping", "pong 1: hello"})
    done = finish(rep)
    assert done.code == 0 and done.out.count("Received on 'svc.time'") == 2

    echo = start_cli(url, "reply", "svc.echo", "--echo", "--count", "1", "--wait", "20s")
    wait_ready(echo, b"Listening on")
    r = run_cli(url, "request", "svc.echo", "same back", "-H", "K:v", "--json")
    doc = json.loads(r.out)
    assert doc["data"] == "same back" and doc["headers"] == {"K": "v"}
    assert finish(echo).code == 0


def test_request_without_responders_and_timeouts(jetpy: Proc) -> None:
    url = jetpy.url
    (none,) = run_many(url, ["request", "nobody.home", "x"])
    assert none.code == 1
    assert none.err.strip() == "jetpy: error: no responders available for request on 'nobody.home'"
    silent = start_cli(url, "sub", "silent.svc", "--count", "1", "--wait", "20s")
    wait_ready(silent, b"Subscribing")
    r = run_cli(url, "--timeout", "0.3", "request", "silent.svc", "x")
    assert r.code == 1 and "timed out after 0.3s" in r.err
    assert finish(silent).code == 0  # the request did reach the subscriber, which never answered
