"""Accounts: the server's subject spaces, and what crosses between them.

Owns the accounts a server has (nats-server's): the global account ``$G`` (clients that belong to
no configured account), the system account (``system_account``, by default ``$SYS``; the
``$SYS`` requests and events live there, see ``sysevents``) and every account of the
``accounts {}`` block, each with its own :class:`~jetpy.server.broker.Broker` (a message
published in one account reaches only that account's subscribers), its subject mappings
(``mappings``: the publish function its clients use maps the subject first; an account without
mappings publishes straight into its broker, at no cost), and its JetStream when enabled (set
by the composition root). Also who gets JetStream: an account whose ``jetstream`` is enabled,
and ``$G`` only when no account but the system one is configured, as in nats-server.

What crosses accounts is carried out here (``imports``), through in-process subscriptions:

* a **service import** subscribes in the importing account to its local subject; a request
  there is published in the exporting account on the service's subject, with a
  ``Nats-Request-Info`` header naming the requesting account, and (when it has a reply subject)
  a new reply ``_R_.<account tag>.<token>`` in the exporting account, which
  :class:`ResponseRoutes` maps back to the requester's reply: once for a ``singleton`` service,
  until ``response_threshold`` passes without a response for ``stream`` and ``chunked``;
* a **stream import** subscribes in the exporting account to the imported subject while the
  importing account has interest on this server overlapping the subjects it would see there,
  and hands what arrives to the importing account's subscribers on this server on
  ``prefix.<subject>`` or the ``to`` transform of it, reply subject unchanged.

Each server carries out the imports of its own clients, as nats-server's do (so jetpy and
nats-server servers mix in one cluster): a stream import's subscription in the exporting account
is announced to the routes like any other (messages published on a peer come here, and are
handed over here, never routed on), while a service import's subscription acts on requests
published on this server only (``Subscription.local``: neither announced nor given routed
messages); the replies made up for it are announced, so responses come back from any server. Loops through imports
are refused by the configuration (``config_accounts.check_accounts``) and cut here at
:data:`MAX_IMPORT_DEPTH` in any case.

The system account is resolvable by name through :meth:`Accounts.system` (the Raft host's
``$NRG`` traffic and the ``$SYS`` requests use it). Knows nothing of connections or sockets.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Final

from jetpy.jetstream.models import AccountLimits
from jetpy.jetstream.transform import SubjectTransform
from jetpy.server.broker import Broker, Subscriber, Subscription, Writes
from jetpy.server.config_accounts import system_account_name
from jetpy.server.mappings import SubjectMapper
from jetpy.server.options import GLOBAL_ACCOUNT, AccountOptions, Export, Import, Mapping, ServerOptions
from jetpy.subjects import subject_is_subset

__all__ = [
    "MAX_IMPORT_DEPTH",
    "MAX_PENDING_RESPONSES",
    "REQUEST_INFO_HEADER",
    "Account",
    "Accounts",
    "ResponseRoutes",
]

log = logging.getLogger("jetpy.server")

REQUEST_INFO_HEADER: Final = "Nats-Request-Info"  # nats-server's header on an imported request
RESPONSE_PREFIX: Final = "_R_"  # the first token of the replies a service import makes up
MAX_IMPORT_DEPTH: Final = 8
"""Imports one message may pass through in a row; deeper it is dropped (a loop the
configuration checks did not catch must not take the server down)."""
MAX_PENDING_RESPONSES: Final = 100_000
"""Requests an exporting account keeps a way back for; past it the oldest is forgotten (its
response, should it still come, is dropped), so requests without answers cannot grow memory."""
HEADER_LINE: Final = b"NATS/1.0\r\n"  # the first line of a header block without a status
TOKEN_LENGTH: Final = 6  # characters of a reply token, as nats-server's (62**6: 5.7e10 of them)
_ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# (subject, reply, hdr_len, data) -> None, as a broker calls an in-process subscriber
Handler = Callable[[bytes, "bytes | None", int, bytes], None]


class Account:
    """One account: its broker, mappings, JetStream limits and, once started, its JetStream."""

    def __init__(self, options: AccountOptions, writes: Writes, cluster: Callable[[], str]) -> None:
        self.name = options.name
        self.options = options
        self._cluster = cluster
        self.broker = Broker(options.name, writes)
        self.jetstream: Any = None  # the running JetStream service (set by the composition root)
        self.connections = 0  # clients connected in the account now
        self.total_connections = 0
        # what its closed connections sent and were sent: in msgs, out msgs, in bytes, out bytes
        self.closed_traffic = [0, 0, 0, 0]
        self.slow_consumers = 0
        self.imports: list[ServiceImport | StreamImport] = []
        self.responses: ResponseRoutes | None = None  # made when a service of it is first imported
        self.mapper: SubjectMapper | None = None
        self.publish: Callable[..., int] = self.broker.publish  # the client publish path, untouched
        self.publish_run: Callable[..., int] = self.broker.publish_run
        # a run of messages with replies to one subject in one call (None: each in turn)
        self.publish_requests: Callable[[bytes, list[bytes], list[int], list[bytes]], bool] | None = None
        self.set_mappings(options.mappings)

    def set_mappings(self, mappings: tuple[Mapping, ...]) -> None:
        """Map its clients' subjects with ``mappings`` from now on (a reload gives new ones; the
        connections take the new publish functions, see ``ClientConnection.account_changed``)."""
        self.options = dataclasses.replace(self.options, mappings=mappings)
        broker = self.broker
        if mappings:
            mapper = SubjectMapper(mappings, self._cluster)
            self.mapper = mapper
            self.publish = _mapped_publish(broker, mapper)
            self.publish_run = _mapped_run(self.publish)
            self.publish_requests = None  # a mapping may draw each message's subject anew
        else:
            self.mapper = None
            self.publish = broker.publish
            self.publish_run = broker.publish_run
            self.publish_requests = broker.publish_requests

    @property
    def js_limits(self) -> AccountLimits | None:
        """The account's JetStream limits; None when it has no JetStream."""
        return self.options.jetstream

    def response_routes(self) -> ResponseRoutes:
        if self.responses is None:
            self.responses = ResponseRoutes(self)
        return self.responses


