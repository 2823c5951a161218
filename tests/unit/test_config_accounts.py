"""The accounts block, system_account and mappings: what they become in ``ServerOptions`` and
nats-server's error texts for what is wrong (the verdicts are compared with nats-server -t in
tests/differential/test_config_reference.py)."""

from __future__ import annotations

import pytest

from jetpy.jetstream.models import AccountLimits
from jetpy.server.conf_format import ConfigError, parse_config_text
from jetpy.server.config import apply_config, validate_options
from jetpy.server.options import Export, Import, Mapping, MappingDestination, ServerOptions


def options(text: str) -> ServerOptions:
    opts, warnings = apply_config(parse_config_text(text, "t.conf"))
    assert warnings == []
    return opts


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        validate_options(options(text))
    return str(e.value)


def test_accounts_become_options() -> None:
    opts = options(
        """
        authorization { users: [{user: g, password: g}] }
        accounts {
          A: {
            users: [{user: a, password: a}, {user: p, password: p, permissions: {publish: "x"}}]
            default_permissions: { subscribe: "_INBOX.>" }
            jetstream: { max_mem: 1K, max_file: 2K, streams: 3, consumers: 4, max_ack_pending: 5,
                         mem_max_stream_bytes: 6, disk_max_stream_bytes: 7, max_bytes: true }
            exports: [{stream: "s.>", accounts: [B]}, {service: "v", response: chunked, threshold: "2s"}]
            mappings: { "m.*": "n.$1" }
          }
          B: { users: [{user: b, password: b}], jetstream: enabled,
               imports: [{stream: {account: A, subject: "s.x"}, prefix: p}, {service: {account: A, subject: v}, to: w}] }
          C: {}
        }
        system_account: C
        mappings { top: [{destination: t1, weight: 25%, cluster: east}, {dest: t2, weight: "75"}] }
        """
    )
    a, b, c = opts.accounts
    assert a.jetstream == AccountLimits(1000, 2000, 3, 4, 5, 6, 7, True)
    assert a.exports == (Export("stream", "s.>", ("B",)), Export("service", "v", None, "chunked", 2.0))
    assert a.mappings == (Mapping("m.*", (MappingDestination("n.$1"),)),)
    assert b.jetstream == AccountLimits() and c.jetstream is None
    assert b.imports == (Import("stream", "A", "s.x", prefix="p"), Import("service", "A", "v", to="w"))
    by_user = {u.user: u for u in opts.users}
    assert {u: by_user[u].account for u in by_user} == {"g": "$G", "a": "A", "p": "A", "b": "B"}
    assert by_user["a"].permissions == {"subscribe": {"allow": ["_INBOX.>"]}}  # the account's default
    assert by_user["p"].permissions == {"publish": {"allow": ["x"]}}
    assert opts.system_account == "C"
    assert opts.mappings == (
        Mapping("top", (MappingDestination("t1", 25, "east"), MappingDestination("t2", 75))),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'accounts { A: { imports: [{stream: {account: X, subject: "foo"}}] } }',
            '"X" account not defined for stream import',
        ),
        (
            "accounts { A: { exports: [{stream: foo, accounts: [C]}] }, "
            "B: { imports: [{stream: {account: A, subject: foo}}] }, C: {} }",
            'Error adding stream import "foo": stream import not authorized',
        ),
        (
            "accounts { A: { exports: [{service: foo}] }, B: { imports: [{service: {account: A, subject: bar}}] } }",
            'Error adding service import "bar": service import not authorized',
        ),
        (
            "accounts { A: { exports: [{service: foo}], imports: [{service: {account: B, subject: foo}}] }, "
            "B: { exports: [{service: foo}], imports: [{service: {account: A, subject: foo}}] } }",
            'Error adding service import "foo": import forms a cycle',
        ),
        (
            "accounts { A: { exports: [{stream: a}], imports: [{stream: {account: B, subject: b}, to: a}] }, "
            "B: { exports: [{stream: b}], imports: [{stream: {account: A, subject: a}, to: b}] } }",
            'Error adding stream import "b": import forms a cycle',
        ),
        (
            "accounts { A: { users: [{user: a, password: a}] }, B: { users: [{user: a}] } }",
            'Duplicate user "a" detected',
        ),
        ("accounts { A: {} }\nsystem_account: X", "error resolving system account: account missing"),
        (
            "jetstream: enabled\naccounts { S: { jetstream: enabled } }\nsystem_account: S",
            "Not allowed to enable JetStream on the system account",
        ),
        (
            "accounts { A: { users: [{user: a, password: a}] } }\nno_auth_user: b",
            'no_auth_user: "b" not present as user in authorization block or account configuration',
        ),
        (
            'mappings { "foo.*": "bar.$2" }',
            'Error adding mapping for "foo.*" to "bar.$2" : invalid mapping destination: wildcard index out of range in $2: [2]',
        ),
        (
            "mappings { foo: [{destination: a, weight: 60%}, {destination: b, weight: 50%}] }",
            'Error adding mapping for "foo" : total weight needs to be <= 100',
        ),
        ("mappings { foo: [{destination: bar}] }", 'Missing weight for mapping destination "bar"'),
        (
            "accounts { A: { exports: [{service: foo, response_type: bogus}] } }",
            'Unknown response type: "bogus"',
        ),
        (
            "accounts { A: { exports: [{stream: foo, response_type: stream}] } }",
            "Detected response directive on non-service",
        ),
        ("accounts { A: { foo: 1 } }", 'unknown field "foo"'),
        ("jetstream { domain: a.b }", "invalid domain name: may not contain ., * or >"),
    ],
)
def test_nats_servers_errors(text: str, message: str) -> None:
    assert message in error_of(text)


@pytest.mark.parametrize(
    "text",
    [
        'accounts { A: { nkey: "AB" } }',
        "accounts { A: { limits: { max_connections: 1 } } }",
        "jetstream: enabled\naccounts { A: { jetstream: { cluster_traffic: owner } } }",
        'accounts { A: { exports: [{service: foo, latency: "lat"}] } }',
        "accounts { A: { exports: [{service: foo}] }, B: { imports: [{service: {account: A, subject: foo}, share: true}] } }",
    ],
)
def test_what_is_not_built_is_refused_by_name(text: str) -> None:
    assert "is not supported by jetpy yet" in error_of(text)


def test_unused_prefixes_and_both_forms_are_refused() -> None:
    # nats-server takes them and uses one or none; jetpy refuses what it would not use
    assert '"prefix" applies to stream imports only' in error_of(
        "accounts { A: { exports: [{service: foo}] }, B: { imports: [{service: {account: A, subject: foo}, prefix: p}] } }"
    )
    assert "A stream import takes a prefix or a to, not both" in error_of(
        "accounts { A: { exports: [{stream: foo}] }, B: { imports: [{stream: {account: A, subject: foo}, prefix: p, to: t}] } }"
    )


def test_the_global_account_is_not_an_accounts_entry() -> None:
    assert "global account" in error_of("accounts { $G: {} }")


def test_accounts_with_a_gateway_are_accepted() -> None:
    # every account crosses the gateways in its own name (tests/integration/test_gateway_accounts.py)
    gateway = "gateway { name: A, port: -1 }\n"
    opts = options(gateway + "accounts { X: {}, Y: {}, SYS: {} }\nsystem_account: SYS")
    validate_options(opts)
    assert opts.gateway.name == "A" and [a.name for a in opts.accounts] == ["X", "Y", "SYS"]
