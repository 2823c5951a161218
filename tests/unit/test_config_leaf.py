"""The leafnodes {} block: its keys, nats-server's start-up checks, and what jetpy refuses by name."""

from __future__ import annotations

import pytest

from jetpy.protocol.leaf_wire import connect_line, decode_leaf_connect, decode_leaf_info, info_line
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import ConfigError, apply_config, validate_options
from jetpy.server.options import LeafRemote, ServerOptions


def options(text: str) -> ServerOptions:
    opts, warnings = apply_config(parse_config_text(text, "t.conf", env={}))
    assert warnings == []
    return opts


def error_of(text: str, start: bool = False) -> str:
    with pytest.raises(ConfigError) as info:
        opts = options(text)
        if start:
            validate_options(opts)
    return str(info.value)


def test_hub_block() -> None:
    lo = options(
        "leafnodes { listen: 127.0.0.1:7422, advertise: hub.example.com:7422, no_advertise: true,\n"
        "  authorization { user: leaf, password: s3cret, account: A, timeout: 3 } }\n"
        "accounts { A: {} }"
    ).leafnodes
    assert (lo.host, lo.port, lo.advertise, lo.no_advertise) == (
        "127.0.0.1",
        7422,
        "hub.example.com:7422",
        True,
    )
    assert (lo.username, lo.password, lo.account, lo.auth_timeout, lo.auth_set) == (
        "leaf",
        "s3cret",
        "A",
        3,
        True,
    )
    assert lo.enabled and "s3cret" not in repr(lo)


def test_hub_users_name_their_accounts() -> None:
    lo = options(
        "accounts { A: {}, B: {} }\n"
        "leafnodes { port: -1, authorization { users: [ {user: a, password: x, account: A}, {user: b, password: y} ] } }"
    ).leafnodes
    assert [(u.user, u.account) for u in lo.users] == [("a", "A"), ("b", "$G")]


def test_remotes() -> None:
    lo = options(
        'accounts { A: {} }\nleafnodes { reconnect: "250ms", remotes: [\n'
        '  { url: "nats://u:p@127.0.0.1:7422", account: A, deny_imports: ["secret.>"], deny_exports: "private" },\n'
        '  { urls: ["nats://h1:7422", "nats://h2:7422"], credentials: "/x.creds", hub: true } ] }'
    ).leafnodes
    assert lo.reconnect == 0.25 and lo.port == 0 and lo.enabled
    assert lo.remotes == [
        LeafRemote(
            ("nats://u:p@127.0.0.1:7422",), "A", deny_imports=("secret.>",), deny_exports=("private",)
        ),
        LeafRemote(("nats://h1:7422", "nats://h2:7422"), credentials="/x.creds", hub=True),
    ]
    assert "u:p@" not in repr(lo.remotes[0])
    assert options("leafnodes { reconnect: 2 }").leafnodes.reconnect == 2.0


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("leafnodes { foo: 1 }", 'unknown field "foo"'),
        ('leafnodes { remotes: [ { url: "nats://h:1", bogus: 1 } ] }', 'unknown field "bogus"'),
        ("leafnodes { port: -1, authorization { token: abc } }", 'unknown field "token"'),
        (
            'leafnodes { remotes: [ { url: "ws://h:1" } ] }',
            "websocket remotes are not supported by jetpy yet",
        ),
        (
            'leafnodes { remotes: [ { url: "nats://h:1", websocket: {} } ] }',
            'field "websocket" is not supported',
        ),
        ("leafnodes { port: -1, compression: s2_auto }", 'field "compression" is not supported by jetpy yet'),
        ('leafnodes { port: -1, min_version: "2.8.0" }', 'field "min_version" is not supported by jetpy yet'),
        ('leafnodes { remotes: [ { url: "nats://h:1", nkey: "SU..." } ] }', 'field "nkey" is not supported'),
        ('leafnodes { remotes: [ { url: "bogus" } ] }', "error parsing leafnode remote url"),
        ("leafnodes: 1", "Expected leafnodes to be a map"),
    ],
)
def test_refused(text: str, fragment: str) -> None:
    assert fragment in error_of(text)


def test_compression_off_is_fine() -> None:
    assert options("leafnodes { port: -1, compression: off }").leafnodes.port == -1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'leafnodes { remotes: [ { url: "nats://h:1", account: NOPE } ] }',
            'cannot find local account "NOPE" specified in leafnode remote',
        ),
        (
            "leafnodes { port: -1, authorization { users: [ {user: a, password: b, account: NOPE} ] } }",
            'cannot find local account "NOPE" specified in leafnode authorization',
        ),
        ("leafnodes { remotes: [ { account: A } ] }\naccounts { A: {} }", "leafnode remote has no url"),
    ],
)
def test_start_checks(text: str, message: str) -> None:
    assert error_of(text, start=True) == message


def test_wire_round_trip() -> None:
    line = connect_line(
        version="2.10.0", server_id="NID", name="leaf", cluster="L", user="u", password="p", deny_pub=("x",)
    )
    assert line.startswith(b"CONNECT {") and line.endswith(b"}\r\n")
    c = decode_leaf_connect(line[8:-2])
    assert (c.server_id, c.name, c.cluster, c.user, c.password, c.headers, c.deny_pub) == (
        "NID",
        "leaf",
        "L",
        "u",
        "p",
        True,
        ("x",),
    )
    info = info_line(
        server_id="S",
        server_name="hub",
        version="2.10.0",
        go="go",
        host="h",
        port=1,
        max_payload=10,
        client_id=3,
        nonce="abc",
        leafnode_urls=["h:1"],
    )
    i = decode_leaf_info(info[5:-3])
    assert (i.server_id, i.nonce, i.leafnode_urls, i.connect_info, i.headers) == (
        "S",
        "abc",
        ("h:1",),
        False,
        True,
    )
    after = decode_leaf_info(
        info_line(
            server_id="S",
            server_name="hub",
            version="v",
            go="go",
            host="h",
            port=1,
            max_payload=10,
            client_id=3,
            remote_account="$G",
        )[5:-3]
    )
    assert (after.connect_info, after.remote_account) == (True, "$G")


def test_a_reload_does_not_change_leaf_nodes() -> None:
    from jetpy.server.reload import ReloadError, diff_options

    old = options("leafnodes { port: 7422 }")
    new = options("leafnodes { port: 7423 }")
    with pytest.raises(ReloadError) as info:
        diff_options(old, new)
    assert "LeafNode" in str(info.value)
