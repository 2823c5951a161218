"""The cluster flags and the ``cluster {}`` block: nats-server's names, values, precedence and
errors (texts observed with nats-server 2.9.10 and 2.15.1), what jetpy refuses until built, and
that passwords never reach a printed configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from certs import make_pki
from jetpy.server.config import ConfigError, load_config
from jetpy.server.config_cluster import cluster_size
from jetpy.server.flags import parse_args
from jetpy.server.options import ClusterOptions, ServerOptions
from jetpy.server.reload import ReloadError, diff_options


def opts_of(*argv: str) -> ServerOptions:
    return parse_args(list(argv)).options


def config_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.conf"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        parse_args(["-c", str(path)])
    return str(info.value)


def test_cluster_flags() -> None:
    o = opts_of(
        "--cluster",
        "nats://ruser:pw@127.0.0.1:6222",
        "--cluster_name",
        "C1",
        "--routes",
        "nats-route://10.0.0.2:6222, nats-route://10.0.0.3:6222",
        "--cluster_advertise",
        "10.0.0.1:6222",
        "--no_advertise",
        "--connect_retries",
        "5",
    )
    assert o.cluster == ClusterOptions(
        name="C1",
        host="127.0.0.1",
        port=6222,
        routes=["nats-route://10.0.0.2:6222", "nats-route://10.0.0.3:6222"],
        username="ruser",
        password="pw",
        advertise="10.0.0.1:6222",
        no_advertise=True,
        connect_retries=5,
    )
    assert o.cluster.enabled
    assert opts_of("--cluster_listen", "nats://0.0.0.0:-1").cluster.port == -1  # a random port
    assert not opts_of().cluster.enabled


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--routes", "nats://127.0.0.1:5555"],
            "solicited routes require cluster capabilities, e.g. --cluster",
        ),
        (["--cluster", "nats://u@127.0.0.1:-1"], "expected cluster password to be set"),
        (["--cluster", "foo"], "missing port in address"),
        (["--cluster", "nats://127.0.0.1:-1", "--cluster_name", "a b"], "cluster name cannot contain spaces"),
        (
            ["--cluster", "nats://127.0.0.1:-1", "-js"],
            "jetstream cluster requires `server_name` to be set",
        ),
        (["--cluster", "nats://127.0.0.1:-1", "--routes", "nats-route://hostonly"], "missing host or port"),
    ],
)
def test_flag_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_args(argv)
    assert message in str(info.value)


def test_the_cluster_block(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    path.write_text(
        """
        cluster {
          name: C1
          listen: 127.0.0.1:6222
          routes: [nats-route://a:6222, nats-route://b:6222]
          authorization { user: ruser, password: "s3cret", timeout: 0.5 }
          advertise: "10.1.1.1:6222"
          no_advertise: true
          connect_retries: 3
          pool_size: -1
          compression: off
        }
        """
    )
    opts, warnings = load_config(str(path))
    assert warnings == []
    assert opts.cluster == ClusterOptions(
        name="C1",
        host="127.0.0.1",
        port=6222,
        routes=["nats-route://a:6222", "nats-route://b:6222"],
        username="ruser",
        password="s3cret",
        auth_timeout=0.5,
        advertise="10.1.1.1:6222",
        no_advertise=True,
        connect_retries=3,
    )
    # host and port as separate keys; flags win over the file
    path.write_text("cluster { host: 127.0.0.1, port: 7222, authorization { user: a, password: b } }")
    o = parse_args(["-c", str(path), "--cluster", "nats://0.0.0.0:8222"]).options
    assert (o.cluster.host, o.cluster.port) == ("0.0.0.0", 8222)
    assert (o.cluster.username, o.cluster.password) == ("", "")  # nats-server: the flag's (none) win


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "cluster { port: -1, authorization { token: abc } }",
            "Cluster authorization does not support tokens",
        ),
        (
            "cluster { port: -1, authorization { users: [{user: a, password: b}] } }",
            "Cluster authorization does not allow multiple users",
        ),
        ("cluster { port: -1, nope: 1 }", 'unknown field "nope"'),
        ("cluster: 1", "Expected map to define cluster, got int64"),
        (
            "cluster { port: -1, permissions { import: a } }",
            'field "permissions" is not supported by jetpy yet',
        ),
        ("cluster { port: -1, accounts: [A] }", 'field "accounts" is not supported by jetpy yet'),
        ("cluster { port: -1, pool_size: 3 }", "route pooling"),
        ("cluster { port: -1, compression: s2_fast }", "route compression"),
        ("cluster { port: -1, ping_interval: 1s }", 'field "ping_interval" is not supported by jetpy yet'),
        ("jetstream: true\ncluster { port: -1 }", "jetstream cluster requires `server_name` to be set"),
        (
            "server_name: a\njetstream: true\ncluster { port: -1 }",
            "JetStream cluster requires configured routes or solicited leafnode for the system account",
        ),
        (
            "server_name: a\njetstream: true\nno_system_account: true\n"
            'cluster { port: -1, routes: ["nats://127.0.0.1:4248"] }',
            "clustered JetStream needs the system account (no_system_account is set)",
        ),
        (
            "server_name: a\njetstream: true\ncluster { port: -1 }\n"
            'leafnodes { remotes: [ { url: "nats://127.0.0.1:7422" } ] }',
            "clustered JetStream over a leaf node is not supported by jetpy",
        ),
    ],
)
def test_block_errors(tmp_path: Path, text: str, message: str) -> None:
    assert message in config_error(tmp_path, text)


def test_jetstream_with_a_cluster_is_clustered_jetstream(tmp_path: Path) -> None:
    """``-js`` with a cluster and a server name starts (clustered JetStream), in flags and in a
    config file alike."""
    o = opts_of(
        "-js", "--server_name", "n1", "--cluster", "nats://127.0.0.1:-1", "--routes", "nats://127.0.0.1:4248"
    )
    assert o.jetstream and o.cluster.enabled and o.server_name == "n1"
    path = tmp_path / "c.conf"
    path.write_text(
        'server_name: n2\njetstream { store_dir: "/tmp/x" }\n'
        'cluster { name: C, port: -1, routes: [ "nats-route://127.0.0.1:4248" ] }\n'
    )
    o, _ = load_config(str(path))
    assert o.jetstream and o.cluster.routes == ["nats-route://127.0.0.1:4248"]


def test_accounts_with_jetstream_and_limits_on_a_cluster_load(tmp_path: Path) -> None:
    """A cluster serves every account's JetStream: an account with JetStream, and its limits,
    load as a single server's do."""
    path = tmp_path / "c.conf"
    path.write_text(
        "server_name: n1\njetstream: enabled\n"
        'cluster { name: C, port: -1, routes: [ "nats-route://127.0.0.1:4248" ] }\n'
        "accounts {\n"
        "  A: { jetstream: enabled, users: [ {user: a, password: a} ] }\n"
        "  B: { jetstream { max_mem: 1M, max_file: 2M, max_streams: 2, max_consumers: 3 },"
        " users: [ {user: b, password: b} ] }\n"
        "}\n"
    )
    o, _ = load_config(str(path))
    limits = {a.name: a.jetstream for a in o.accounts}
    assert limits["A"] is not None
    b = limits["B"]
    assert b is not None
    assert (b.max_memory, b.max_storage, b.max_streams, b.max_consumers) == (1_000_000, 2_000_000, 2, 3)


def test_a_duplicate_route_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    path.write_text('cluster { port: -1, routes: [ "nats://127.0.0.1:1", "nats://127.0.0.1:1" ] }\n')
    opts, warnings = load_config(str(path))
    assert opts.cluster.routes == ["nats://127.0.0.1:1"]
    assert warnings == [
        f'{path}:1:53: invalid use of field "nats://127.0.0.1:1": Duplicate route entry detected'
    ]


def test_passwords_are_not_printed() -> None:
    c = ClusterOptions(port=1, username="u", password="hunter2", routes=["nats-route://r:pw2@h:6222"])
    assert "hunter2" not in repr(c) and "pw2" not in str(c)
    assert "nats-route://r:[REDACTED]@h:6222" in repr(c)


def test_a_reload_may_not_change_the_cluster() -> None:
    old = ServerOptions(cluster=ClusterOptions(port=6222, name="C1"))
    new = ServerOptions(cluster=ClusterOptions(port=6222, name="C2"))
    assert diff_options(old, old) == []
    with pytest.raises(ReloadError) as info:
        diff_options(old, new)
    assert str(info.value).startswith("config reload not supported for Cluster: old=ClusterOptions(name='C1'")


def test_the_cluster_tls_block(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    files = f'cert_file: "{pki.route_cert}", key_file: "{pki.route_key}", ca_file: "{pki.ca}"'
    path = tmp_path / "c.conf"
    path.write_text(f"cluster {{ port: -1, tls {{ {files}, verify: true, timeout: 3 }} }}")
    tls = load_config(str(path))[0].cluster.tls
    assert tls is not None and (tls.verify, tls.timeout, tls.cert_file) == (True, 3.0, str(pki.route_cert))
    for extra, message in (
        ("handshake_first: true", 'field "handshake_first" does not apply to routes'),
        ("verify_and_map: true", 'field "verify_and_map" is not supported by jetpy yet'),
        ("insecure: true", 'field "insecure" is not supported by jetpy yet'),
    ):
        assert message in config_error(tmp_path, f"cluster {{ port: -1, tls {{ {files}, {extra} }} }}")
    assert "missing 'key_file' in TLS configuration" in config_error(
        tmp_path, f'cluster {{ port: -1, tls {{ cert_file: "{pki.route_cert}" }} }}'
    )


def test_cluster_size_counts_the_routes_servers_once() -> None:
    """The servers a server's routes name, itself included once: by its own route port, or by a
    route found to reach itself under another address."""
    c = ClusterOptions(
        host="0.0.0.0",
        port=6222,
        routes=["nats-route://10.0.0.1:6222", "nats-route://10.0.0.2:6222", "nats-route://10.0.0.3:6222"],
    )
    assert cluster_size(c) == 4  # which of them is this server is not known yet
    assert cluster_size(c, {"nats-route://10.0.0.1:6222"}) == 3
    assert cluster_size(ClusterOptions(port=6222, routes=["nats://127.0.0.1:6222", "nats://h:6223"])) == 2
    assert cluster_size(ClusterOptions(port=6223, routes=["nats://seed:6222"])) == 2
    assert cluster_size(ClusterOptions(port=6222)) == 1
