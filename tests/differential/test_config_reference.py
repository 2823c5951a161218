"""jetpy accepts and rejects the same config files as the reference ``nats-server -c FILE -t``.

``-t`` fails in nats-server on warnings too (e.g. ``ping_interval: 30``), so here jetpy "accepts"
a file when it parses without errors *and* without warnings. Cases stay inside what both agree
on; jetpy's documented differences (stricter on nonsense like negative durations, extensions like
``sync_interval``, startup checks under ``-t``) are covered by the unit tests instead.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from jetpy.server.config import ConfigError
from jetpy.server.flags import parse_args

pytestmark = pytest.mark.differential

REFERENCE = shutil.which("nats-server")
REFERENCE_TIMEOUT = 10.0  # seconds; "-t" only parses, it never listens
ENV_NAME = "JETPY_DIFF_CONF_VALUE"
ENV_VALUE = "4333"
INCLUDED = {
    "users.conf": "users = [ {user: a, password: b} ]\n",
    "sub/port.conf": "NAME = from_include\nport: 4444\n",
    "broken.conf": "port: [1,,2]\n",
}

GOOD = {
    "basic": "port: 4222\nhost: 127.0.0.1\nserver_name: alpha\ndebug: false\ntrace: true\nlogtime: true\n",
    "separators": "port = 4222; max_connections 100, max_payload: 1MB\nmax_pending 64MB\n",
    "json": '{"port": 4222, "debug": true, "authorization": {"users": [{"user": "a", "password": "b"}]}}\n',
    "comments": "# hash\n// slashes\nport: 4222 # trailing\nserver_name: x//y\n",
    "listen": "listen: 127.0.0.1:4333\nhttp: localhost:8222\n",
    "listen_port_only": "listen: 4333\nhttp_port: 8222\n",
    "durations": 'ping_interval: "2m"\nwrite_deadline: "1m30s"\nlame_duck_duration: "45s"\nping_max: 3\n',
    "sizes": "max_payload: 2MB\nmax_pending: 1G\nmax_control_line: 4KB\nmax_connections: 1k\n",
    "single_user": "authorization { user: alice, password: secret, timeout: 2 }\n",
    "token": 'authorization { token: "s3cr3t", timeout: "3s" }\n',
    "bcrypt": "authorization { user: a, password: $2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG }\n",
    "users": """
        authorization {
          default_permissions: { subscribe: "_INBOX.>" }
          users: [
            {user: a, password: b, permissions: {publish: "foo", subscribe: ["bar", "baz.>"]}}
            {user: c, password: d, permissions: {pub: {allow: ["x.*"], deny: "x.y"}, allow_responses: true}}
            {user: e, permissions: {allow_responses: {max: 5, expires: "1m"}}}
          ]
        }
        no_auth_user: a
    """,
    "jetstream_bool": "jetstream: true\n",
    "jetstream_enabled": "jetstream: enabled\n",
    "jetstream_block": 'jetstream { store_dir: "/tmp/js", max_mem: 1G, max_file: "10G" }\n',
    "jetstream_aliases": "jetstream { storedir: /tmp/js, max_memory_store: 1GB, max_file_store: 2GB }\n",
    "jetstream_off": "jetstream { enabled: false }\n",
    "jetstream_key": 'jetstream { key: "abc", cipher: aes }\n',
    "jetstream_key_aliases": 'jetstream { ek: "x", cipher: chacha }\n',
    "jetstream_encryption_key": 'jetstream { encryption_key: "k", cipher: chachapoly }\n',
    "variables": "P = 4333\nport: $P\nauthorization { U = x, user: $U, password: y }\n",
    "env_variable": f"port: ${ENV_NAME}\n",
    "block_string": "server_name: (\nmulti\nline\n)\nport: 4222\n",
    "case_insensitive": "PORT: 4222\nAuthorization { USER: a, PASSWORD: b }\n",
    "include": "include ./sub/port.conf\nserver_name: $NAME\nauthorization {\n  include users.conf\n}\n",
    "quoted_keys": '\'port\': 4222\n"server_name": "x"\n',
    "log_and_pid": "log_file: /tmp/jetpy.log\npidfile: /tmp/jetpy.pid\n",
    "accounts": """
        jetstream: enabled
        authorization { users: [{user: g, password: g}] }
        accounts {
          A: {
            users: [{user: a, password: a, permissions: {publish: "x.>"}}]
            default_permissions: { subscribe: "_INBOX.>" }
            jetstream: { max_mem: 1M, max_file: 1G, max_streams: 10, max_consumers: 100, max_ack_pending: 500,
                         memory_max_stream_bytes: 1K, store_max_stream_bytes: 1M, max_bytes_required: true }
            exports: [
              {stream: "pub.>"}
              {stream: "priv.>", accounts: [B]}
              {service: "svc.>", response_type: stream, response_threshold: "5s"}
              {service: "one", response: singleton}
            ]
            mappings: { "m.*": "n.$1", "w": [{destination: w1, weight: 40%}, {dest: w2, weight: "60%"}] }
          }
          B: {
            users: [{user: b, password: b}]
            jetstream: enabled
            imports: [
              {stream: {account: A, subject: "pub.>"}, prefix: from}
              {stream: {account: A, subject: "priv.x"}, to: "mine.x"}
              {service: {account: A, subject: "svc.a"}, to: "a"}
            ]
          }
          SYS: { users: [{user: s, password: s}] }
        }
        system_account: SYS
        no_auth_user: b
    """,
    "accounts_array": "accounts: [A, B]\n",
    "mappings_top_level": 'mappings { "a.*.*": "b.$2.$1", c: [{destination: d, weight: 50%}] }\n',
    "jetstream_domain": "jetstream { store_dir: /tmp/js, domain: hub }\n",
}

BAD = {
    "jetstream_cipher_unknown": 'jetstream { key: "abc", cipher: foo }\n',
    "unknown_field": "port: 4222\nfoo: bar\n",
    "unknown_nested": "jetstream { store_dir: /tmp/x, foo: 1 }\n",
    "unused_variable": "X = 1\nport: 4222\n",
    "undefined_variable": "port: $JETPY_SURELY_UNDEFINED_VARIABLE\n",
    "port_string": 'port: "abc"\n',
    "debug_int": "debug: 1\n",
    "listen_no_port": 'listen: "localhost"\n',
    "listen_bad_port": 'listen: "1.2.3.4:abc"\n',
    "bad_duration": 'ping_interval: "abc"\n',
    "integer_duration_warns": "ping_interval: 30\n",
    "lame_duck_short": 'lame_duck_duration: "10s"\n',
    "user_and_token": "authorization { user: a, password: b, token: c }\n",
    "user_and_users": "authorization { users: [{user: a, password: b}], user: x, password: y }\n",
    "user_without_name": "authorization { users: [{password: a}] }\n",
    "duplicate_user": "authorization { users: [{user: a, password: b}, {user: a, password: c}] }\n",
    "bad_subject": 'authorization { users: [{user: a, password: b, permissions: {publish: "foo..bar"}}] }\n',
    "bad_permission_key": "authorization { users: [{user: a, password: b, permissions: {bogus: 1}}] }\n",
    "jetstream_word": "jetstream: foo\n",
    "jetstream_int": "jetstream: 1\n",
    "jetstream_size_string": 'jetstream { max_mem: "1g" }\n',
    "duplicate_store_dir": "store_dir: /tmp/a\njetstream { store_dir: /tmp/b }\n",
    "max_payload_too_big": "max_payload: 3GB\n",
    "unterminated_map": "authorization { user: a\n",
    "two_values": "port: 4222 debug: true\n",
    "bad_escape": 'server_name: "a\\qb"\n',
    "missing_include": "include ./nope.conf\n",
    "broken_include": "include broken.conf\n",
    "include_with_colon": "include: users.conf\n",
    "import_unknown_account": 'accounts { A: { imports: [{stream: {account: X, subject: "foo"}}] } }\n',
    "import_not_exported": "accounts { A: { exports: [{stream: foo}] }, B: { imports: [{stream: {account: A, subject: bar}}] } }\n",
    "import_private": "accounts { A: { exports: [{stream: foo, accounts: [C]}] }, "
    "B: { imports: [{stream: {account: A, subject: foo}}] }, C: {} }\n",
    "import_wrong_kind": "accounts { A: { exports: [{service: foo}] }, B: { imports: [{stream: {account: A, subject: foo}}] } }\n",
    "import_cycle": "accounts { A: { exports: [{service: foo}], imports: [{service: {account: B, subject: foo}}] }, "
    "B: { exports: [{service: foo}], imports: [{service: {account: A, subject: foo}}] } }\n",
    "import_no_subject": "accounts { A: { exports: [{stream: s}] }, B: { imports: [{stream: {account: A}}] } }\n",
    "account_duplicate_user": "accounts { A: { users: [{user: a, password: a}] }, B: { users: [{user: a, password: b}] } }\n",
    "account_and_global_user": "authorization { users: [{user: a, password: a}] }\n"
    "accounts { A: { users: [{user: a, password: b}] } }\n",
    "account_unknown_field": "accounts { A: { foo: 1 } }\n",
    "account_jetstream_unknown": "jetstream: enabled\naccounts { A: { jetstream: { max_foo: 1 } } }\n",
    "export_bad_response_type": "accounts { A: { exports: [{service: foo, response_type: bogus}] } }\n",
    "export_response_on_stream": "accounts { A: { exports: [{stream: foo, response_type: stream}] } }\n",
    "mapping_bad_wildcard": 'mappings { "foo.*": "bar.$2" }\n',
    "mapping_bad_destination": 'mappings { foo: "a b" }\n',
    "mapping_over_100": "mappings { foo: [{destination: bar, weight: 101}] }\n",
    "mapping_missing_weight": "mappings { foo: [{destination: bar}] }\n",
    "mapping_bad_subject": 'mappings { "foo bar": x }\n',
}


def reference_accepts(path: Path, env: dict[str, str]) -> tuple[bool, str]:
    assert REFERENCE is not None
    done = subprocess.run(
        [REFERENCE, "-c", str(path), "-t"],
        capture_output=True,
        text=True,
        timeout=REFERENCE_TIMEOUT,
        env=env,
        cwd=path.parent,
    )
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def jetpy_accepts(path: Path) -> tuple[bool, str]:
    try:
        parsed = parse_args(["-c", str(path), "-t"])
    except ConfigError as e:
        return False, str(e)
    return not parsed.warnings, "\n".join(parsed.warnings) or "ok"


@pytest.fixture
def conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if REFERENCE is None:
        pytest.skip("the reference nats-server is not installed (shutil.which('nats-server') is None)")
    for name, text in INCLUDED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setenv(ENV_NAME, ENV_VALUE)
    return tmp_path


@pytest.mark.parametrize(("name", "expected"), [*((n, True) for n in GOOD), *((n, False) for n in BAD)])
def test_same_verdict_as_reference(conf_dir: Path, name: str, expected: bool) -> None:
    path = conf_dir / f"{name}.conf"
    path.write_text(GOOD[name] if expected else BAD[name])
    env = {"PATH": "/usr/bin:/bin", ENV_NAME: ENV_VALUE}
    ref_ok, ref_out = reference_accepts(path, env)
    ours_ok, ours_out = jetpy_accepts(path)
    assert ref_ok is expected, f"the reference changed its mind about {name}: {ref_out}"
    assert ours_ok is expected, (
        f"jetpy disagrees with nats-server on {name}: {ours_out} (reference: {ref_out})"
    )
