"""Gateway wire values and the gateway {} block: the INFO and CONNECT jetpy writes (checked
against what nats-server 2.15.1 wrote on loopback), the interest-mode commands, the reply hashes
(nats-server's for cluster "A" and "B"), and the block's values and errors."""

from __future__ import annotations

import json

import pytest

from jetpy.protocol import ProtocolError
from jetpy.protocol.gateway_wire import (
    CMD_ALL_SUBS_START,
    account_line,
    command_line,
    connect_line,
    decode_gateway_connect,
    decode_gateway_info,
    gossip_line,
    gw_hash,
    info_line,
    old_hash,
    routed_reply,
)
from jetpy.server.conf_format import ConfigError, parse_config_text
from jetpy.server.config import apply_config, validate_options
from jetpy.server.options import RemoteGateway, ServerOptions


def test_reply_hashes_are_nats_servers() -> None:
    # seen on the wire between two nats-server 2.15.1 clusters named A and B
    assert gw_hash("A") == b"NUmM6c"
    assert gw_hash("B") == b"b2oh2L"
    assert len(old_hash("A")) == 4
    assert routed_reply(b"_GR_.NUmM6c.97KzxT._INBOX.x.y") == (b"NUmM6c", b"97KzxT", b"_INBOX.x.y")
    assert routed_reply(b"$GR.abcd._INBOX.x") == (b"abcd", b"", b"_INBOX.x")
    assert routed_reply(b"_INBOX.x") is None
    assert routed_reply(b"_GR_.short") is None


def test_info_as_nats_server_writes_it() -> None:
    line = info_line(
        server_id="NID",
        server_name="A1",
        version="2.10.0",
        host="127.0.0.1",
        port=17222,
        max_payload=1048576,
        gateway="A",
        gateway_urls=["127.0.0.1:17222"],
        gateway_url="127.0.0.1:17222",
    )
    assert line.endswith(b"}\r\n")  # no space before CRLF, unlike a route's INFO
    doc = json.loads(line[5:])
    assert list(doc) == [
        "server_id",
        "server_name",
        "version",
        "proto",
        "go",
        "host",
        "port",
        "headers",
        "max_payload",
        "gateway",
        "gateway_urls",
        "gateway_url",
        "gateway_nrp",
        "gateway_iom",
    ]
    info = decode_gateway_info(line[5:-2])
    assert (
        info.gateway == "A"
        and info.gateway_iom
        and info.gateway_nrp
        and info.gateway_urls == ("127.0.0.1:17222",)
    )


def test_connect_and_commands() -> None:
    line = connect_line(server_id="NID", gateway="A")
    assert line == (
        b'CONNECT {"echo":false,"verbose":false,"pedantic":false,"tls_required":false,'
        b'"headers":false,"name":"NID","cluster":"","gateway":"A"}\r\n'
    )
    c = decode_gateway_connect(line[8:-2])
    assert (c.name, c.gateway, c.user) == ("NID", "A", "")
    # what nats-server 2.15.1 sent to switch $G to interest-only
    cmd = command_line("B", CMD_ALL_SUBS_START, b"$G")
    assert cmd == (
        b'INFO {"server_id":"","server_name":"","version":"","proto":0,"go":"","host":"","port":0,'
        b'"headers":false,"max_payload":0,"gateway":"B","gateway_cmd":2,"gateway_cmd_payload":"JEc="}\r\n'
    )
    assert decode_gateway_info(cmd[5:-2]).gateway_cmd_payload == "$G"
    assert b'"gateway_cmd":1' in gossip_line("C", ["127.0.0.1:1"], server_id="GWX")
    assert account_line(b"$G", False) == b"A- $G\r\n" and account_line(b"$G", True) == b"A+ $G\r\n"
    with pytest.raises(ProtocolError):
        decode_gateway_info(b'{"gateway":"B","gateway_cmd":2,"gateway_cmd_payload":"!!"}')


def _options(text: str) -> ServerOptions:
    opts, _warnings = apply_config(parse_config_text(text, "t.conf", env={}))
    return opts


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        validate_options(_options(text))
    return str(info.value)


def test_gateway_block() -> None:
    opts = _options(
        'gateway { name: A, listen: "127.0.0.1:7222", advertise: "a.example:7222", connect_retries: 3,'
        " reject_unknown_cluster: true, authorization { user: gw, password: pw, timeout: 1.5 },"
        ' gateways: [ {name: B, urls: ["nats://b1:7222", "nats://b2:7222"]}, {name: C, url: "nats://c:7222"} ] }'
    )
    g = opts.gateway
    assert (g.name, g.host, g.port, g.advertise, g.connect_retries, g.reject_unknown) == (
        "A",
        "127.0.0.1",
        7222,
        "a.example:7222",
        3,
        True,
    )
    assert (g.username, g.password, g.auth_timeout) == ("gw", "pw", 1.5)
    assert g.gateways == [
        RemoteGateway("B", ("nats://b1:7222", "nats://b2:7222")),
        RemoteGateway("C", ("nats://c:7222",)),
    ]
    assert g.enabled and "pw" not in repr(g)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("gateway { port: 7222 }", "gateway has no name"),
        ("gateway { name: A }", 'gateway "A" has no port specified (select -1 for random port)'),
        (
            'gateway { name: A, port: -1, gateways: [ {urls: ["nats://b:1"]} ] }',
            "gateway in the list 0 has no name",
        ),
        ("gateway { name: A, port: -1, gateways: [ {name: B} ] }", 'gateway "B" has no URL'),
        (
            "gateway { name: A, port: -1 }\njetstream: true",
            "JetStream in a super cluster is not supported yet",
        ),
    ],
)
def test_gateway_checks(text: str, error: str) -> None:
    assert error in _error(text)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "gateway { name: A, port: 1, authorization { token: t } }",
            "Gateway authorization does not support tokens",
        ),
        (
            "gateway { name: A, port: 1, authorization { users: [] } }",
            "Gateway authorization does not allow multiple users",
        ),
        (
            "gateway { name: A, port: 1, permissions: {} }",
            'field "permissions" is not supported by jetpy yet',
        ),
        ("gateway { name: A, port: 1, bogus: 1 }", 'unknown field "bogus"'),
        ("gateway: 1", "Expected gateway to be a map, got int64"),
        (
            'gateway { name: A, port: 1, gateways: [ {name: B, urls: ["nope"]} ] }',
            "error parsing gateway url",
        ),
    ],
)
def test_gateway_block_errors(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as info:
        _options(text)
    assert error in str(info.value)