def _mapped_publish(broker: Broker, mapper: SubjectMapper) -> Callable[..., int]:
    publish = broker.publish
    map_subject = mapper.map

    def mapped(
        origin: Subscriber | None,
        subject: bytes,
        reply: bytes | None,
        hdr_len: int,
        data: bytes,
        echo: bool = True,
        sizes: bytes | None = None,
    ) -> int:
        return publish(origin, map_subject(subject), reply, hdr_len, data, echo, sizes)

    return mapped


def _mapped_run(publish: Callable[..., int]) -> Callable[..., int]:
    def run(
        origin: Subscriber | None, subject: bytes, datas: list[bytes], sizes: list[bytes], echo: bool = True
    ) -> int:
        n = 0
        for data, size in zip(datas, sizes, strict=True):
            n += publish(origin, subject, None, 0, data, echo, size)  # each message drawn anew
        return n

    return run


class Accounts:
    """Every account of the server, by name."""

    def __init__(self, opts: ServerOptions, cluster: Callable[[], str] = lambda: "") -> None:
        self.writes = writes = Writes()
        configured = {a.name: a for a in opts.accounts}
        self.system_name = system_account_name(opts)
        only_global = not (set(configured) - {self.system_name})
        g = AccountOptions(
            GLOBAL_ACCOUNT,
            jetstream=AccountLimits() if opts.jetstream and only_global else None,
            mappings=opts.mappings,
        )
        self.by_name: dict[str, Account] = {GLOBAL_ACCOUNT: Account(g, writes, cluster)}
        if self.system_name and self.system_name not in configured:
            self.by_name[self.system_name] = Account(AccountOptions(self.system_name), writes, cluster)
        self._jetstream = opts.jetstream
        self._cluster = cluster
        for acc in configured.values():
            self._put(acc)
        self._started = False

    def _put(self, options: AccountOptions) -> Account:
        if not self._jetstream and options.jetstream is not None:
            options = dataclasses.replace(options, jetstream=None)
        acc = self.by_name[options.name] = Account(options, self.writes, self._cluster)
        return acc

    def add(self, options: AccountOptions) -> Account:
        """An account new to the running server (an account JWT the resolver was given): its
        subject space, and its imports carried out once the accounts are started. Its JetStream
        (if its options and the server's enable it) is the composition root's to start."""
        if options.name in self.by_name:
            raise ValueError(f"account {options.name} exists")
        acc = self._put(options)
        if self._started:
            self._carry_out_imports(acc)
        return acc

    # -- lookups --------------------------------------------------------------------------------

    def get(self, name: str) -> Account | None:
        return self.by_name.get(name)

    @property
    def global_account(self) -> Account:
        return self.by_name[GLOBAL_ACCOUNT]

    def system(self) -> Account | None:
        """The system account (None with ``no_system_account``)."""
        return self.by_name.get(self.system_name) if self.system_name else None

    def reload_mappings(self, opts: ServerOptions) -> list[Account]:
        """Take the mappings of ``opts`` (the global account's and every account's); returns the
        accounts whose mappings changed."""
        changed: list[Account] = []
        new = {a.name: a.mappings for a in opts.accounts}
        new[GLOBAL_ACCOUNT] = opts.mappings
        for name, mappings in new.items():
            acc = self.by_name.get(name)
            if acc is not None and acc.options.mappings != mappings:
                acc.set_mappings(mappings)
                changed.append(acc)
        return changed

    def brokers(self) -> dict[bytes, Broker]:
        """Every account's broker by name, as the routes name accounts."""
        return {name.encode(): acc.broker for name, acc in self.by_name.items()}

    def __iter__(self) -> Iterator[Account]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    # -- imports --------------------------------------------------------------------------------

    def start(self) -> None:
        """Carry out every account's imports (the configuration checked they are allowed)."""
        if self._started:
            return
        self._started = True
        for acc in list(self.by_name.values()):
            self._carry_out_imports(acc)

    def _carry_out_imports(self, acc: Account) -> None:
        for imp in acc.options.imports:
            exporter = self.by_name.get(imp.account)
            if exporter is None:
                continue
            export = next((e for e in exporter.options.exports if _covers(e, imp)), None)
            if export is None:
                continue
            if imp.kind == "service":
                acc.imports.append(ServiceImport(acc, exporter, imp, export))
            else:
                acc.imports.append(StreamImport(acc, exporter, imp))

    def stop(self) -> None:
        for acc in self.by_name.values():
            for imp in acc.imports:
                imp.close()
            acc.imports.clear()
            if acc.responses is not None:
                acc.responses.close()
                acc.responses = None
        self._started = False


