"""Operator mode in the configuration: operator JWT files, trusted_keys, resolver: MEMORY with
resolver_preload; the accounts and the system account they give; nats-server's errors for what
operator mode excludes; the full resolver's block and
its directory; what jetpy refuses by name (cache and URL resolvers, allow_delete, account JWTs
with exports, imports, mappings, tiered limits or scoped signing keys); and the JWT checks
themselves (tampered, wrong algorithm, wrong claim type, issuer of the wrong role)."""

from __future__ import annotations

import base64
import functools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetpy.jetstream.models import AccountLimits
from jetpy.server.conf_format import ConfigError
from jetpy.server.config import load_config, validate_options
from jetpy.server.jwt_claims import AccountClaims, JwtError, OperatorClaims, UserClaims, decode
from jetpy.server.operator import TrustedAccounts
from jetpy.server.options import Export, Import, OperatorOptions, ServerOptions
from jwt_issuer import (
    B_LIMITS,
    World,
    account_jwt,
    account_key,
    encode,
    operator_key,
    user_jwt,
    user_key,
    world,
)

W: World = world()
OTHER_ACCOUNT = account_key()


def load(tmp_path: Path, text: str) -> ServerOptions:
    conf = tmp_path / "s.conf"
    conf.write_text(text)
    opts, _ = load_config(str(conf))
    return opts


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return str(info.value)


def op_file(tmp_path: Path, token: str = W.operator_jwt) -> Path:
    path = tmp_path / "op.jwt"
    path.write_text(token + "\n")
    return path


def test_preloaded_accounts_become_the_servers_accounts(tmp_path: Path) -> None:
    opts = load(tmp_path, "jetstream: true\n" + W.config(op_file(tmp_path)))
    assert opts.operator is not None and opts.operator.resolver == "MEMORY"
    names = {a.name: a for a in opts.accounts}
    assert set(names) == {W.sys.public, W.a.public, W.b.public}
    assert names[W.a.public].jetstream is None  # no JetStream storage in A's JWT
    assert names[W.b.public].jetstream == AccountLimits(
        max_memory=B_LIMITS["mem_storage"],
        max_storage=B_LIMITS["disk_storage"],
        max_streams=B_LIMITS["streams"],
        max_consumers=B_LIMITS["consumer"],
        max_ack_pending=0,
        memory_max_stream_bytes=0,
        storage_max_stream_bytes=0,
    )
    assert opts.system_account == W.sys.public


def test_system_account_comes_from_the_operator_jwt(tmp_path: Path) -> None:
    text = W.config(op_file(tmp_path)).replace(f"system_account: {W.sys.public}\n", "")
    assert load(tmp_path, text).system_account == W.sys.public


def test_operator_inline_relative_and_trusted_keys(tmp_path: Path) -> None:
    sys_jwt = W.account_jwts[W.sys.public]
    preload = (
        f"resolver: MEMORY\nresolver_preload {{ {W.b.public}: {W.account_jwts[W.b.public]}\n"
        f"{W.sys.public}: {sys_jwt} }}\n"
    )
    assert load(tmp_path, f"operator: {W.operator_jwt}\n" + preload).operator is not None
    op_file(tmp_path)
    assert load(tmp_path, "operator: op.jwt\n" + preload).operator is not None  # beside the config
    # B's JWT is signed by the operator's signing key: trusting the operator's key alone is not enough
    assert "not issued by a trusted operator" in error(tmp_path, f"trusted_keys: [{W.op.public}]\n" + preload)
    opts = load(tmp_path, f"trusted_keys: [{W.op.public}, {W.op_signing.public}]\n" + preload)
    assert opts.system_account == ""  # no operator JWT to name one: nats-server's $SYS
    assert opts.operator is not None and opts.operator.trusted_keys == (W.op.public, W.op_signing.public)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "authorization { users [{user: a, password: b}] }",
            "operators do not allow users to be configured directly",
        ),
        ("authorization { token: secret }", "operators do not allow users to be configured directly"),
        ("accounts { X: {} }", "operators do not allow Accounts to be configured directly"),
        ("no_auth_user: foo", "no_auth_user not compatible with Trusted Operator"),
    ],
)
def test_what_operator_mode_excludes(tmp_path: Path, extra: str, message: str) -> None:
    assert message in error(tmp_path, W.config(op_file(tmp_path), extra=extra + "\n"))


