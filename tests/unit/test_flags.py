"""nats-server's command line: every flag form, precedence over the config file, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from certs import make_pki
from jetpy.server.config import ConfigError
from jetpy.server.flags import FLAGS, HELP_TEXT, ParsedArgs, UsageError, parse_args
from jetpy.server.options import ServerOptions, TlsOptions, User


def opts_of(*argv: str) -> ServerOptions:
    parsed = parse_args(list(argv))
    assert not (parsed.show_help or parsed.show_version or parsed.test_config)
    return parsed.options


def usage_error(*argv: str) -> UsageError:
    with pytest.raises(UsageError) as info:
        parse_args(list(argv))
    assert info.value.exit_code == 1
    return info.value


def test_no_arguments_gives_defaults() -> None:
    assert parse_args([]) == ParsedArgs(ServerOptions())


@pytest.mark.parametrize(
    "argv",
    [
        ["-p", "4333"],
        ["-p=4333"],
        ["--port", "4333"],
        ["--port=4333"],
        ["-port", "4333"],
        ["-p", "0x10ED"],
        ["-p", "4_333"],
        ["-p", "+4333"],
    ],
)
def test_value_flag_forms(argv: list[str]) -> None:
    assert opts_of(*argv).port == 4333


def test_go_integer_syntax() -> None:
    assert opts_of("-p", "010").port == 8  # Go: a leading zero is octal
    assert opts_of("-p", "-1").port == -1  # nats-server's "random port"
    assert opts_of("-m", "0b11").http_port == 3


@pytest.mark.parametrize(
    ("argv", "attr", "value"),
    [
        (["-a", "127.0.0.1"], "host", "127.0.0.1"),
        (["--addr", "127.0.0.1"], "host", "127.0.0.1"),
        (["--net=10.0.0.1"], "host", "10.0.0.1"),
        (["-n", "alpha"], "server_name", "alpha"),
        (["--name", "alpha"], "server_name", "alpha"),
        (["--server_name=alpha"], "server_name", "alpha"),
        (["-P", "/run/x.pid"], "pid_file", "/run/x.pid"),
        (["--pid", "/run/x.pid"], "pid_file", "/run/x.pid"),
        (["-m", "8222"], "http_port", 8222),
        (["--http_port=8222"], "http_port", 8222),
        (["--client_advertise", "example.com:4222"], "client_advertise", "example.com:4222"),
        (["-l", "x.log"], "log_file", "x.log"),
        (["--log=x.log"], "log_file", "x.log"),
        (["-sd", "/data"], "store_dir", "/data"),
        (["-sd=/data"], "store_dir", "/data"),
        (["--store_dir", "/data"], "store_dir", "/data"),
        (["--store_dir=/data"], "store_dir", "/data"),
        (["--user", "alice"], "username", "alice"),
        (["--pass", "secret"], "password", "secret"),
        (["--auth", "tok"], "token", "tok"),
        (["-sd", "-weird-dir"], "store_dir", "-weird-dir"),  # Go takes the next argument as is
    ],
)
def test_value_flags(argv: list[str], attr: str, value: object) -> None:
    assert getattr(opts_of(*argv), attr) == value


def test_no_auth_user_extension() -> None:
    # not a nats-server 2.9.10 flag; jetpy accepts it, and checks it like the config key
    with pytest.raises(ConfigError, match="users are not defined"):
        parse_args(["--no_auth_user", "bob"])


@pytest.mark.parametrize(
    ("argv", "debug", "trace"),
    [
        (["-D"], True, False),
        (["--debug"], True, False),
        (["-V"], False, True),
        (["--trace"], False, True),
        (["-DV"], True, True),
        (["--DV"], True, True),
        (["-VV"], False, True),
        (["-DVV"], True, True),
        (["-D", "-V"], True, True),
        (["-D=true"], True, False),
        (["-D=1"], True, False),
        (["-D=t"], True, False),
        (["-DV=false"], False, False),
    ],
)
def test_debug_and_trace(argv: list[str], debug: bool, trace: bool) -> None:
    opts = opts_of(*argv)
    assert (opts.debug, opts.trace) == (debug, trace)


@pytest.mark.parametrize(
    ("argv", "logtime"),
    [
        ([], True),
        (["-T"], True),
        (["-T=false"], False),
        (["--logtime=false"], False),
        (["-T=0"], False),
        (["--logtime=F"], False),
    ],
)
def test_logtime(argv: list[str], logtime: bool) -> None:
    assert opts_of(*argv).logtime is logtime


@pytest.mark.parametrize("argv", [["-js"], ["--jetstream"], ["-js=true"], ["--js"]])
def test_jetstream_flag(argv: list[str]) -> None:
    assert opts_of(*argv).jetstream is True


def test_store_dir_alone_does_not_enable_jetstream() -> None:
    assert opts_of("-sd", "/x").jetstream is False


def test_help_and_version() -> None:
    for argv in (["-h"], ["--help"], ["help"]):
        assert parse_args(argv).show_help
    for argv in (["-v"], ["--version"], ["version"]):
        assert parse_args(argv).show_version


def test_help_and_version_win_over_bad_config_and_unsupported_flags() -> None:
    assert parse_args(["-c", "/nonexistent.conf", "--tls", "-v"]).show_version


def test_help_text_lists_supported_flags() -> None:
    for flag in ("--addr", "--port", "--store_dir", "--jetstream", "-DV", "--user", "--config", "-t"):
        assert flag in HELP_TEXT
    assert "not supported yet" in HELP_TEXT


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-x"], "flag provided but not defined: -x"),
        (["--bogus=1"], "flag provided but not defined: -bogus"),
        (["--max_payload", "1"], "flag provided but not defined: -max_payload"),
        (["-p"], "flag needs an argument: -p"),
        (["-sd"], "flag needs an argument: -sd"),
        (["-p", "abc"], 'invalid value "abc" for flag -p: parse error'),
        (["-p="], 'invalid value "" for flag -p: parse error'),
        (
            ["-p", "99999999999999999999"],
            'invalid value "99999999999999999999" for flag -p: value out of range',
        ),
        (["-D=maybe"], 'invalid boolean value "maybe" for -D: parse error'),
        (["---p", "5"], "bad flag syntax: ---p"),
        (["-=x"], "bad flag syntax: -=x"),
        (["-T", "false"], 'unrecognized command: "false"'),  # Go: a bool flag never takes the next argument
        (["extra"], 'unrecognized command: "extra"'),
        (["-t"], "must specify [-c, --config] option to check configuration file syntax"),
        (["--", "-p", "5"], 'unrecognized command: "-p"'),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    assert str(usage_error(*argv)) == message


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--help_tls"], "--help_tls: TLS help is not supported yet"),
        (["-s"], "-s: syslog is not supported yet"),
        (["--signal", "stop"], "--signal: signalling a running server (use kill) is not supported yet"),
    ],
)
def test_unsupported_flags(argv: list[str], message: str) -> None:
    assert str(usage_error(*argv)) == message


def test_tls_flags(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    opts = opts_of("--tlscert", str(pki.server_cert), "--tlskey", str(pki.server_key))
    assert opts.tls == TlsOptions(cert_file=str(pki.server_cert), key_file=str(pki.server_key))
    opts = opts_of(
        "--tlsverify",
        "--tlscert",
        str(pki.server_cert),
        "--tlskey",
        str(pki.server_key),
        "--tlscacert",
        str(pki.ca),
    )
    assert opts.tls is not None and opts.tls.verify and opts.tls.ca_file == str(pki.ca)
    with pytest.raises(ConfigError, match="TLS Server certificate must be present and valid"):
        parse_args(["--tls"])
    with pytest.raises(ConfigError, match=r"open /nope\.pem: no such file or directory"):
        parse_args(["--tlscert", "/nope.pem", "--tlskey", str(pki.server_key)])
    opts = opts_of("-ms", "-1", "--tlscert", str(pki.server_cert), "--tlskey", str(pki.server_key))
    assert opts.https_port == -1
    with pytest.raises(ConfigError, match="TLS cert and key required for HTTPS"):
        parse_args(["--https_port=8443"])
    with pytest.raises(ConfigError, match="can't specify both HTTP"):
        parse_args(
            ["-m", "8222", "-ms", "8443", "--tlscert", str(pki.server_cert), "--tlskey", str(pki.server_key)]
        )


def test_unsupported_flag_still_needs_valid_syntax() -> None:
    assert str(usage_error("--tlscert")) == "flag needs an argument: -tlscert"
    assert (
        str(usage_error("--connect_retries", "x"))
        == 'invalid value "x" for flag -connect_retries: parse error'
    )


def test_turning_off_an_unsupported_feature_is_accepted() -> None:
    assert opts_of("--tls=false") == ServerOptions()


def test_every_flag_has_unique_names() -> None:
    names = [n for f in FLAGS for n in f.names]
    assert len(names) == len(set(names))
    for f in FLAGS:
        assert (f.apply is not None) + (f.control is not None) + bool(f.unsupported) == 1, f.names


# -- config file and precedence --------------------------------------------------------------


@pytest.fixture
def conf_file(tmp_path: Path) -> str:
    path = tmp_path / "server.conf"
    path.write_text(
        "port: 4999\nserver_name: fromconf\ndebug: true\nlogtime: false\n"
        "jetstream { store_dir: /conf/js }\n"
        "authorization { users: [{user: a, password: b}] }\n"
        "ping_interval: 30\n"
    )
    return str(path)


@pytest.mark.parametrize("form", [["-c", "{}"], ["-c={}"], ["--config", "{}"], ["--config={}"]])
def test_config_flag_forms(conf_file: str, form: list[str]) -> None:
    parsed = parse_args([part.format(conf_file) for part in form])
    opts = parsed.options
    assert (opts.port, opts.server_name, opts.debug, opts.jetstream, opts.store_dir) == (
        4999,
        "fromconf",
        True,
        True,
        "/conf/js",
    )
    assert opts.users == [User("a", "b")]
    assert opts.config_file == conf_file
    assert len(parsed.warnings) == 1 and "ping_interval" in parsed.warnings[0]


def test_flags_override_the_config_file_in_any_order(conf_file: str) -> None:
    for argv in (
        ["-c", conf_file, "-p", "1234", "-n", "flag", "-D=false", "-T", "-js=false", "-sd", "/flag/js"],
        ["-p", "1234", "-n", "flag", "-D=false", "-T", "-js=false", "-sd", "/flag/js", "-c", conf_file],
    ):
        opts = opts_of(*argv)
        assert (opts.port, opts.server_name, opts.debug, opts.logtime, opts.jetstream, opts.store_dir) == (
            1234,
            "flag",
            False,
            True,
            False,
            "/flag/js",
        )


def test_unset_flags_leave_config_values(conf_file: str) -> None:
    opts = opts_of("-c", conf_file, "-V")
    assert (opts.port, opts.debug, opts.trace, opts.logtime) == (4999, True, True, False)


def test_no_auth_user_flag_against_config_users(conf_file: str) -> None:
    assert opts_of("-c", conf_file, "--no_auth_user", "a").no_auth_user == "a"
    with pytest.raises(ConfigError, match='"z" not present as user'):
        parse_args(["-c", conf_file, "--no_auth_user", "z"])


def test_test_config_mode(conf_file: str) -> None:
    parsed = parse_args(["-c", conf_file, "-t"])
    assert parsed.test_config
    assert parsed.options.port == 4999


def test_bad_config_file_raises_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("port: 4222\nfoo: 1\n")
    with pytest.raises(ConfigError, match=rf'^{bad}:2:1: unknown field "foo"$'):
        parse_args(["-c", str(bad), "-t"])
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        parse_args(["-c", str(tmp_path / "missing.conf")])


def test_startup_checks_run_after_flags(tmp_path: Path) -> None:
    conf = tmp_path / "c.conf"
    conf.write_text("max_pending: 1000\n")
    with pytest.raises(
        ConfigError, match=r"max_payload \(1048576\) cannot be higher than max_pending \(1000\)"
    ):
        parse_args(["-c", str(conf)])


def test_signal_ldm_is_accepted() -> None:
    assert parse_args(["--signal", "ldm=123"]).signal == "ldm=123"


def test_lame_duck_grace_period(tmp_path: Path) -> None:
    conf = tmp_path / "ldm.conf"
    conf.write_text('lame_duck_duration: "30s"\nlame_duck_grace_period: "2s"\n')
    opts = parse_args(["-c", str(conf)]).options
    assert (opts.lame_duck_duration, opts.lame_duck_grace_period) == (30.0, 2.0)
