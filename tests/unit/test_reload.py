"""The reload table: every option is in it, reloadable ones yield nats-server's lines, the first
option that cannot change refuses the reload with nats-server's wording."""

from __future__ import annotations

import dataclasses

import pytest

from jetpy.jetstream.models import AccountLimits
from jetpy.server.options import AccountOptions, Export, Mapping, MappingDestination, ServerOptions, User
from jetpy.server.reload import OPTIONS, ReloadError, diff_options


def test_every_option_is_in_the_table() -> None:
    # an option missing here would be changed by a reload without anyone noticing
    assert {f.name for f in dataclasses.fields(ServerOptions)} == {o.attr for o in OPTIONS}


def test_reloadable_changes_read_as_nats_servers_lines() -> None:
    old = ServerOptions()
    new = dataclasses.replace(
        old,
        max_payload=2000,
        ping_interval=30.0,
        write_deadline=2.5,
        debug=True,
        users=[User("alice", "pw")],
        auth_timeout=3.0,
        port=-1,  # a random port in the file: the running port stays
    )
    assert [line for _, line in diff_options(old, new)] == [
        "Reloaded: debug = true",
        "Reloaded: authorization users",
        "Reloaded: ping_interval = 30s",
        "Reloaded: authorization timeout = 3",
        "Reloaded: max_payload = 2000",
        "Reloaded: write_deadline = 2.5s",
    ]
    assert diff_options(old, dataclasses.replace(old)) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_pending": 10 * 1024 * 1024}, "MaxPending: old=67108864, new=10485760"),
        ({"host": "127.0.0.1"}, "Host: old=0.0.0.0, new=127.0.0.1"),
        ({"port": 4333}, "Port: old=4222, new=4333"),
        ({"lame_duck_duration": 40.0}, "LameDuckDuration: old=2m0s, new=40s"),
        ({"jetstream": True}, "JetStream: old=false, new=true"),
        # the first in nats-server's Options order is named, whatever else changed
        ({"max_payload": 5, "http_port": 8222, "server_name": "x"}, "ServerName: old=, new=x"),
    ],
)
def test_what_cannot_change_refuses_the_whole_reload(change: dict[str, object], message: str) -> None:
    with pytest.raises(ReloadError) as e:
        diff_options(ServerOptions(), dataclasses.replace(ServerOptions(), **change))  # type: ignore[arg-type]
    assert str(e.value) == f"config reload not supported for {message}"


def test_mappings_reload_and_the_rest_of_the_accounts_block_is_refused() -> None:
    to_a = (Mapping("foo", (MappingDestination("bar"),)),)
    to_b = (Mapping("foo", (MappingDestination("baz"),)),)
    old = dataclasses.replace(ServerOptions(), accounts=[AccountOptions("A", mappings=to_a)])
    new = dataclasses.replace(old, accounts=[AccountOptions("A", mappings=to_b)], mappings=to_b)
    assert [(opt.attr, line) for opt, line in diff_options(old, new)] == [
        ("accounts", "Reloaded: accounts"),
        ("mappings", "Reloaded: accounts"),
    ]
    for other in (
        [AccountOptions("A", mappings=to_a, exports=(Export("stream", "x"),))],
        [AccountOptions("A", mappings=to_a), AccountOptions("B")],
        [AccountOptions("A", mappings=to_b, jetstream=AccountLimits())],
    ):
        with pytest.raises(ReloadError) as e:
            diff_options(old, dataclasses.replace(old, accounts=other))
        assert str(e.value).startswith(
            "config reload not supported for Accounts: only the accounts' mappings"
        )


def test_the_encryption_settings_cannot_change_and_the_key_is_never_shown() -> None:
    old = dataclasses.replace(ServerOptions(), js_key="old-secret-key")
    with pytest.raises(ReloadError) as info:
        diff_options(old, dataclasses.replace(old, js_key="new-secret-key"))
    assert str(info.value) == ("config reload not supported for JetStreamKey: old=[REDACTED], new=[REDACTED]")
    with pytest.raises(ReloadError, match="JetStreamCipher: old=, new=aes"):
        diff_options(old, dataclasses.replace(old, js_cipher="aes"))
    with pytest.raises(ReloadError, match=r"JetStreamOldKey: old=, new=\[REDACTED\]"):
        diff_options(old, dataclasses.replace(old, js_prev_key="x"))