@pytest.mark.parametrize(
    ("resolver", "named"),
    [
        ("resolver: { type: cache, dir: /tmp/jwt }", 'resolver of type "cache"'),
        ("resolver: { type: full }", "resolver of type full needs a dir"),
        ("resolver: { type: full, dir: /tmp/jwt, allow_delete: true }", "allow_delete: true"),
        ("resolver: { type: full, dir: /tmp/jwt, ttl: 2m }", 'resolver "ttl" is not supported'),
        ("resolver: { type: full, dir: /tmp/jwt, limit: x }", "limit"),
        ("resolver: { type: nonsense, dir: /tmp/jwt }", 'resolver type "nonsense"'),
        ("resolver: URL(http://localhost:9090/jwt/v1/accounts/)", "resolver URL(...)"),
        ("resolver: NONSENSE", 'resolver "NONSENSE" is not supported'),
    ],
)
def test_other_resolvers_are_refused_by_name(tmp_path: Path, resolver: str, named: str) -> None:
    text = W.config(op_file(tmp_path)).replace("resolver: MEMORY", resolver)
    assert named in error(tmp_path, text)


def test_operator_mode_with_a_gateway_takes_the_preloaded_accounts(tmp_path: Path) -> None:
    # the gateways carry the accounts the server starts with: the memory resolver's preload
    opts = load(tmp_path, W.config(op_file(tmp_path), extra="gateway { name: A, port: -1 }\n"))
    validate_options(opts)
    assert opts.gateway.name == "A" and opts.operator is not None


def test_the_full_resolver_with_a_gateway_is_refused_at_start(tmp_path: Path) -> None:
    # an account the full resolver adds while the server runs would not cross the gateways
    text = _full(tmp_path, tmp_path / "jwt", extra="gateway { name: A, port: -1 }\n")
    with pytest.raises(ConfigError, match="resolver of type full with a gateway is not supported by jetpy"):
        validate_options(load(tmp_path, text))


def _full(tmp_path: Path, directory: Path, extra: str = "") -> str:
    block = f'resolver {{ type: full, dir: {json.dumps(str(directory))}, interval: "2m", limit: 5 }}'
    return W.config(op_file(tmp_path), extra=extra).replace("resolver: MEMORY", block)


def test_full_resolver_takes_the_directory_accounts(tmp_path: Path) -> None:
    directory = tmp_path / "jwt"
    directory.mkdir()
    newer_a = account_jwt(W.a, W.op, "A2", iat=int(time.time()) + 60)
    (directory / f"{W.a.public}.jwt").write_text(newer_a)  # newer than the preloaded A
    c = account_key()
    (directory / f"{c.public}.jwt").write_text(account_jwt(c, W.op, "C"))  # only in the directory
    (directory / f"{OTHER_ACCOUNT.public}.jwt").write_text(account_jwt(OTHER_ACCOUNT, operator_key(), "X"))
    (directory / "notes.txt").write_text("not a JWT")
    opts = load(tmp_path, _full(tmp_path, directory))
    op = opts.operator
    assert op is not None and op.resolver == "full" and op.resolver_dir == str(directory)
    assert op.resolver_limit == 5
    preload = dict(op.preload)
    assert preload[W.a.public] == newer_a and c.public in preload
    assert OTHER_ACCOUNT.public not in preload  # another operator's: skipped, left on disk
    assert {a.name for a in opts.accounts} == {W.sys.public, W.a.public, W.b.public, c.public}


def test_full_resolver_with_a_cluster_is_refused_at_start(tmp_path: Path) -> None:
    opts = load(tmp_path, _full(tmp_path, tmp_path / "jwt", "cluster { port: -1 }\n"))
    with pytest.raises(ConfigError, match="resolver of type full with a cluster is not supported"):
        validate_options(opts)


def test_operator_without_a_resolver_is_refused(tmp_path: Path) -> None:
    assert "needs an account resolver" in error(tmp_path, f"operator: {op_file(tmp_path)}\n")


def test_a_resolver_without_an_operator_is_refused(tmp_path: Path) -> None:
    assert "need trusted operators" in error(tmp_path, "resolver: MEMORY\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("operator: /nonexistent/op.jwt\nresolver: MEMORY\n", "error parsing operator JWT"),
        (
            "trusted_keys: [XYZ]\nresolver: MEMORY\n",
            'trust key "XYZ" required to be a valid public operator nkey',
        ),
    ],
)
def test_bad_trust_is_refused(tmp_path: Path, text: str, message: str) -> None:
    assert message in error(tmp_path, text)


