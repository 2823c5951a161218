"""ServerOptions: every setting the server runs with, whatever set it (flags, config file, code).

Owns the defaults, which are nats-server's. Knows nothing of how options are parsed: the config
file format lives in ``conf_format``/``config`` and the command line in ``flags``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jetpy.jetstream.models import AccountLimits

GLOBAL_ACCOUNT = "$G"  # nats-server's account of clients that belong to no configured account
DEFAULT_SYSTEM_ACCOUNT = "$SYS"  # nats-server's system account when none is named

# nats-server's defaults (server/const.go), with the reason each limit exists.
DEFAULT_PORT = 4222
DEFAULT_HOST = "0.0.0.0"
DEFAULT_HTTP_PORT = 8222
MAX_PAYLOAD = 1024 * 1024  # largest message body a client may publish
MAX_PENDING = 64 * 1024 * 1024  # outbound bytes buffered for one client before it is a slow consumer
MAX_CONTROL_LINE = 4096  # longest protocol line (op and arguments) before the payload
MAX_CONNECTIONS = 64 * 1024
PING_INTERVAL = 120.0  # seconds between server PINGs on an idle connection
PING_MAX = 2  # unanswered PINGs before the connection is stale
AUTH_TIMEOUT = 2.0  # seconds a new connection has to send CONNECT when auth is required
WRITE_DEADLINE = 10.0  # seconds a blocked write may last before the client is a slow consumer
LAME_DUCK_DURATION = 120.0  # seconds lame duck mode spreads the clients' closes over
LAME_DUCK_GRACE_PERIOD = 10.0  # seconds between the ldm INFO and the first close
TLS_TIMEOUT = 2.0  # seconds a TLS handshake may take (nats-server's default)
LOG_FORMATS = ("text", "json")  # nats-server's lines, or one JSON object per line (log shippers)
DEFAULT_ROUTE_AUTH_TIMEOUT = 2.0  # seconds a route has to send CONNECT when cluster auth is set
LEAF_RECONNECT = 1.0  # seconds between attempts to reach a leaf node's hub (nats-server's default)


@dataclass(slots=True)
class User:
    """One entry of ``authorization { users [...] }``: a user and password (``password`` may be
    a bcrypt hash, $2a$...) or an nkey."""

    user: str
    password: str = ""
    permissions: dict[str, object] | None = None
    account: str = GLOBAL_ACCOUNT  # the account the user belongs to
    nkey: str = ""  # a user's public nkey (then ``user`` and ``password`` are empty)


RESPONSE_TYPES = ("singleton", "stream", "chunked")  # a service export's response_type
DEFAULT_RESPONSE_THRESHOLD = 120.0  # seconds a service's responses may keep coming (nats-server's)


@dataclass(frozen=True, slots=True)
class Export:
    """One entry of an account's ``exports``: a ``stream`` or ``service`` subject, public or
    private to the ``accounts`` named."""

    kind: str  # "stream" or "service"
    subject: str
    accounts: tuple[str, ...] | None = None  # None: public
    response_type: str = "singleton"  # services: one of RESPONSE_TYPES
    response_threshold: float = DEFAULT_RESPONSE_THRESHOLD


@dataclass(frozen=True, slots=True)
class Import:
    """One entry of an account's ``imports``: ``subject`` of ``account``'s export, seen here as
    ``to`` (a transform of the subject) or, for streams, ``prefix.<subject>``."""

    kind: str  # "stream" or "service"
    account: str
    subject: str
    to: str = ""
    prefix: str = ""


@dataclass(frozen=True, slots=True)
class MappingDestination:
    """One destination of a subject mapping: ``weight`` percent of the messages (100 for a
    plain mapping), only in the cluster named ``cluster`` when set."""

    subject: str
    weight: float = 100.0
    cluster: str = ""


@dataclass(frozen=True, slots=True)
class Mapping:
    """A subject mapping: messages published to ``source`` go to its destinations."""

    source: str
    destinations: tuple[MappingDestination, ...]


@dataclass(frozen=True, slots=True)
class AccountOptions:
    """One account of the ``accounts {}`` block (its users are in ``ServerOptions.users``, each
    naming it): JetStream (None: not enabled for the account), exports, imports and mappings."""

    name: str
    jetstream: AccountLimits | None = None  # its limits (-1: none), as $JS.API.INFO reports them
    exports: tuple[Export, ...] = ()
    imports: tuple[Import, ...] = ()
    mappings: tuple[Mapping, ...] = ()


@dataclass(frozen=True, slots=True)
class OperatorOptions:
    """Operator mode (decentralized JWT auth, see ``jetpy.server.operator``): the operator JWTs
    (``operator``) or bare operator keys (``trusted_keys``) trusted, the account resolver
    (``MEMORY``, or ``full``: a directory of account JWTs that ``$SYS.REQ.CLAIMS.UPDATE``
    adds to, see ``jetpy.server.resolver``) and the account JWTs it holds (``resolver_preload``
    and, with ``full``, the directory's: public key, JWT)."""

    operator_jwts: tuple[str, ...] = ()
    trusted_keys: tuple[str, ...] = ()
    resolver: str = ""  # "MEMORY", "full", or "" when the configuration names none
    preload: tuple[tuple[str, str], ...] = ()
    resolver_dir: str = ""  # the full resolver's directory
    allow_delete: bool = False  # the full resolver's allow_delete
    resolver_limit: int = 0  # the full resolver's limit: account JWTs it holds at most


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """The ``tls {}`` block (or ``--tls*`` flags): how the client port (and the HTTPS monitoring
    port) does TLS; see ``jetpy.server.tls``."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    verify: bool = False  # require and verify client certificates
    verify_and_map: bool = False  # ... and take the user from them
    timeout: float = TLS_TIMEOUT
    handshake_first: bool = False  # the handshake before INFO (clients must ask for it too)
    min_version: str = "1.2"

    @property
    def verifies(self) -> bool:
        return self.verify or self.verify_and_map


@dataclass(frozen=True, slots=True)
class WebSocketOptions:
    """The ``websocket {}`` block: a listener for browser clients (see ``jetpy.server.websocket``);
    ``tls`` is required unless ``no_tls``."""

    port: int = 0  # 0: no WebSocket listener; -1: any free port
    host: str = DEFAULT_HOST
    no_tls: bool = False
    tls: TlsOptions | None = None
    compression: bool = False
    same_origin: bool = False
    allowed_origins: tuple[str, ...] = ()
    handshake_timeout: float = 0.0  # 0: not set (the TLS timeout's default, 2 s, applies)


@dataclass(slots=True, repr=False)
class ClusterOptions:
    """The ``cluster {}`` block and the cluster flags. Routes are on when ``port`` is not 0
    (-1: a random port), as in nats-server. Printed without its password."""

    name: str = ""  # "" = generated when the cluster starts, and adopted from peers (dynamic)
    host: str = DEFAULT_HOST
    port: int = 0
    routes: list[str] = field(default_factory=list)  # nats-route://[user:pass@]host:port to solicit
    username: str = ""  # what a peer's CONNECT must carry
    password: str = ""
    auth_timeout: float = DEFAULT_ROUTE_AUTH_TIMEOUT
    advertise: str = ""  # host:port told to peers instead of the listen address
    no_advertise: bool = False  # do not tell clients about the other servers' URLs
    connect_retries: int = 0  # attempts for a route learned by gossip (configured ones: forever)
    tls: TlsOptions | None = None  # routes over TLS (both ends, the handshake first), see cluster.py

    @property
    def enabled(self) -> bool:
        return self.port != 0

    def __repr__(self) -> str:
        auth = f", username={self.username!r}, password=[REDACTED]" if self.username else ""
        return (
            f"ClusterOptions(name={self.name!r}, host={self.host!r}, port={self.port}, "
            f"routes={[_redact_url(r) for r in self.routes]}{auth}, advertise={self.advertise!r}, "
            f"no_advertise={self.no_advertise}, connect_retries={self.connect_retries}, tls={self.tls!r})"
        )

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class RemoteGateway:
    """One entry of ``gateway { gateways: [...] }``: a remote cluster and where to reach it."""

    name: str
    urls: tuple[str, ...]  # nats://[user:pass@]host:port, as configured
    tls: TlsOptions | None = None  # this remote's own tls {} (else the gateway block's)

    def __repr__(self) -> str:
        return (
            f"RemoteGateway(name={self.name!r}, urls={[_redact_url(u) for u in self.urls]}, tls={self.tls!r})"
        )


@dataclass(slots=True, repr=False)
class GatewayOptions:
    """The ``gateway {}`` block: this cluster's link to the other clusters of a super cluster
    (see ``jetpy.server.gateway``). On when ``name`` and ``port`` are set (-1: a random port)."""

    name: str = ""  # this cluster's name in the super cluster
    host: str = DEFAULT_HOST
    port: int = 0
    advertise: str = ""  # host:port told to remote gateways instead of the listen address
    username: str = ""  # what a remote gateway's CONNECT must carry
    password: str = ""
    auth_timeout: float = DEFAULT_ROUTE_AUTH_TIMEOUT
    gateways: list[RemoteGateway] = field(default_factory=list)
    connect_retries: int = 0  # attempts for a gateway learned by gossip (configured ones: forever)
    reject_unknown: bool = False  # refuse gateways that are not configured (no implicit ones)
    tls: TlsOptions | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.name) and self.port != 0

    def __repr__(self) -> str:
        auth = f", username={self.username!r}, password=[REDACTED]" if self.username else ""
        return (
            f"GatewayOptions(name={self.name!r}, host={self.host!r}, port={self.port}{auth}, "
            f"advertise={self.advertise!r}, gateways={self.gateways!r}, "
            f"connect_retries={self.connect_retries}, reject_unknown={self.reject_unknown}, tls={self.tls!r})"
        )

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class LeafRemote:
    """One entry of ``leafnodes { remotes: [...] }``: a hub this server is a leaf node of."""

    urls: tuple[str, ...]  # nats://[user:pass@]host:port (tls:// with tls {}), tried in turn
    account: str = ""  # the local account the link carries ("" = the global account)
    credentials: str = ""  # a creds file (user JWT and nkey seed) for a hub in operator mode
    tls: TlsOptions | None = None
    deny_imports: tuple[str, ...] = ()  # subjects the hub's messages may not bring in
    deny_exports: tuple[str, ...] = ()  # subjects this server's messages may not send out
    hub: bool = False  # this server is the hub of the server it dials

    def __repr__(self) -> str:
        return (
            f"LeafRemote(urls={[_redact_url(u) for u in self.urls]}, account={self.account!r}, "
            f"credentials={self.credentials!r}, tls={self.tls!r}, deny_imports={self.deny_imports!r}, "
            f"deny_exports={self.deny_exports!r}, hub={self.hub})"
        )


@dataclass(slots=True, repr=False)
class LeafNodeOptions:
    """The ``leafnodes {}`` block (see ``jetpy.server.leafnodes``): a listener for the leaf
    nodes this server is the hub of (on when ``port`` is set; -1: a random port) and the
    ``remotes`` it is a leaf node of."""

    host: str = DEFAULT_HOST
    port: int = 0
    advertise: str = ""  # host:port told to leaf nodes instead of the listen address
    no_advertise: bool = False  # do not tell leaf nodes the other servers' leaf URLs
    username: str = ""  # authorization { user, password }: what a leaf node's CONNECT must carry
    password: str = ""
    token: str = ""
    users: list[User] = field(default_factory=list)  # authorization { users: [...] }
    account: str = ""  # authorization { account }: the account a leaf node binds to
    auth_timeout: float = AUTH_TIMEOUT
    auth_set: bool = False  # an authorization block was given (else the server's own auth applies)
    tls: TlsOptions | None = None
    remotes: list[LeafRemote] = field(default_factory=list)
    reconnect: float = LEAF_RECONNECT

    @property
    def enabled(self) -> bool:
        return self.port != 0 or bool(self.remotes)

    def __repr__(self) -> str:
        auth = ", password=[REDACTED]" if self.password or self.token else ""
        return (
            f"LeafNodeOptions(host={self.host!r}, port={self.port}, username={self.username!r}{auth}, "
            f"users={[u.user for u in self.users]}, account={self.account!r}, remotes={self.remotes!r}, "
            f"reconnect={self.reconnect}, tls={self.tls!r})"
        )

    __str__ = __repr__


def _redact_url(url: str) -> str:
    """A route URL without its password (``nats-route://user:[REDACTED]@host:port``)."""
    scheme, sep, rest = url.partition("://")
    creds, at, hostport = rest.rpartition("@")
    if not (sep and at and ":" in creds):
        return url
    return f"{scheme}://{creds.partition(':')[0]}:[REDACTED]@{hostport}"


@dataclass(slots=True)
class ServerOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0 = ephemeral, -1 = random (as nats-server)
    server_name: str = ""
    server_tags: list[str] = field(default_factory=list)  # lower-cased; clustered JetStream places by them
    client_advertise: str = ""  # host:port to advertise to clients instead of the listen address
    http_host: str = ""  # "" = same as host
    http_port: int = 0  # 0 = monitoring off; -1 = ephemeral
    https_port: int = 0  # monitoring over TLS (the client port's certificate); 0 = off
    http_base_path: str = ""  # the monitoring endpoints' path prefix ("/nats": /nats/varz...)
    tls: TlsOptions | None = None  # TLS required on the client port
    websocket: WebSocketOptions | None = None
    max_payload: int = MAX_PAYLOAD
    max_pending: int = MAX_PENDING
    max_connections: int = MAX_CONNECTIONS
    max_control_line: int = MAX_CONTROL_LINE
    max_subscriptions: int = 0  # per connection; 0 (or less) = unlimited
    max_sub_tokens: int = 0  # tokens in a subscription's subject; 0 = unlimited (at most 256)
    ping_interval: float = PING_INTERVAL
    ping_max: int = PING_MAX
    write_deadline: float = WRITE_DEADLINE
    # authorization
    username: str = ""
    password: str = ""
    token: str = ""
    users: list[User] = field(default_factory=list)  # every user, of $G and of the accounts
    auth_timeout: float = AUTH_TIMEOUT
    no_auth_user: str = ""
    operator: OperatorOptions | None = None  # operator mode (JWT users) when set
    # accounts
    accounts: list[AccountOptions] = field(default_factory=list)
    system_account: str = ""  # "": nats-server's default, $SYS
    no_system_account: bool = False
    mappings: tuple[Mapping, ...] = ()  # the top-level mappings: the global account's
    # jetstream
    jetstream: bool = False
    store_dir: str = ""
    max_memory_store: int = -1  # -1 = decide from the machine
    max_file_store: int = -1
    sync_interval: float | None = None  # None = fsync before every PubAck (group commit)
    jetstream_domain: str = ""  # jetstream { domain }: its API is also $JS.<domain>.API.>
    js_key: str = ""  # jetstream { key | ek | encryption_key }: encryption at rest ("" = off)
    js_prev_key: str = ""  # jetstream { prev_encryption_key }: files under it are re-encrypted
    js_cipher: str = ""  # jetstream { cipher }: "chachapoly" (the default with a key) or "aes"
    js_unique_tag: str = ""  # jetstream { unique_tag }: refused with a cluster (check_cluster_options)
    # logging
    debug: bool = False
    trace: bool = False
    log_file: str = ""
    pid_file: str = ""
    logtime: bool = True
    log_format: str = "text"  # one of LOG_FORMATS
    config_file: str = ""
    # lame duck
    lame_duck_duration: float = LAME_DUCK_DURATION
    lame_duck_grace_period: float = LAME_DUCK_GRACE_PERIOD
    # routes to the other servers of a cluster
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    # gateways to the other clusters of a super cluster
    gateway: GatewayOptions = field(default_factory=GatewayOptions)
    # leaf nodes: those this server is the hub of, and the hubs it is a leaf node of
    leafnodes: LeafNodeOptions = field(default_factory=LeafNodeOptions)
