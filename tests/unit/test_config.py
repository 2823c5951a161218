"""Config keys to ServerOptions: names, aliases, types, units, nats-server's checks and warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from certs import make_pki
from jetpy.server.conf_format import parse_config_text
from jetpy.server.config import (
    ConfigError,
    apply_config,
    load_config,
    parse_duration,
    validate_options,
)
from jetpy.server.options import DEFAULT_HOST, ServerOptions, User


def apply(text: str, opts: ServerOptions | None = None) -> tuple[ServerOptions, list[str]]:
    return apply_config(parse_config_text(text, "t.conf", env={}), opts)


def options(text: str) -> ServerOptions:
    opts, warnings = apply(text)
    assert warnings == []
    return opts


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        apply(text)
    return str(info.value)


# -- plain options ---------------------------------------------------------------------------


def test_empty_config_keeps_defaults() -> None:
    assert options("") == ServerOptions()


def test_core_options() -> None:
    opts = options("""
        host: 127.0.0.1
        port: 4333
        server_name: alpha
        client_advertise: "example.com:4222"
        max_payload: 2MB
        max_pending: 128MB
        max_connections: 100
        max_control_line: 8KB
        ping_interval: "30s"
        ping_max: 5
        write_deadline: "1.5s"
        lame_duck_duration: "45s"
        no_auth_user: nobody
        debug: true
        trace: on
        logtime: false
        log_file: /var/log/jetpy.log
        pid_file: /run/jetpy.pid
    """)
    assert (opts.host, opts.port, opts.server_name, opts.client_advertise) == (
        "127.0.0.1",
        4333,
        "alpha",
        "example.com:4222",
    )
    assert (opts.max_payload, opts.max_pending, opts.max_connections, opts.max_control_line) == (
        2 * 1024**2,
        128 * 1024**2,
        100,
        8192,
    )
    assert (opts.ping_interval, opts.ping_max, opts.write_deadline, opts.lame_duck_duration) == (
        30.0,
        5,
        1.5,
        45.0,
    )
    assert opts.no_auth_user == "nobody"
    assert (opts.debug, opts.trace, opts.logtime) == (True, True, False)
    assert (opts.log_file, opts.pid_file) == ("/var/log/jetpy.log", "/run/jetpy.pid")


@pytest.mark.parametrize(
    ("text", "attr", "value"),
    [
        ("net: 10.0.0.1", "host", "10.0.0.1"),
        ("max_conn: 7", "max_connections", 7),
        ("monitor_port: 8222", "http_port", 8222),
        ("http_port: 8223", "http_port", 8223),
        ("logfile: x.log", "log_file", "x.log"),
        ("pidfile: x.pid", "pid_file", "x.pid"),
        ("storedir: /data", "store_dir", "/data"),
        ("store_dir: /data", "store_dir", "/data"),
        ("trace_verbose: true", "trace", True),
        ("PORT: 5", "port", 5),
        ("Max_Payload: 1KB", "max_payload", 1024),
    ],
)
def test_aliases_and_case_insensitive_keys(text: str, attr: str, value: object) -> None:
    assert getattr(options(text), attr) == value


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [
        ("4333", DEFAULT_HOST, 4333),
        ('"127.0.0.1:4333"', "127.0.0.1", 4333),
        ("127.0.0.1:4333", "127.0.0.1", 4333),
        ("localhost:1", "localhost", 1),
        ('":4333"', DEFAULT_HOST, 4333),
        ('"[::1]:4333"', "::1", 4333),
        ('"0.0.0.0:-1"', "0.0.0.0", -1),
    ],
)
def test_listen(value: str, host: str, port: int) -> None:
    opts = options(f"listen: {value}")
    assert (opts.host, opts.port) == (host, port)


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [
        ("8222", "", 8222),
        ("127.0.0.1:8222", "127.0.0.1", 8222),
        ('"localhost:8000"', "localhost", 8000),
    ],
)
def test_http(value: str, host: str, port: int) -> None:
    opts = options(f"http: {value}")
    assert (opts.http_host, opts.http_port) == (host, port)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ('"localhost"', 'could not parse address string "localhost"'),
        ('"1.2.3.4:abc"', 'could not parse port "abc"'),
        ('"::1:4222"', "could not parse address string"),
        ("true", "expected a string"),
    ],
)
def test_listen_errors(value: str, fragment: str) -> None:
    message = error_of(f"listen: {value}")
    assert message.startswith("t.conf:1:1: ")
    assert fragment in message


# -- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("10s", 10.0),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5s", 1.5),
        ("-5s", -5.0),
        ("1us", 1e-6),
        ("1µs", 1e-6),
        ("100ns", 1e-7),
        ("+3s", 3.0),
        (".5s", 0.5),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "abc", "5x", "s", "1h 30m", "-", "."])
def test_parse_duration_errors(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_integer_durations_are_seconds_with_nats_server_warning() -> None:
    opts, warnings = apply("ping_interval: 30\nwrite_deadline: 5")
    assert (opts.ping_interval, opts.write_deadline) == (30.0, 5.0)
    assert len(warnings) == 2
    assert warnings[0].startswith(
        't.conf:1:1: invalid use of field "ping_interval": ping_interval should be converted to a duration'
    )
    assert warnings[1].startswith("t.conf:2:1: ")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('ping_interval: "abc"', 'error parsing ping_interval: invalid duration "abc"'),
        ("ping_interval: 1.5", 'expected a duration string such as "2m", got float 1.5'),
        ('ping_interval: "-5s"', "must be a positive duration"),
        ('write_deadline: "0s"', "must be a positive duration"),
        ('lame_duck_duration: "10s"', "invalid lame_duck_duration of 10s, minimum is 30 seconds"),
        ("lame_duck_duration: 60", "expected a duration string"),
    ],
)
def test_duration_errors(text: str, fragment: str) -> None:
    message = error_of(text)
    assert message.startswith("t.conf:1:1: ")
    assert fragment in message


# -- types and limits ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('port: "abc"', 'invalid value for "port": expected an integer, got string "abc"'),
        ("port: 1.5", "expected an integer, got float 1.5"),
        ("port: true", "expected an integer, got boolean true"),
        ("server_name: 5", 'invalid value for "server_name": expected a string, got integer 5'),
        ('debug: "true"', 'invalid value for "debug": expected a boolean'),
        ("debug: 1", "expected a boolean (true/false), got integer 1"),
        ("max_pending: [1]", "got an array"),
        ("server_name: {a: 1}", "got a map"),
        ("server_name: 2020-01-02T03:04:05Z", "got datetime"),
        ("max_payload: 2147483648", "max_payload value is too big"),
        ("max_payload: 1T", "max_payload value is too big"),
        ("max_control_line: 3000000000", "max_control_line value is too big"),
    ],
)
def test_type_errors_name_the_key_and_position(text: str, fragment: str) -> None:
    message = error_of("\n" + text)
    assert message.startswith("t.conf:2:1: "), message
    assert fragment in message


def test_all_errors_are_reported_together() -> None:
    message = error_of("port: x\nfoo: 1\ndebug: 3")
    lines = message.splitlines()
    assert [line.split(": ")[0] for line in lines] == ["t.conf:1:1", "t.conf:2:1", "t.conf:3:1"]


# -- unknown, unsupported and ignored keys ---------------------------------------------------


def test_unknown_field_is_an_error_as_in_nats_server() -> None:
    assert error_of("port: 4222\nfoo: bar") == 't.conf:2:1: unknown field "foo"'


def test_unknown_field_in_a_block() -> None:
    assert error_of("jetstream {\n  store_dir: /x\n  bogus: 1\n}") == 't.conf:3:3: unknown field "bogus"'
    assert error_of("authorization { foo: 1 }") == 't.conf:1:17: unknown field "foo"'


def test_variables_are_not_unknown_fields_only_if_used() -> None:
    assert options("PORT_NUMBER = 4333\nport: $PORT_NUMBER").port == 4333
    assert error_of("UNUSED = 1") == 't.conf:1:1: unknown field "UNUSED"'
    assert options("authorization { U = x, user: $U }").username == "x"


@pytest.mark.parametrize(
    "key",
    [
        "ocsp",
        "mqtt",
        "resolver_tls",
        "syslog",
        "logfile_size_limit",
        "log_size_limit",
        "ports_file_dir",
    ],
)
def test_unsupported_fields_are_errors(key: str) -> None:
    assert error_of(f"{key}: 1") == f't.conf:1:1: field "{key}" is not supported by jetpy yet'


def test_switching_off_an_unsupported_feature_is_fine() -> None:
    assert options("syslog: false") == ServerOptions()
    assert options('logfile_size_limit: 0\nports_file_dir: ""') == ServerOptions()


@pytest.mark.parametrize(
    "key",
    [
        "max_traced_msg_len",
        "disable_sublist_cache",
        "no_header_support",
    ],
)
def test_ignored_fields_warn(key: str) -> None:
    opts, warnings = apply(f"{key}: 1")
    assert opts == ServerOptions()
    assert warnings == [f't.conf:1:1: field "{key}" is not supported by jetpy; ignored']


def test_server_tags_lower_cased() -> None:
    assert options('server_tags: ["AZ:1", "ssd"]').server_tags == ["az:1", "ssd"]
    assert options('server_tags: "cloud:aws"').server_tags == ["cloud:aws"]
    assert error_of("server_tags: 1").startswith("t.conf:1:1: ")


# -- authorization ---------------------------------------------------------------------------


def test_single_user() -> None:
    opts = options("authorization { user: alice, password: secret, timeout: 3 }")
    assert (opts.username, opts.password, opts.auth_timeout, opts.users) == ("alice", "secret", 3.0, [])
    assert options("authorization { username: a, pass: b }").password == "b"


def test_token_and_timeout_forms() -> None:
    assert options("authorization { token: s3cr3t }").token == "s3cr3t"
    assert options("authorization { timeout: 0.5 }").auth_timeout == 0.5
    assert options('authorization { timeout: "2s" }').auth_timeout == 2.0


def test_bcrypt_password_unquoted() -> None:
    assert options("authorization { user: a, password: $2a$11$abcdef }").password == "$2a$11$abcdef"


def test_users_with_permissions_normalised() -> None:
    opts = options("""
        authorization {
          default_permissions: { subscribe: "_INBOX.>" }
          users: [
            {user: a, password: b, permissions: {publish: "foo", subscribe: ["bar", "baz.>"]}}
            {user: c, password: d, permissions: {pub: {allow: ["x.*"], deny: "x.y"}, allow_responses: true}}
            {user: e, permissions: {allow_responses: {max: 5, expires: "1m"}}}
            {username: f, password: g}
          ]
        }
    """)
    assert opts.users == [
        User("a", "b", {"publish": {"allow": ["foo"]}, "subscribe": {"allow": ["bar", "baz.>"]}}),
        User(
            "c", "d", {"publish": {"allow": ["x.*"], "deny": ["x.y"]}, "responses": {"max": 1, "ttl": 120.0}}
        ),
        User("e", "", {"responses": {"max": 5, "ttl": 60.0}}),
        User("f", "g", {"subscribe": {"allow": ["_INBOX.>"]}}),
    ]


def test_default_permissions_without_users_warn() -> None:
    _, warnings = apply("authorization { user: a, password: b, default_permissions: {publish: x} }")
    assert warnings == ["t.conf:1:1: default_permissions apply to the users array only; ignored"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("authorization { user: a, password: b, token: c }", "t.conf:1:1: Cannot have a user/pass and token"),
        (
            "authorization { users: [{user: a}], user: x }",
            "t.conf:1:1: Can not have a single user/pass and a users array",
        ),
        (
            "authorization { token: t, users: [{user: a}] }",
            "t.conf:1:1: Can not have a token and a users array",
        ),
        ("authorization { users: [{password: a}] }", "t.conf:1:25: User entry requires a user"),
        ("authorization { users: [{user: a}, {user: a}] }", 't.conf:1:36: Duplicate user "a" detected'),
        ("authorization { users: {user: a} }", "t.conf:1:17: Expected users field to be an array, got a map"),
        ('authorization { users: [ "a" ] }', 'Expected user entry to be a map/struct, got string "a"'),
        ("authorization { users: [{user: a, foo: 1}] }", 't.conf:1:35: unknown field "foo"'),
        ("authorization { users: [{user: a, nkey: UABC}] }", "Not a valid public nkey for a user"),
        (
            "authorization { users: [{user: a, nkey: UB4TRNBN4YGI44LF5SKQDFZRCPTB5535LXT3AJKH5QKZIN27EEZYS2GE}] }",
            "Nkey users do not take usernames or passwords",
        ),
        ('authorization { users: [{user: a, permissions: {subscribe: "a b c"}}] }', 'subject "a b c" is not'),
        ('authorization { users: [{user: a, permissions: {subscribe: "a..b q"}}] }', 'subject "a..b" is not'),
        ('authorization { users: [{user: a, permissions: {publish: "a q"}}] }', 'subject "a q" is not'),
        (
            "authorization { users: [{user: a, permissions: {bogus: 1}}] }",
            'Unknown field "bogus" parsing permissions',
        ),
        ("authorization { users: [{user: a, permissions: 1}] }", "Expected permissions to be a map/struct"),
        ("authorization { users: [{user: a, permissions: {publish: 1}}] }", "Expected subject permissions"),
        (
            'authorization { users: [{user: a, permissions: {publish: ["a", 1]}}] }',
            "cannot be cast to string",
        ),
        ("authorization { users: [{user: a, permissions: {publish: {x: a}}}] }", "only 'allow' or 'deny'"),
        (
            'authorization { users: [{user: a, permissions: {publish: "foo..bar"}}] }',
            '"foo..bar" is not a valid subject',
        ),
        (
            "authorization { users: [{user: a, permissions: {allow_responses: 1}}] }",
            "expected a boolean or a map",
        ),
        (
            "authorization { users: [{user: a, permissions: {allow_responses: {ttl: 5}}}] }",
            "not a duration string",
        ),
        ("authorization { timeout: true }", 'invalid value for "timeout"'),
        ("authorization { timeout: -1 }", "must be a positive number of seconds"),
        ("authorization { user: 5 }", 'invalid value for "user": expected a string, got integer 5'),
        ("authorization: 5", 'invalid value for "authorization": expected a map'),
    ],
)
def test_authorization_errors(text: str, fragment: str) -> None:
    assert fragment in error_of(text)


def test_include_inside_authorization(tmp_path: Path) -> None:
    (tmp_path / "users.conf").write_text("users = [ {user: a, password: b} ]\n")
    main = tmp_path / "main.conf"
    main.write_text('authorization {\n  include "users.conf"\n}\nno_auth_user: a\n')
    opts, warnings = load_config(str(main))
    assert opts.users == [User("a", "b")]
    assert warnings == []
    assert opts.config_file == str(main)


# -- jetstream -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "enabled"),
    [
        ("true", True),
        ("false", False),
        ("enabled", True),
        ("disabled", False),
        ('"Enable"', True),
        ('"disable"', False),
        ("on", True),
        ("{}", True),
        ("{ enabled: false }", False),
        ("{ enable: false }", False),
    ],
)
def test_jetstream_switch(value: str, enabled: bool) -> None:
    assert options(f"jetstream: {value}").jetstream is enabled


def test_jetstream_block() -> None:
    opts = options('jetstream { store_dir: /data/js, max_mem: 1G, max_file: 10GB, sync_interval: "2m" }')
    assert (
        opts.jetstream,
        opts.store_dir,
        opts.max_memory_store,
        opts.max_file_store,
        opts.sync_interval,
    ) == (True, "/data/js", 10**9, 10 * 1024**3, 120.0)


@pytest.mark.parametrize(
    ("text", "attr", "value"),
    [
        ("storedir: /a", "store_dir", "/a"),
        ("store: /a", "store_dir", "/a"),
        ("max_memory_store: 5", "max_memory_store", 5),
        ("max_mem_store: 5", "max_memory_store", 5),
        ('max_mem: "1G"', "max_memory_store", 1024**3),
        ('max_file_store: "2K"', "max_file_store", 2048),
        ('max_file: "3T"', "max_file_store", 3 * 1024**4),
        ('max_file: ""', "max_file_store", 0),
        ("max_file: -1", "max_file_store", -1),
        ('sync: "always"', "sync_interval", None),
        ('sync_interval: "10s"', "sync_interval", 10.0),
    ],
)
def test_jetstream_block_keys(text: str, attr: str, value: object) -> None:
    assert getattr(options(f"jetstream {{ {text} }}"), attr) == value


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("jetstream: foo", "Expected 'enabled' or 'disabled' for string value, got \"foo\""),
        ("jetstream: 1", "Expected map, bool or string to define JetStream, got integer 1"),
        ('jetstream { max_mem: "1g" }', "max_memory_store sizes defined as strings must end in K, M, G, T"),
        ('jetstream { max_mem: "15" }', "must end in K, M, G, T"),
        ('jetstream { max_mem: "1.5G" }', "cannot parse"),
        ("jetstream { max_file: 1.5 }", "max_file_store must be int64 or string"),
        ("jetstream { store_dir: 5 }", 'invalid value for "store_dir": expected a string'),
        ('jetstream { sync_interval: "0s" }', 'must be a positive duration or "always"'),
        ("jetstream { key: abc, cipher: foo }", 'Unknown cipher type: "foo"'),
        ("jetstream { key: 5 }", 'invalid value for "key": expected a string'),
        (
            "store_dir: /a\njetstream { store_dir: /b }",
            "Duplicate 'store_dir' configuration (first set at t.conf:1:1)",
        ),
    ],
)
def test_jetstream_errors(text: str, fragment: str) -> None:
    assert fragment in error_of(text)


@pytest.mark.parametrize(
    ("text", "key", "prev", "cipher"),
    [
        ('jetstream { key: "k1" }', "k1", "", ""),
        ('jetstream { ek: "k1", cipher: aes }', "k1", "", "aes"),
        ('jetstream { encryption_key: "k1", cipher: chacha, prev_key: "k0" }', "k1", "k0", "chachapoly"),
        ('jetstream { key: "k1", cipher: ChaChaPoly, prev_ek: "k0" }', "k1", "k0", "chachapoly"),
        ('jetstream { key: "k1", prev_encryption_key: "k0" }', "k1", "k0", ""),
    ],
)
def test_jetstream_encryption_settings(text: str, key: str, prev: str, cipher: str) -> None:
    opts = options(text)
    assert (opts.js_key, opts.js_prev_key, opts.js_cipher) == (key, prev, cipher)
    validate_options(opts)


@pytest.mark.parametrize("text", ['jetstream { prev_key: "k0" }', "jetstream { cipher: aes }"])
def test_encryption_settings_without_a_key_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="needs key"):
        validate_options(options(text))


def test_jetstream_ignored_keys_warn() -> None:
    opts, warnings = apply("jetstream { max_outstanding_catchup: 64MB, store_dir: /x }")
    assert opts.store_dir == "/x"
    assert warnings == ['t.conf:1:13: field "max_outstanding_catchup" is not supported by jetpy; ignored']


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("jetstream { limits { max_request_batch: 10 } }", "limits"),
        ('jetstream { limits { duplicate_window: "1m" } }', "limits"),
        ("default_js_domain: { A: hub }", "default_js_domain"),
    ],
)
def test_settings_with_an_effect_not_built_are_refused(text: str, key: str) -> None:
    assert f'field "{key}" is not supported by jetpy yet: ' in error_of(text)


def test_empty_limits_and_domain_maps_say_nothing_and_pass() -> None:
    opts, warnings = apply("jetstream { limits {} }\ndefault_js_domain: {}")
    assert opts.jetstream is True and warnings == []


def test_unique_tag_is_refused_on_a_cluster_only() -> None:
    single = options("server_name: a\njetstream { unique_tag: az }")
    assert single.js_unique_tag == "az"
    validate_options(single)  # one server places every replica on itself: nothing to spread
    clustered = options(
        "server_name: a\njetstream { unique_tag: az }\ncluster { port: -1, routes: [nats://127.0.0.1:1] }"
    )
    with pytest.raises(ConfigError, match='field "unique_tag" is not supported by jetpy yet: '):
        validate_options(clustered)


def test_top_level_store_dir_does_not_enable_jetstream() -> None:
    assert options("store_dir: /x").jetstream is False


# -- load_config and validate_options -------------------------------------------------------


def test_load_config_applies_over_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "a.conf"
    path.write_text("port: 5000\n")
    base = ServerOptions(server_name="base", users=[User("u")])
    opts, _ = load_config(str(path), base)
    assert (opts.port, opts.server_name, opts.config_file) == (5000, "base", str(path))
    assert base.port == ServerOptions().port
    assert opts.users is not base.users


def test_load_config_syntax_error_names_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text("port: 4222\nport: [1\n")
    with pytest.raises(ConfigError, match=rf"^{path}:3:1: "):
        load_config(str(path))


@pytest.mark.parametrize(
    ("opts", "fragment"),
    [
        (
            ServerOptions(max_payload=10, max_pending=5),
            "max_payload (10) cannot be higher than max_pending (5)",
        ),
        (ServerOptions(no_auth_user="x"), 'no_auth_user: "x" present, but users are not defined'),
        (ServerOptions(no_auth_user="x", username="x"), "users are not defined"),
        (ServerOptions(no_auth_user="x", users=[User("y")]), 'no_auth_user: "x" not present as user'),
    ],
)
def test_validate_options(opts: ServerOptions, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_options(opts)
    assert fragment in str(info.value)


def test_validate_options_accepts_defaults_and_good_no_auth_user() -> None:
    validate_options(ServerOptions())
    validate_options(ServerOptions(no_auth_user="y", users=[User("y")]))


# -- tls and websocket --------------------------------------------------------------------------


def test_tls_block(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    text = (
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca}", '
        'verify_and_map: true, timeout: "500ms", handshake_first: true, min_version: "1.3" }'
    )
    tls = options(text).tls
    assert tls is not None and tls.verifies and tls.timeout == 0.5 and tls.handshake_first
    assert tls.min_version == "1.3"
    cert = f'cert_file: "{pki.server_cert}", key_file: "{pki.server_key}"'
    assert "missing 'cert_file' in TLS configuration" in error_of(f'tls {{ key_file: "{pki.server_key}" }}')
    assert 'error parsing tls config, unknown field "foo"' in error_of(f"tls {{ {cert}, foo: 1 }}")
    assert 'field "cipher_suites" is not supported by jetpy yet' in error_of(
        f"tls {{ {cert}, cipher_suites: [] }}"
    )
    assert "unsupported TLS version: TLS 1.1" in error_of(f'tls {{ {cert}, min_version: "1.1" }}')
    assert "not supported by jetpy yet unless true or false" in error_of(
        f'tls {{ {cert}, handshake_first: "300ms" }}'
    )
    assert "holds no private key" in error_of(
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.ca}" }}'
    )


def test_websocket_block(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    ws = options(
        'websocket { listen: "127.0.0.1:8080", no_tls: true, compression: true, same_origin: true, '
        'allowed_origins: ["https://app.example"], handshake_timeout: "3s" }'
    ).websocket
    assert ws is not None and (ws.host, ws.port, ws.compression, ws.handshake_timeout) == (
        "127.0.0.1",
        8080,
        True,
        3.0,
    )
    assert ws.allowed_origins == ("https://app.example",)
    ws = options(
        f'ws {{ port: 443, tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }} }}'
    ).websocket
    assert ws is not None and ws.tls is not None
    assert 'unknown field "foo"' in error_of("websocket { port: 1, no_tls: true, foo: 1 }")
    assert 'field "jwt_cookie" is not supported by jetpy yet' in error_of('websocket { jwt_cookie: "x" }')
    with pytest.raises(ConfigError, match="websocket requires TLS configuration"):
        validate_options(options("websocket { port: 8080 }"))
    with pytest.raises(ConfigError, match="unable to parse allowed origin"):
        validate_options(options('websocket { port: 8080, no_tls: true, allowed_origins: "nope" }'))