def _covers(export: Export, imp: Import) -> bool:
    return export.kind == imp.kind and subject_is_subset(imp.subject, export.subject)


def _cross(
    writes: Writes,
    broker: Broker,
    subject: bytes,
    reply: bytes | None,
    hdr_len: int,
    data: bytes,
    local: bool = False,
    shown: bytes | None = None,
) -> int:
    """Publish into another account's broker as the server (no client's permissions apply
    there), one import deeper, to this server's subscribers only when ``local`` (receivers see
    ``shown`` when given: a JetStream delivery); dropped past :data:`MAX_IMPORT_DEPTH`."""
    if writes.depth >= MAX_IMPORT_DEPTH:
        log.warning("message on %r dropped: it went through %d imports", subject, writes.depth)
        return 0
    caller, client = writes.caller, writes.client
    writes.caller = writes.client = None
    writes.depth += 1
    try:
        if local:
            return broker.publish_local(subject, reply, hdr_len, data, shown)
        return broker.publish(None, subject, reply, hdr_len, data)
    finally:
        writes.depth -= 1
        writes.caller, writes.client = caller, client


class ServiceImport:
    """A service imported by ``importer`` from ``exporter`` (see the module)."""

    def __init__(self, importer: Account, exporter: Account, imp: Import, export: Export) -> None:
        self.importer = importer
        self.exporter = exporter
        self.imp = imp
        self.export = export
        self.local = imp.to or imp.subject
        self._transform = SubjectTransform(self.local, imp.subject) if self.local != imp.subject else None
        self._info_prefix = f'{{"acc":{json.dumps(importer.name)},"rtt":'.encode()
        self._routes = exporter.response_routes()
        self._sub = importer.broker.subscribe_internal(self.local, self._request, local=True)

    def close(self) -> None:
        self.importer.broker.unsubscribe_internal(self._sub)

    def _request(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        target = subject
        if self._transform is not None:
            mapped = self._transform.apply(subject.decode("utf-8", "replace"))
            if mapped is None:
                return
            target = mapped.encode()
        writes = self.importer.broker.writes
        client = writes.client
        rtt = int(client.rtt * 1e9) if client is not None and client.rtt > 0 else 0
        info = self._info_prefix + str(rtt).encode() + b"}"
        hdr_len, data = _with_header(hdr_len, data, REQUEST_INFO_HEADER, info)
        new_reply = None
        if reply:
            new_reply = self._routes.track(self.importer.broker, reply, self.export)
        _cross(writes, self.exporter.broker, target, new_reply, hdr_len, data)


def _with_header(hdr_len: int, data: bytes, name: str, value: bytes) -> tuple[int, bytes]:
    """``data`` (headers then payload) with one more header, after those it had."""
    line = name.encode() + b": " + value + b"\r\n"
    if not hdr_len:
        block = HEADER_LINE + line + b"\r\n"
        return len(block), block + data
    head = data[: hdr_len - 2]  # up to the blank line that ends the block
    block = head + line + b"\r\n"
    return len(block), block + data[hdr_len:]


def _token() -> bytes:
    """A random reply token (letters and digits, as nats-server's)."""
    n = secrets.randbits(64)
    out = bytearray()
    for _ in range(TOKEN_LENGTH):
        n, r = divmod(n, 62)
        out.append(ord(_ALPHABET[r]))
    return bytes(out)


class _Pending:
    __slots__ = ("broker", "deadline", "reply", "single", "threshold")

    def __init__(self, broker: Broker, reply: bytes, single: bool, threshold: float, now: float) -> None:
        self.broker = broker
        self.reply = reply
        self.single = single
        self.threshold = threshold
        self.deadline = now + threshold


class ResponseRoutes:
    """The way back for an exporting account's responses: replies ``_R_.<tag>.<token>`` it
    made up for imported requests, each to the requester's reply in the importing account."""

    def __init__(self, account: Account) -> None:
        self.account = account
        tag = _token().decode()
        self.prefix = f"{RESPONSE_PREFIX}.{tag}.".encode()
        self.pending: OrderedDict[bytes, _Pending] = OrderedDict()
        broker = account.broker
        self._sub: Subscription | None = broker.subscribe_internal(self.prefix.decode() + "*", self._response)

    def close(self) -> None:
        if self._sub is not None:
            self.account.broker.unsubscribe_internal(self._sub)
            self._sub = None
        self.pending.clear()

    def track(self, importer: Broker, reply: bytes, export: Export) -> bytes:
        """A reply for a request from ``importer`` whose requester waits on ``reply``."""
        now = time.monotonic()
        pending = self.pending
        while pending:  # forget what expired (the oldest first) and what is past the bound
            first = next(iter(pending.values()))
            if first.deadline > now and len(pending) < MAX_PENDING_RESPONSES:
                break
            pending.popitem(last=False)
        token = _token()
        pending[token] = _Pending(
            importer, reply, export.response_type == "singleton", export.response_threshold, now
        )
        return self.prefix + token

    def _response(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        token = subject[len(self.prefix) :]
        entry = self.pending.get(token)
        if entry is None:
            return
        now = time.monotonic()
        if entry.deadline <= now:
            del self.pending[token]
            return
        if entry.single:
            del self.pending[token]
        else:
            entry.deadline = now + entry.threshold
            self.pending.move_to_end(token)
        # the requester is on this server (a service import acts on local requests only)
        _cross(self.account.broker.writes, entry.broker, entry.reply, None, hdr_len, data, local=True)


class StreamImport:
    """A stream imported by ``importer`` from ``exporter`` (see the module)."""

    def __init__(self, importer: Account, exporter: Account, imp: Import) -> None:
        self.importer = importer
        self.exporter = exporter
        self.imp = imp
        if imp.prefix:
            self.local = f"{imp.prefix}.{imp.subject}"
            prefix = imp.prefix.encode() + b"."
            self._map: Callable[[bytes], bytes | None] = lambda s: prefix + s
        elif imp.to and imp.to != imp.subject:
            self.local = imp.to
            transform = SubjectTransform(imp.subject, imp.to)

            def mapped(s: bytes) -> bytes | None:
                out = transform.apply(s.decode("utf-8", "replace"))
                return None if out is None else out.encode()

            self._map = mapped
        else:
            self.local = imp.subject
            self._map = lambda s: s
        self._sub: Subscription | None = None
        self._watch = importer.broker.watch_overlap(self.local, self._interest)

    def close(self) -> None:
        self.importer.broker.unwatch_overlap(self._watch)
        self._interest(False)

    def _interest(self, active: bool) -> None:
        """The importing account gained its first or lost its last interest in what it
        imports: follow it in the exporting account."""
        if active and self._sub is None:
            self._sub = self.exporter.broker.subscribe_internal(
                self.imp.subject, self._message, relay=self._relay
            )
        elif not active and self._sub is not None:
            self.exporter.broker.unsubscribe_internal(self._sub)
            self._sub = None

    def _message(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        target = self._map(subject)
        if target is not None:
            broker = self.importer.broker
            _cross(broker.writes, broker, target, reply, hdr_len, data, local=True)

    def _relay(self, routed: bytes, shown: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        """A JetStream delivery (to a deliver subject the importer's mirror, source or push
        consumer listens on): routed on the imported subject, shown with the stream's own."""
        target = self._map(routed)
        if target is not None:
            broker = self.importer.broker
            _cross(broker.writes, broker, target, reply, hdr_len, data, local=True, shown=shown)
