"""ClusteredJetStream: a server's JetStream as one of a cluster's (see the package doc).

Owns: forming the meta group once the cluster's JetStream servers are known, reacting to
assignments in log order (creating this server's replica of a stream placed on it, with its
store and its member of the stream's group, joining or leaving a group as its placement
changes, and deleting it when the stream goes), placement (gathering the servers' tags), the
first leader's answer to a create, its stream advisories, what it tells /jsz and /healthz,
consumer assignments handed in the same order to this server's consumer groups
(:mod:`.consumer_groups`), and hooking the cluster's API routes and publish path into each
account's JetStream engine before it starts (an assignment goes to its account's
:class:`~.account.AccountScope`). Must not know: Raft's rules, the wire, a stream's rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import msgspec

from jetpy.jetstream import errors as E
from jetpy.jetstream.api.messages import StreamCreateResponse, StreamUpdateResponse
from jetpy.jetstream.api.streams import StreamApi
from jetpy.jetstream.errors import ApiError
from jetpy.jetstream.models import Placement, StreamConfig, StreamInfo, encode
from jetpy.jetstream.ports import MessageHandler
from jetpy.jetstream.service import JetStream
from jetpy.jetstream.stream import Stream, pub_error
from jetpy.server.broker import Broker, Subscription
from jetpy.server.jscluster.account import AccountScope, qualified
from jetpy.server.jscluster.advisories import leader_changed
from jetpy.server.jscluster.api import ClusterApi
from jetpy.server.jscluster.backups import snapshot_route
from jetpy.server.jscluster.catchup import decode_request, read_batch
from jetpy.server.jscluster.catchup import encode as encode_catchup
from jetpy.server.jscluster.consumer_api import ConsumerClusterApi
from jetpy.server.jscluster.consumer_groups import ConsumerGroups
from jetpy.server.jscluster.forming import NAMES_FILE, ROUND_WAIT, SETTLE, STATE_SUBJECT, MetaForming
from jetpy.server.jscluster.local import LocalStream, Replica, copies, r1_here
from jetpy.server.jscluster.membership import leave, moving, reconcile
from jetpy.server.jscluster.meta import META_GROUP, ConsumerAssignment, MetaMachine, StreamAssignment
from jetpy.server.jscluster.origin_api import origin_consumer_route
from jetpy.server.jscluster.placement import TAGS_SUBJECT, ServerTags, choose, suits
from jetpy.server.jscluster.placements import Drop, Placements
from jetpy.server.jscluster.report import jsz_overlay, meta_cluster
from jetpy.server.jscluster.restores import ClusterRestores
from jetpy.server.jscluster.streams import ConfigOp, StreamReplica, log_owned_expiry
from jetpy.server.jscluster.system_api import SystemApi
from jetpy.server.jscluster.usage import ClusterUsage, limit_of
from jetpy.server.nrg import GroupConfig, ProposalError, RaftGroup, RaftHost, RaftHostError, member_id

__all__ = ["ClusteredJetStream"]

log = logging.getLogger("jetpy.jetstream")

CREATED_SUBJECT = "$JSC.CR.{}.{}"
"""In the system account: the meta leader asks a stream's leader to answer a create of it
(account, stream; payload: the requester's reply subject)."""

INFO_SUBJECT = "$JSC.SI.{}.{}"
"""In the system account: a stream's leader answers with the stream's info (StreamInfo JSON), for
the meta leader's ``STREAM.LIST``."""
GATHER_WAIT = 2.0  # seconds the meta leader waits for streams' leaders to give their info

CATCHUP_SUBJECT = "$JSC.CU.{}.{}"
"""In the system account: a replica behind its leader's snapshot asks the stream's other replicas
for stored messages (``catchup.CatchupRequest``, answered with a ``CatchupBatch`` by each that
is not behind itself: the first answer is taken)."""
CATCHUP_WAIT = 2.0  # seconds a replica waits for a batch before asking again

SNAPSHOT_ENTRIES = 8192
"""Applied entries after which a group of this cluster's JetStream (the meta group, each stream's)
snapshots its state and compacts its log, unless the Raft config says otherwise..."""
SNAPSHOT_BYTES = 64 << 20  # ...or this much applied entry data


def _every(subject: str) -> str:
    """The subscription to one of those subjects for every account and stream."""
    return subject.split("{", 1)[0] + ">"


class ClusteredJetStream(Placements):
    def __init__(
        self,
        server_name: str,
        cluster_name: Callable[[], str],
        host: RaftHost,
        system: Broker,
        peers: Callable[[], list[str]],
        foreign: Callable[[], list[str]],
        expected_servers: Callable[[], int],
        config: GroupConfig | None = None,
        traffic_account: str = "",
        tags: Sequence[str] = (),
    ) -> None:
        self.server_name = server_name
        self._cluster_name = cluster_name
        self.host = host
        self.system = system
        self._peers = peers
        self.expected_servers = expected_servers  # how many servers the routes name, this one included
        self.traffic_account = traffic_account  # the account the groups' traffic crosses
        self.tags = [t.lower() for t in tags]  # this server's (server_tags), placement's
        self._tags: dict[str, list[str]] = {server_name: self.tags}  # servers' tags, as they gave them
        config = config or GroupConfig()
        if not config.snapshot_entries and not config.snapshot_bytes:
            config = dataclasses.replace(
                config, snapshot_entries=SNAPSHOT_ENTRIES, snapshot_bytes=SNAPSHOT_BYTES
            )
        self.config = config
        self.meta = MetaMachine(self)
        self.meta_group: RaftGroup | None = None
        self._meta_started = 0.0  # monotonic time this server's member of it started
        self.accounts: dict[str, AccountScope] = {}  # each account with JetStream here
        self._started = False
        # assignments to act on in log order: a stream to hold a replica of, a new config for
        # one (and where to answer), a replica to drop, or a consumer's change (ConsumerGroups')
        self._actions: asyncio.Queue[
            StreamAssignment | tuple[StreamAssignment, str] | Drop | Callable[[], Awaitable[None]]
        ] = asyncio.Queue()
        self.act: Callable[[Callable[[], Awaitable[None]]], None] = self._actions.put_nowait
        self.usage = ClusterUsage(server_name, system, self.accounts)  # accounts' storage limits
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()  # replicas leaving, groups reconciled
        self._settling: set[str] = set()  # groups of streams scaled down to R1, being dropped
        self._subs: list[Subscription] = []
        self._forming_sub: Subscription | None = None  # the answers about the meta group
        self._inboxes = itertools.count(1)
        self.system_api = SystemApi(self, system, cluster_name)
        # who founds the meta group, or joins it (a settle period of SETTLE, or one election
        # timeout where that is shorter: the tests' fast timers)
        self.forming = MetaForming(
            server_name,
            system,
            peers,
            foreign,
            expected_servers,
            min(SETTLE, config.election_timeout),
            host.names,
        )

    # -- hooked into the engine before it starts ---------------------------------------------------

    def cluster_name(self) -> str:
        return self._cluster_name()

    def prepare(self, js: JetStream) -> None:
        """Give an account's engine the cluster's publish path and API routes (before
        ``js.start``; one given JetStream while the server runs is told to
        :meth:`account_started` once started)."""
        scope = AccountScope(self, js)
        self.accounts[scope.account] = scope
        replicas = scope.replicas
        js.registry.ingest_factory = lambda stream, registry: self._ingest_factory(scope, stream)
        js.registry.listening = lambda stream: self._listening(replicas, stream)
        js.registry.expiry.log_owned = log_owned_expiry
        single_create = js.router.routes["CONSUMER.CREATE"]
        api = ClusterApi(
            scope, StreamApi(js.registry, js.committer), js.api_stats, lambda: js.router.replying_to
        )
        js.router.routes = api.routes(js.router.routes)
        consumer_api = ConsumerClusterApi(scope, js.registry.resources, lambda: js.router.replying_to)
        js.router.routes.update(consumer_api.routes())
        js.router.routes["STREAM.SNAPSHOT"] = api.unless_leaderless(
            "STREAM.SNAPSHOT", snapshot_route(scope, js.snapshots)
        )
        restores = ClusterRestores(scope, js.snapshots, js.registry, js.bus, self.server_name)
        js.router.routes["STREAM.RESTORE"] = api.unless_leaderless("STREAM.RESTORE", restores.route())
        # mirrors' and sources' consumers: the origin stream's leader's own (origin_api)
        js.router.routes["CONSUMER.CREATE"] = origin_consumer_route(
            single_create,
            js.router.routes["CONSUMER.CREATE"],
            scope.replica,
            lambda stream: stream in scope.assignments,
        )
        js.consumers.recovers = False  # the consumers are the meta group's (consumer_groups)
        js.sourcing.enabled = False  # a mirror's or sources' copies: its leader's (copiers)
        # direct gets: each replica answers its stream's in one queue group (StreamReplica)
        js.direct.answerer = lambda name: None

    def account_started(self, account: str) -> None:
        """An account given JetStream while the server runs (its engine started): the
        assignments the meta group holds for it are acted on."""
        scope = self.accounts.get(account)
        if scope is None or not self._started:
            return
        scope.consumer_groups.start(scope.js)
        for sa in self.meta.streams_of(account).values():
            self._actions.put_nowait(sa)
        for cs in self.meta.consumers_of(account).values():
            for ca in cs.values():
                self.consumer_assigned(ca)

    def _listening(self, replicas: Mapping[str, Replica], stream: Stream) -> bool:
        """A stream takes published messages on its leader's server only (nats-server's way:
        a publish on another server is routed there, not to every replica)."""
        rep = replicas.get(stream.name)
        return rep is not None and rep.stream is stream and rep.is_leader

    def _ingest_factory(self, scope: AccountScope, stream: Stream) -> MessageHandler:
        name = stream.name
        replicas = scope.replicas
        if limit_of(scope, stream.config.storage):
            return self._limited_ingest(scope, stream)

        def ingest(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            rep = replicas.get(name)
            if rep is not None and rep.stream is stream:
                rep.ingest(subject, reply, hdr_len, data)

        return ingest

    def _limited_ingest(self, scope: AccountScope, stream: Stream) -> MessageHandler:
        """The publish path of a stream whose account limits its storage: its leader refuses a
        message that would take the account past the limit (10002) before proposing it
        (:mod:`.usage`)."""
        name = stream.name
        replicas, usage, bus = scope.replicas, self.usage, scope.js.bus

        def ingest(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            rep = replicas.get(name)
            if rep is None or rep.stream is not stream:
                return
            if rep.is_leader and usage.would_exceed(scope, rep, len(subject), hdr_len, len(data) - hdr_len):
                if reply is not None and not stream.config.no_ack:
                    bus.publish(
                        reply.decode(), None, pub_error(name, ApiError.of(E.ACCOUNT_RESOURCES_EXCEEDED))
                    )
                return
            rep.ingest(subject, reply, hdr_len, data)

        return ingest

    # -- life cycle ----------------------------------------------------------------------------------

    def answer_forming(self) -> None:
        """Answer the other servers' questions about the meta group from now on (the server
        does so before its routes are up, :mod:`.forming`)."""
        if self._forming_sub is None:
            self._forming_sub = self.system.subscribe_internal(STATE_SUBJECT, self.forming.on_question)
            self._subs.append(self._forming_sub)

    async def start(self) -> None:
        self.answer_forming()
        self._subs += [
            self.system.subscribe_internal(_every(CREATED_SUBJECT), self._on_created),
            self.system.subscribe_internal(_every(INFO_SUBJECT), self._on_info),
            self.system.subscribe_internal(_every(CATCHUP_SUBJECT), self._on_catchup),
            self.system.subscribe_internal(TAGS_SUBJECT, self._on_tags),
        ]
        for scope in self.accounts.values():
            scope.consumer_groups.start(scope.js)
        self.usage.start()
        self._started = True
        self.system_api.start()
        self._tasks = [
            asyncio.create_task(self._form_meta(), name="jetstream-meta"),
            asyncio.create_task(self._work(), name="jetstream-assignments"),
        ]

    async def stop(self) -> None:
        for t in [*self._tasks, *self._background]:
            t.cancel()
        for sub in self._subs:
            self.system.unsubscribe_internal(sub)
        self._subs = []
        self._forming_sub = None
        self.system_api.stop()
        self.usage.stop()
        for scope in self.accounts.values():
            scope.consumer_groups.stop()
            for rep in scope.replicas.values():
                rep.close()
        # the groups are stopped with the Raft host (their logs synced)

    async def _form_meta(self) -> None:
        """Start this server's member of the meta group: recovered from its log, else founded
        with the cluster's JetStream servers or joining the group they run (:mod:`.forming`);
        then keep the names of its members known."""
        root = self.host.root
        have_log = root is not None and (root / META_GROUP).exists()
        if root is not None:
            self.forming.names_file = root / NAMES_FILE
            await self.forming.load_names()
        founders: list[str] = []
        if not have_log:
            founders = await self.forming.founders_or_join()
            if founders:
                log.info("JetStream cluster: forming the meta group with %s", ", ".join(founders))
            else:
                log.info("JetStream cluster: joining the meta group as a new member")
        try:
            self.meta_group = await self.host.start_group(META_GROUP, self.meta, founders, self.config)
            self._meta_started = time.monotonic()
        except RaftHostError as exc:  # JetStream stays without a meta group: said, not hidden
            log.error("JetStream cluster: the meta group could not be started: %s", exc)
            return
        self.host.names.setdefault(self.meta_group.member, self.server_name)  # a joiner's new id
        self.forming.founders = founders
        self.forming.group = self.meta_group
        await self.forming.learn_names()

    # -- the meta group's state, as the API sees it ------------------------------------------------

    @property
    def is_meta_leader(self) -> bool:
        g = self.meta_group
        return g is not None and g.is_leader

    @property
    def leaderless(self) -> bool:
        """This server's member of the meta group knows no leader, and has run long enough for
        that to mean the group lost its quorum (two election timeouts: nats-server's 10 s with
        its timers): every API request here is then answered 10008, as nats-server does. A group
        that never had a leader is given a round of the forming more (its founders start their
        members up to a round apart: :mod:`.forming`)."""
        g = self.meta_group
        if g is None or g.node.leader or g.removed:  # a removed server leaves the API to others
            return False
        grace = 2 * self.config.election_timeout
        if not g.ever_had_leader:
            grace += 2 * ROUND_WAIT
        return time.monotonic() - self._meta_started > grace

    @property
    def assignments(self) -> list[StreamAssignment]:
        """Every account's stream assignments."""
        return self.meta.all_streams()

    def health_problem(self) -> str:
        """Why this server is not healthy for /healthz ("" when it is), in nats-server's words:
        no meta group or no meta leader known, a meta group not current (entries still to apply,
        or a leader that lost its quorum), or
        a replica of a stream still catching up with its group."""
        g = self.meta_group
        if g is None or not g.node.leader:
            return "JetStream has not established contact with a meta leader"
        if not g.status().current:
            return "JetStream is not current with the meta leader"
        for account, scope in sorted(self.accounts.items()):
            for name, rep in sorted(scope.replicas.items()):
                if not rep.current:
                    return f"JetStream stream '{account} > {name}' is not current"
        return ""

    def jsz_overlay(self, doc: dict[str, Any], raft: bool) -> None:
        """/jsz's document with the cluster's view (``report.jsz_overlay``)."""
        g = self.meta_group
        meta = meta_cluster(
            self._cluster_name(), g.status() if g is not None else None, self.host.known_names()
        )
        for account, scope in self.accounts.items():

            def replica(name: str, replicas: Mapping[str, Replica] = scope.replicas) -> Any:
                rep = replicas.get(name)
                if rep is None:
                    return None
                return rep.cluster_info(), rep.group_name

            jsz_overlay(doc, meta, account, replica, raft)

    def js_servers(self) -> list[str]:
        g = self.meta_group
        if g is None:
            return [self.server_name]
        names = self.host.known_names()
        # a server that joined again under a new id (its directory lost) is one server; a
        # member whose server's name is not known here (it joined under a new id and has been
        # down since this server started) is not placed on
        return sorted({names[m] for m in g.node.membership.voters if m in names})

    async def place(
        self, replicas: int, placement: Placement | None = None, exclude: Sequence[str] = ()
    ) -> list[str]:
        """The servers ``replicas`` replicas go on (:func:`.placement.choose`), none of
        ``exclude``; servers' tags are asked for when the placement names some."""
        servers = [s for s in self.js_servers() if s not in exclude]
        load = {s: 0 for s in servers}
        for sa in self.meta.all_streams():
            for p in sa.peers:
                if p in load:
                    load[p] += 1
        tags = await self.server_tags(servers) if placement is not None and placement.tags else {}
        return choose(servers, load, replicas, placement, self._cluster_name(), tags)

    async def moved(self, peers: Sequence[str], replicas: int, placement: Placement | None) -> list[str]:
        """A stream's servers once its placement is ``placement``: those of ``peers`` it
        allows, then others it allows for the rest (:meth:`place`; 10005 if too few, naming
        the tags some server of the cluster lacks, as for a create)."""
        tags = await self.server_tags(list(peers)) if placement is not None and placement.tags else {}
        keep = [p for p in peers if suits(p, placement, self._cluster_name(), tags)][:replicas]
        if len(keep) == replicas:
            return keep
        try:
            return keep + await self.place(replicas - len(keep), placement, peers)
        except ApiError:
            await self.place(replicas, placement)  # the refusal a create would have
            raise

    async def server_tags(self, servers: list[str]) -> dict[str, list[str]]:
        """Each server's tags, asked of those not known yet (those answering within
        :data:`GATHER_WAIT`; tags change only with a restart, which a reload refuses)."""
        known = self._tags
        missing = [s for s in servers if s not in known]
        if missing:
            done = asyncio.Event()
            inbox = f"$JSC.RT.{member_id(self.server_name)}.{next(self._inboxes)}"

            def on_reply(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
                try:
                    st = msgspec.json.decode(data[hdr_len:], type=ServerTags)
                except (msgspec.DecodeError, ValueError):
                    return
                known[st.name] = [t.lower() for t in st.tags]
                if all(s in known for s in missing):
                    done.set()

            sub = self.system.subscribe_internal(inbox, on_reply)
            try:
                self.system.publish_internal(TAGS_SUBJECT, inbox, b"")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), GATHER_WAIT)
            finally:
                self.system.unsubscribe_internal(sub)
        return {s: known[s] for s in servers if s in known}

    def _on_tags(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        if reply is not None:
            doc = ServerTags(self.server_name, self.tags)
            self.system.publish_internal(reply.decode(), None, msgspec.json.encode(doc))

    async def propose_meta(self, op: bytes) -> bytes:
        g = self.meta_group
        if g is None:
            raise ApiError.of(E.CLUSTER_NOT_AVAIL)
        try:
            return await g.propose(op)
        except ProposalError as exc:
            log.warning("JetStream cluster: a meta change was not made: %s", exc)
            raise ApiError.of(E.CLUSTER_NOT_AVAIL) from None

    async def stream_infos(self, account: str, names: list[str]) -> dict[str, StreamInfo]:
        """The named streams' infos from their leaders (those that answer within
        :data:`GATHER_WAIT`)."""
        got: dict[str, StreamInfo] = {}
        if not names:
            return got
        done = asyncio.Event()
        inbox = f"$JSC.RI.{member_id(self.server_name)}.{next(self._inboxes)}"

        def on_reply(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            try:
                info = msgspec.json.decode(data[hdr_len:], type=StreamInfo)
            except (msgspec.DecodeError, ValueError):
                return
            got[info.config.name] = info
            if len(got) >= len(names):
                done.set()

        sub = self.system.subscribe_internal(inbox, on_reply)
        try:
            for name in names:
                self.system.publish_internal(INFO_SUBJECT.format(account, name), inbox, b"")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), GATHER_WAIT)
        finally:
            self.system.unsubscribe_internal(sub)
        return got

    def _replica_named(self, subject: bytes) -> Replica | None:
        """This server's replica of the stream an internal subject names (account, stream)."""
        account, [name] = qualified(subject, 1)
        scope = self.accounts.get(account)
        return scope.replicas.get(name) if scope is not None else None

    def _on_info(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        rep = self._replica_named(subject)
        if reply is not None and rep is not None and rep.is_leader:
            self.system.publish_internal(reply.decode(), None, encode(rep.info()))

    def _on_catchup(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        rep = self._replica_named(subject)
        if reply is None or rep is None or rep.group is None or rep.behind:
            return
        try:
            req = decode_request(data[hdr_len:])
        except (msgspec.DecodeError, ValueError):
            return
        self.system.publish_internal(reply.decode(), None, encode_catchup(read_batch(rep.stream.store, req)))

    async def _fetch_catchup(self, account: str, name: str, payload: bytes) -> bytes | None:
        """A batch of the stream's stored messages from its leader (None: no answer in time)."""
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        inbox = f"$JSC.RC.{member_id(self.server_name)}.{next(self._inboxes)}"

        def on_reply(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            if not got.done():
                got.set_result(data[hdr_len:])

        sub = self.system.subscribe_internal(inbox, on_reply)
        try:
            self.system.publish_internal(CATCHUP_SUBJECT.format(account, name), inbox, payload)
            return await asyncio.wait_for(got, CATCHUP_WAIT)
        except TimeoutError:
            return None
        finally:
            self.system.unsubscribe_internal(sub)

    def ask_leader_to_answer(self, account: str, name: str, reply: bytes) -> None:
        self.system.publish_internal(CREATED_SUBJECT.format(account, name), None, reply)

    # -- the meta group's listener (every server, in log order) ------------------------------------

    def assigned(self, sa: StreamAssignment) -> None:
        self._actions.put_nowait(sa)

    def unassigned(self, sa: StreamAssignment) -> None:
        self._actions.put_nowait(Drop(sa.account, sa.name))

    def updated(self, sa: StreamAssignment, reply: str) -> None:
        self._actions.put_nowait((sa, reply))

    def restored(self, streams: list[StreamAssignment]) -> None:
        keep = {(sa.account, sa.name) for sa in streams}
        for account, scope in self.accounts.items():
            for name in scope.replicas:
                if (account, name) not in keep:
                    self._actions.put_nowait(Drop(account, name))
        for sa in streams:  # a replica held already follows its (maybe new) placement
            held = self.accounts.get(sa.account)
            self._actions.put_nowait((sa, "") if held is not None and sa.name in held.replicas else sa)

    def _consumers(self, ca: ConsumerAssignment, work: Callable[[ConsumerGroups], Awaitable[None]]) -> None:
        """A consumer's change, for its account's consumer groups (none: no JetStream for that
        account here, said once its stream's replica is placed here)."""

        async def act() -> None:
            scope = self.accounts.get(ca.account)
            if scope is not None:
                await work(scope.consumer_groups)

        self._actions.put_nowait(act)

    def consumer_assigned(self, ca: ConsumerAssignment) -> None:
        self._consumers(ca, lambda groups: groups.add(ca))

    def consumer_unassigned(self, ca: ConsumerAssignment, reply: str = "") -> None:
        self._consumers(ca, lambda groups: groups.remove(ca, reply))

    def consumer_updated(self, ca: ConsumerAssignment, reply: str) -> None:
        self._consumers(ca, lambda groups: groups.update(ca, reply))

    def consumers_restored(self, consumers: list[ConsumerAssignment]) -> None:
        for account, scope in self.accounts.items():
            theirs = [ca for ca in consumers if ca.account == account]
            for gone in scope.consumer_groups.gone_after_restore(theirs):
                self.consumer_unassigned(gone)
        for ca in consumers:
            self.consumer_assigned(ca)

    async def _work(self) -> None:
        while True:
            action = await self._actions.get()
            if callable(action):
                name, work = "(a consumer's)", action()
            elif isinstance(action, Drop):
                name, work = action.name, self._remove(action.account, action.name)
            elif isinstance(action, tuple):
                name, work = action[0].name, self._update(*action)
            else:
                name, work = action.name, self._add(action)
            try:
                await work
            except Exception:
                log.exception("JetStream cluster: stream '%s' could not be changed here", name)

    async def _add(self, sa: StreamAssignment) -> None:
        scope = self.accounts.get(sa.account)
        if scope is not None and sa.name in scope.replicas:
            return
        root = self.host.root
        group_dir = root / sa.group if root is not None else None
        has_group = group_dir is not None and group_dir.exists()
        if self.server_name not in sa.peers and not has_group:
            return
        now = self.meta.streams_of(sa.account).get(sa.name)
        if (now is None or now.group != sa.group) and not has_group:
            # removed since (a restart replaying the meta log): its store, if any, is a later
            # stream's of the same name (a restored one holds messages no log has), left alone
            return
        latest = now if now is not None and now.group == sa.group else sa
        if self.server_name not in latest.peers and not has_group:
            return  # placed elsewhere since (a restart replaying the meta log): nothing to hold
        if scope is None:  # the servers' configs differ: said, the other replicas go on
            log.error(
                "JetStream cluster: stream '%s > %s' is placed on this server, but account %r has "
                "no JetStream here: its replica is not started",
                sa.account,
                sa.name,
                sa.account,
            )
            return
        registry = scope.js.registry
        stream = registry.get(sa.name)
        if r1_here(latest, self.server_name, has_group, stream is not None):
            if stream is None:
                stream = registry.create(msgspec.json.decode(sa.config, type=StreamConfig))
            self._hold_local(scope, stream, msgspec.structs.replace(latest, reply=sa.reply))
            log.info("JetStream cluster: stream '%s > %s' held here (R1, no group)", sa.account, sa.name)
            return
        if group_dir is not None and not has_group:
            group_dir.mkdir(parents=True)  # before the store: a replica of a group, not R1
        if stream is None:  # its store; the cluster's ingest handler
            stream = registry.create(msgspec.json.decode(sa.config, type=StreamConfig))
        rep = self._new_replica(scope, stream, sa)
        # a server placed after the stream's creation joins its group as a new member
        founders = () if self.server_name in sa.joined else sa.peers
        await self._start_group(scope, rep, sa, founders)
        log.info(
            "JetStream cluster: stream '%s > %s' replica started (group %s)", sa.account, sa.name, sa.group
        )
        if self.server_name not in sa.peers:  # restored from a meta snapshot that placed it
            self._spawn(self._leave(scope, rep, sa))  # elsewhere meanwhile: its group still has it

    async def _update(self, sa: StreamAssignment, reply: str) -> None:
        scope = self.accounts.get(sa.account)
        rep = scope.replicas.get(sa.name) if scope is not None else None
        if scope is None or rep is None:
            if self.server_name in sa.peers:  # placed here by scaling up or a peer's removal
                await self._add(sa)
            return
        rep.assigned_config = sa.config
        rep.assigned_peers = sa.peers
        if isinstance(rep, LocalStream):
            if self.meta.streams_of(sa.account).get(sa.name) is not sa:  # changed again since (a
                if reply:  # restart replaying the meta log, or two updates at once): the later one does it
                    scope.js.bus.publish(reply, None, encode(StreamUpdateResponse.of(rep.info())))
                return
            moved = len(sa.peers) > 1 or self.server_name not in sa.peers
            if moved or copies(msgspec.json.decode(sa.config, type=StreamConfig)):
                rep = await self._to_group(scope, rep, sa)  # moved: the new server joins, then this leaves
        if self.server_name not in sa.peers:  # taken off this server
            if isinstance(rep, StreamReplica):
                self._spawn(self._leave(scope, rep, sa))
            return
        if rep.is_leader:
            await self._push_config(scope, rep, reply)

    async def _leave(self, scope: AccountScope, rep: StreamReplica, sa: StreamAssignment) -> None:
        """Once the stream's group has removed this server's member, its replica goes. Placed
        here again meanwhile (scaled down, then up): a member still in the group stays, one
        removed already is replaced by a new one that joins."""
        g = rep.group
        if g is not None:
            await leave(g, sa.peers, self.config.tick, lambda: self.server_name in rep.assigned_peers)
        if scope.replicas.get(sa.name) is not rep:
            return
        drop = Drop(sa.account, sa.name)
        if self.server_name not in rep.assigned_peers:
            self._actions.put_nowait(drop)
        elif (
            g is not None and g.removed and (now := self.meta.streams_of(sa.account).get(sa.name)) is not None
        ):
            self._actions.put_nowait(drop)
            self._actions.put_nowait(now)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _push_config(self, scope: AccountScope, rep: Replica, reply: str) -> None:
        """The stream's leader puts the assigned config into the stream's own log (every
        replica switches at the same message), then answers the update."""
        try:
            await rep.propose_change(ConfigOp(rep.assigned_config))
            g = rep.group
            if (
                g is not None
                and isinstance(rep, StreamReplica)
                and moving(g, rep.assigned_peers, self.server_name)
            ):
                self._spawn(self._reconcile(scope, rep))  # answered now: the move takes a while
            elif g is not None:  # members whose servers are no longer named leave
                await reconcile(g, lambda: rep.assigned_peers)
                rep = await self._settle(scope, rep)
            resp = StreamUpdateResponse.of(rep.info())
        except ApiError as e:
            resp = StreamUpdateResponse.failure(e)
        if reply:
            scope.js.bus.publish(reply, None, encode(resp))

    async def _remove(self, account: str, name: str) -> None:
        scope = self.accounts.get(account)
        rep = scope.replicas.pop(name, None) if scope is not None else None
        if scope is None or rep is None:
            return
        rep.close()
        js = scope.js
        if rep.group is not None:
            await self.host.stop_group(rep.group.name)
            root = self.host.root
            if root is not None:
                await asyncio.to_thread(shutil.rmtree, root / rep.group.name, True)
        if js.registry.get(name) is rep.stream:
            js.registry.delete(rep.stream)
        log.info("JetStream cluster: stream '%s > %s' replica deleted", account, name)

    # -- answers from a stream's leader -------------------------------------------------------------

    def _leader_changed(
        self, scope: AccountScope, rep: StreamReplica, sa: StreamAssignment, leading: bool
    ) -> None:
        js = scope.js
        js.registry.listen(rep.stream)  # its subjects subscribed here while it leads
        js.registry.expiry.schedule()  # a leader proposes the expiries that go through the log
        if rep.group is not None:
            leader_changed(js.bus, rep.stream.name, rep.group.status(), self.server_name, leading)
        if rep.copier is not None:
            rep.copier.lead(leading)
        if not leading:
            return
        g = rep.group
        if g is not None and (
            any(p.name not in rep.assigned_peers for p in g.status().peers)
            or rep.assigned_peers == [self.server_name]
        ):
            self._spawn(self._reconcile(scope, rep))  # a removal the last leader left undone
        if sa.reply and rep.group is not None and not rep.answered_create:
            rep.answered_create = True
            self._answer_create(scope, rep, sa.reply.encode())
        if rep.assigned_config and rep.assigned_config != msgspec.json.encode(rep.stream.config):
            # an update the previous leader did not put in the stream's log (or not yet applied
            # here): the stream's log gets it now (the same config twice applies once), on the
            # servers assigned now (``sa`` is the assignment the replica started with)
            now = msgspec.structs.replace(sa, config=rep.assigned_config, peers=rep.assigned_peers)
            self._actions.put_nowait((now, ""))

    def _on_created(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        account, [name] = qualified(subject, 1)
        scope = self.accounts.get(account)
        rep = scope.replicas.get(name) if scope is not None else None
        if scope is not None and rep is not None and rep.is_leader:
            self._answer_create(scope, rep, data[hdr_len:])

    def _answer_create(self, scope: AccountScope, rep: Replica, reply: bytes) -> None:
        scope.js.bus.publish(
            reply.decode(), None, encode(StreamCreateResponse.of(rep.info(), did_create=True))
        )