def test_operator_jwt_must_be_an_operator_jwt(tmp_path: Path) -> None:
    path = op_file(tmp_path, W.account_jwts[W.a.public])
    assert "error parsing operator JWT: not operator claim" in error(
        tmp_path, f"operator: {path}\nresolver: MEMORY\n"
    )
    both = f"operator: {op_file(tmp_path)}\ntrusted_keys: [{W.op.public}]\nresolver: MEMORY\n"
    assert "conflicting options for 'TrustedKeys' and 'TrustedOperators'" in error(tmp_path, both)


def _preload(tmp_path: Path, key: str, token: str) -> str:
    return f"operator: {op_file(tmp_path)}\nresolver: MEMORY\nresolver_preload {{ {key}: {token} }}\n"


def test_bad_preloaded_account_jwts_are_refused(tmp_path: Path) -> None:
    a = account_key()
    assert "invalid account JWT" in error(tmp_path, _preload(tmp_path, a.public, "garbage"))
    untrusted = account_jwt(a, operator_key())
    assert "not issued by a trusted operator" in error(tmp_path, _preload(tmp_path, a.public, untrusted))
    mine = account_jwt(a, W.op)
    assert "JWT of another account" in error(tmp_path, _preload(tmp_path, account_key().public, mine))
    tampered = mine.replace(".", ".e", 1)
    assert "invalid account JWT" in error(tmp_path, _preload(tmp_path, a.public, tampered))
    # the operator JWT names a system account that is not preloaded
    assert "error resolving system account: account missing" in error(
        tmp_path, _preload(tmp_path, a.public, mine)
    )


@pytest.mark.parametrize(
    ("claims", "named"),
    [
        ({"mappings": {"a": [{"subject": "b"}]}}, "mappings"),
        ({"limits": {"tiered_limits": {"R1": {"mem_storage": 100}}}}, "tiered JetStream limits"),
        ({"signing_keys": [{"kind": "user_scope", "key": account_key().public}]}, "scoped signing keys"),
    ],
)
def test_account_jwt_features_jetpy_lacks_are_refused_by_name(
    tmp_path: Path, claims: dict[str, object], named: str
) -> None:
    a = account_key()
    nats: dict[str, object] = {"type": "account", "version": 2, **claims}
    token = encode({"sub": a.public, "nats": nats}, W.op)
    assert f"{named} in account JWTs are not supported by jetpy" in error(
        tmp_path, _preload(tmp_path, a.public, token)
    )


def test_jwt_checks() -> None:
    u = user_key()
    good = user_jwt(u, W.a)
    assert decode(good, UserClaims).sub == u.public
    head, body, sig = good.split(".")
    with pytest.raises(JwtError, match="signature"):
        decode(f"{head}.{body}.{sig[:-4]}AAAA", UserClaims)
    with pytest.raises(JwtError, match="not account claim"):
        decode(good, AccountClaims)
    with pytest.raises(JwtError, match="algorithm"):
        decode(
            encode({"sub": u.public, "nats": {"type": "user"}}, W.a, {"typ": "JWT", "alg": "HS256"}),
            UserClaims,
        )
    with pytest.raises(JwtError, match="issuer"):  # an operator may not sign a user
        decode(user_jwt(u, W.op), UserClaims)
    with pytest.raises(JwtError, match="3 chunks"):
        decode("abc", OperatorClaims)
    bad_body = base64.urlsafe_b64encode(json.dumps({"nats": {"type": "user"}, "iat": "x"}).encode()).rstrip(
        b"="
    )
    with pytest.raises(JwtError, match="invalid claims"):
        decode(f"{head}.{bad_body.decode()}.{sig}", UserClaims)


def test_system_account_must_match_the_operator_jwts(tmp_path: Path) -> None:
    text = W.config(op_file(tmp_path)).replace(
        f"system_account: {W.sys.public}", f"system_account: {W.a.public}"
    )
    assert "system_account in config and operator JWT must be identical" in error(tmp_path, text)


