"""Forming the meta group: which JetStream servers found it, and when a server joins it instead.

Owns: the servers' exchange about the meta group (``$JSC.META.STATE`` in the system account:
every clustered JetStream server answers with a :class:`MetaHello` from before its routes are
up, whether or not its member of the meta group runs, so that a server slow to start its
JetStream is in the others' views from its first route on; a server without JetStream does not
answer, so it never becomes a member), the names of the members that joined under a new id (learnt from the answers, kept
in :data:`NAMES_FILE`), and the rule a server without a meta log (pristine, or its directory
deleted) follows (:func:`decide`):

* **A meta group runs** (some server answers with a running member): this server joins it as a
  new member under a new id (``RaftHost.start_group`` without founders), and the group's leader
  takes it in (a learner first, a voter once caught up). One exception keeps a founding
  simultaneous: a server the running members named as a founder (they founded with a set that
  includes it, in their current process, their group still exactly that set) founds with that
  set too, provided every other founder answered and none ever heard from this server's
  founder id (so no earlier incarnation of it voted or acknowledged anything that counted).
* **None runs**: the server founds the group once it knows at least ``max(2,
  cluster_size(routes))`` servers (those its routes reach, JetStream or not, and itself), the
  JetStream servers among them (its *view*) have not changed for a settle period (the routes
  gossip the rest of the cluster meanwhile), and every JetStream server of its view answered
  with the same view, settled too. It founds with its view: every founder the same set, so the
  same voters and the same member ids (derived from the names).

Safety: two groups would need two servers founding with different sets. Each founds with a view
every server of it reported settled and identical in its last round, and a server that sees a
running member never founds except with that member's own set. What remains: the views change
between one server's last round and another's (a server joins the cluster inside the settle
period and the round's answers cross that change), or the answers of a running member are lost
in a round: with seed-only routes every server is connected to the seed, which is in every
view, and reports one view at a time, so this takes a server joining within a round (at most
half a second) of the settle period's end. And a founder whose meta directory was deleted after it
ran would found again under its old id, which may have voted already, if every other founder
either lost its own directory too or never heard from it while running since the founding (a
founder that restarted says nothing of founding, and the server joins as a new member).

A server that has a route to a nats-server with JetStream (its route INFO says ``jetstream``;
jetpy's never does) neither founds nor joins: nats-server's meta group speaks its own Raft, and
two meta groups would both answer the API. It says so in its log and waits. (This is looked at
while the group forms: a nats-server with JetStream that joins the cluster later is not.)

Must not know: Raft's rules, how a group runs (``jetpy.server.nrg``), the assignments.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from jetpy.server.broker import Broker
from jetpy.server.nrg import RaftGroup, member_id

__all__ = ["NAMES_FILE", "ROUND_WAIT", "SETTLE", "STATE_SUBJECT", "MetaForming", "MetaHello", "decide"]

log = logging.getLogger("jetpy.jetstream")

STATE_SUBJECT: Final = "$JSC.META.STATE"
"""In the system account: a clustered JetStream server asks the others about the meta group
(payload: its own :class:`MetaHello`); each answers with its own."""

ROUND_WAIT: Final = 0.5  # seconds a server gathers the answers to one question (at most)
ROUND_PAUSE: Final = 0.1  # seconds between two rounds
SETTLE: Final = 2.0  # seconds a pristine server's view must stay unchanged before it founds
NAMES_EVERY: Final = 10.0  # seconds between questions while a member's server is unnamed
NAMES_POLL: Final = 1.0  # seconds between looks at the names (asked, or to keep)
NAMES_FILE: Final = "meta-names.json"
"""Next to the meta group's directory: the member id -> server name map this server learnt (a
member that joined under a new id is named only by itself: this keeps its name across a
restart of this server)."""


class MetaHello(msgspec.Struct, omit_defaults=True):
    """What a clustered JetStream server says of itself and the meta group."""

    name: str
    member: str = ""  # its member id in the meta group ("": no member runs here)
    leader: str = ""  # the meta leader's server name, as this server knows it
    voters: list[str] = []  # the meta group's voters (member ids), as this server knows them
    founders: list[str] = []  # the set it founded the group with (server names), in this process
    heard: list[str] = []  # member ids it heard from since (given with founders)
    view: list[str] = []  # a pristine server: the JetStream servers it knows, itself included
    settled: bool = False  # a pristine server: that view is stable and large enough


_decoder = msgspec.json.Decoder(MetaHello)


def decide(me: str, answers: dict[str, MetaHello], settled: bool, view: list[str]) -> list[str] | None:
    """What a pristine server ``me`` does after a round of ``answers`` (by server name, its
    own left out): None waits, ``[]`` joins the running group, a list founds it with those."""
    running = [a for a in answers.values() if a.member]
    if running:
        return _named_founders(me, answers, running)
    if settled and all(a.settled and a.view == view for a in answers.values()):
        return view
    return None


def _named_founders(me: str, answers: dict[str, MetaHello], running: list[MetaHello]) -> list[str]:
    mine = member_id(me)
    founders = next((a.founders for a in running if me in a.founders), None)
    if founders is None:
        return []
    voters = sorted(member_id(s) for s in founders)
    for name in founders:
        if name == me:
            continue
        a = answers.get(name)
        if a is None:
            return []
        if a.member:
            if a.founders != founders or sorted(a.voters) != voters or mine in a.heard:
                return []
        elif a.view != founders:
            return []
    return list(founders)


class MetaForming:
    """A server's side of the exchange: its answers, and the rounds of a pristine one."""

    def __init__(
        self,
        server_name: str,
        system: Broker,
        route_peers: Callable[[], list[str]],
        foreign: Callable[[], list[str]],
        expected_servers: Callable[[], int],
        settle: float,
        names: dict[str, str],
    ) -> None:
        self.server_name = server_name
        self.system = system
        self._route_peers = route_peers  # the servers the routes reach (JetStream or not)
        self._foreign = foreign  # those of them running nats-server's JetStream
        self._foreign_told: list[str] = []
        self._expected = expected_servers  # the servers the routes name (as routes reveal them)
        self.settle = settle
        self.names = names  # member id -> server name (the Raft host's)
        self.group: RaftGroup | None = None  # this server's member, once started
        self.names_file: Path | None = None  # where learnt names are kept (None: nowhere)
        self._saved: dict[str, str] = {}
        self.founders: list[str] = []  # the set this server founded with, if it did
        self.view: list[str] = [server_name]
        self.settled = False
        self._inboxes = itertools.count(1)

    def hello(self) -> MetaHello:
        g = self.group
        if g is None or g.removed:
            return MetaHello(self.server_name, view=self.view, settled=self.settled)
        leader = g.node.leader
        return MetaHello(
            self.server_name,
            member=g.member,
            leader=self.names.get(leader, leader) if leader else "",
            voters=sorted(g.node.membership.voters),
            founders=self.founders,
            heard=sorted(g.last_seen) if self.founders else [],
        )

    def on_question(self, subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
        with contextlib.suppress(msgspec.DecodeError, ValueError):
            self._learn(_decoder.decode(data[hdr_len:]))
        if reply is not None:
            self.system.publish_internal(reply.decode(), None, msgspec.json.encode(self.hello()))

    def _learn(self, a: MetaHello) -> None:
        if a.member and a.name:
            self.names.setdefault(a.member, a.name)

    async def ask(self, expect: frozenset[str] = frozenset()) -> dict[str, MetaHello]:
        """One round: every clustered JetStream server's answer within :data:`ROUND_WAIT`, or
        sooner once every server of ``expect`` answered."""
        got: dict[str, MetaHello] = {}
        inbox = f"$JSC.MS.{member_id(self.server_name)}.{next(self._inboxes)}"
        complete = asyncio.Event()

        def on_answer(subject: bytes, reply: bytes | None, hdr_len: int, data: bytes) -> None:
            try:
                a = _decoder.decode(data[hdr_len:])
            except (msgspec.DecodeError, ValueError):
                return
            self._learn(a)
            if a.name and a.name != self.server_name:
                got[a.name] = a
                if expect and expect <= got.keys():
                    complete.set()

        sub = self.system.subscribe_internal(inbox, on_answer)
        try:
            self.system.publish_internal(STATE_SUBJECT, inbox, msgspec.json.encode(self.hello()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(complete.wait(), ROUND_WAIT)
        finally:
            self.system.unsubscribe_internal(sub)
        return got

    async def founders_or_join(self) -> list[str]:
        """Rounds until :func:`decide` says: the founders to found with, or ``[]`` to join."""
        since = time.monotonic()
        known: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        while True:
            answers = await self.ask(frozenset(self.view) - {self.server_name})
            servers = frozenset({self.server_name, *answers, *(p for p in self._route_peers() if p)})
            view = frozenset({self.server_name, *answers})
            now = time.monotonic()
            if (view, servers) != known:
                known, since = (view, servers), now
            self.view = sorted(view)
            expected = max(2, self._expected())
            self.settled = len(servers) >= expected and now - since >= self.settle
            choice = decide(self.server_name, answers, self.settled, self.view)
            foreign = sorted(self._foreign())
            if foreign:  # nats-server's meta group runs its own Raft: two would answer the API
                if foreign != self._foreign_told:
                    self._foreign_told = foreign
                    log.error(
                        "JetStream cluster: %s run nats-server's JetStream in this cluster, which "
                        "jetpy's cannot share: this server's JetStream waits (no meta group, no "
                        "API answers) until they leave the cluster or run without JetStream",
                        ", ".join(foreign),
                    )
                await asyncio.sleep(ROUND_WAIT)
                continue
            if choice is not None:
                return choice
            await asyncio.sleep(ROUND_PAUSE)

    async def load_names(self) -> None:
        """The member names this server learnt before it restarted (:data:`NAMES_FILE`)."""
        path = self.names_file
        if path is None:
            return
        try:
            data = await asyncio.to_thread(path.read_bytes)
            known = msgspec.json.decode(data, type=dict[str, str])
        except (OSError, msgspec.DecodeError, ValueError):
            return
        for member, name in known.items():
            self.names.setdefault(member, name)
        self._saved = dict(self.names)

    async def learn_names(self) -> None:
        """While some voter of the meta group has no server name here (a member that joined
        under a new id, its name told only in its join requests and answers), ask again now and
        then; keep what was learnt in :data:`NAMES_FILE`, so that a restart while such a member
        is down still names it."""
        asked = float("-inf")
        while True:
            g = self.group
            now = time.monotonic()
            if (
                g is not None
                and now - asked >= NAMES_EVERY
                and any(v not in self.names for v in g.node.membership.voters)
            ):
                asked = now
                await self.ask()
            if self.names_file is not None and self.names != self._saved:
                self._saved = dict(self.names)
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(
                        _write_atomically, self.names_file, msgspec.json.encode(self._saved)
                    )
            await asyncio.sleep(NAMES_POLL)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