@pytest.mark.parametrize(
    ("nats", "message"),
    [
        ({"exports": [{"subject": "x", "type": "stream", "token_req": True}]}, "export field 'token_req'"),
        (
            {"exports": [{"subject": "x", "type": "service", "service_latency": {"sampling": 100}}]},
            "'service_latency'",
        ),
        ({"exports": [{"subject": "x", "type": "thing"}]}, "needs a type (stream or service)"),
        (
            {"exports": [{"subject": "x.*", "type": "stream"}], "limits": {"wildcards": False}},
            "has wildcards",
        ),
        (
            {
                "exports": [{"subject": "x", "type": "stream"}, {"subject": "y", "type": "stream"}],
                "limits": {"exports": 1},
            },
            "more exports than its limit of 1",
        ),
        (
            {"imports": [{"subject": "x", "type": "stream", "account": "ANOTHER", "token": "eyJ"}]},
            "import field 'token'",
        ),
        (
            {"imports": [{"subject": "x", "type": "stream", "account": "ANOTHER"}]},
            "from an account not preloaded",
        ),
        (
            {"imports": [{"subject": "x", "type": "service", "account": "SELF", "to": "y"}]},
            "with 'to' (use local_subject)",
        ),
        (
            {"imports": [{"subject": "x", "type": "stream", "account": "SELF"}]},
            'stream import "x": stream import not authorized',
        ),
    ],
)
def test_account_jwt_exports_and_imports_jetpy_refuses(
    tmp_path: Path, nats: dict[str, object], message: str
) -> None:
    a = account_key()
    for imp in nats.get("imports", []):  # type: ignore[attr-defined]
        if imp["account"] == "SELF":
            imp["account"] = a.public
    token = encode({"sub": a.public, "nats": {"type": "account", "version": 2, **nats}}, W.op)
    sys_jwt = W.account_jwts[W.sys.public]
    text = _preload(tmp_path, a.public, token).replace(" }", f"\n{W.sys.public}: {sys_jwt} }}")
    assert message in error(tmp_path, text)


def test_account_jwt_exports_and_imports_become_the_accounts(tmp_path: Path) -> None:
    x, y = account_key(), account_key()
    exports = [
        {"subject": "news.>", "type": "stream"},
        {
            "subject": "time",
            "type": "service",
            "response_type": "Stream",
            "response_threshold": 5_000_000_000,
        },
    ]
    imports = [
        {"subject": "news.>", "type": "stream", "account": x.public, "to": "x"},
        {"subject": "time", "type": "service", "account": x.public, "local_subject": "clock"},
    ]
    preload = {
        W.sys.public: W.account_jwts[W.sys.public],
        x.public: account_jwt(x, W.op, "X", nats_extra={"exports": exports}),
        y.public: account_jwt(y, W.op, "Y", nats_extra={"imports": imports}),
    }
    lines = "\n".join(f"{k}: {v}" for k, v in preload.items())
    opts = load(
        tmp_path, f"operator: {op_file(tmp_path)}\nresolver: MEMORY\nresolver_preload {{\n{lines}\n}}\n"
    )
    by_name = {a.name: a for a in opts.accounts}
    assert by_name[x.public].exports == (
        Export("stream", "news.>", None),
        Export("service", "time", None, "stream", 5.0),
    )
    assert by_name[y.public].imports == (
        Import("stream", x.public, "news.>", prefix="x"),
        Import("service", x.public, "time", to="clock"),
    )


@functools.cache
def _trusted() -> TrustedAccounts:
    return TrustedAccounts(
        OperatorOptions(
            operator_jwts=(W.operator_jwt,), resolver="MEMORY", preload=tuple(W.account_jwts.items())
        )
    )


@settings(max_examples=300, deadline=None)
@given(token=st.text(max_size=300), sig=st.text(max_size=100), host=st.text(max_size=40))
def test_any_text_as_a_user_jwt_is_only_ever_refused(token: str, sig: str, host: str) -> None:
    with pytest.raises(JwtError):
        _trusted().login(token, "nonce", sig, host, "STANDARD")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    nats=st.dictionaries(
        st.sampled_from(
            [
                "pub",
                "sub",
                "resp",
                "src",
                "times",
                "subs",
                "payload",
                "bearer_token",
                "issuer_account",
                "allowed_connection_types",
                "type",
                "version",
            ]
        ),
        _json,
        max_size=6,
    ),
    top=st.dictionaries(st.sampled_from(["exp", "nbf", "iat", "name", "sub"]), _json, max_size=3),
)
def test_signed_claims_of_any_shape_log_in_or_are_refused(nats: dict[str, Any], top: dict[str, Any]) -> None:
    """A correctly signed user JWT with claims of any shape: a login or a JwtError, nothing else."""
    u = user_key()
    token = encode({"sub": u.public, **top, "nats": {"type": "user", **nats}}, W.a)
    seed_sig = base64.urlsafe_b64encode(u.sign(b"nonce")).rstrip(b"=").decode()
    try:
        _trusted().login(token, "nonce", seed_sig, "127.0.0.1", "STANDARD")
    except JwtError:
        pass
