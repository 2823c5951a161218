"""RaftHost: this server's Raft groups, each with its own directory, and their state.

Owns: where groups live on disk (``<root>/<group>/``, nats-server's place for them being
``<store_dir>/jetstream/$SYS/_js_/<group>/``; a ``member`` file holds this server's member id
in the group next to the log), starting a group (a founder creates it with the founders as its
voters; a new member creates an empty log under a new id and asks to join; an existing one is
recovered from its directory off the loop, the snapshot's data kept in memory so that sending
it to a follower never reads the disk on the loop), the worker threads every group's disk jobs run
on, the first founder of a new group campaigning at once, the names of members (member id -> server name: founders', the cluster's servers', and those
joiners give), stopping every group, and their status for monitoring. Must not know: Raft's rules
(``jetpy.raft``), one group's loop (``group``), what a group replicates, or HTTP.

A directory that lost its state (segments or a snapshot without the hard-state file that says
what this member voted for) is never reused: it is moved aside (``<group>.lost-<time>``) and the
member joins again under a new id, because the old one may have voted in a term it no longer
remembers. A directory deleted altogether cannot be told from a new one: a founder started
again with its founders list on an empty directory founds the group again (etcd's rule too:
start such a server as a new member instead).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from jetpy.raft import Membership, Snapshot, SnapshotMeta
from jetpy.server.broker import Broker
from jetpy.server.nrg.config import GroupConfig
from jetpy.server.nrg.group import RaftGroup
from jetpy.server.nrg.machine import StateMachine
from jetpy.server.nrg.names import member_id, new_member_id, valid_group_name
from jetpy.server.nrg.status import GroupStatus
from jetpy.store.fileio import fsync_dir
from jetpy.store.raftlog import RaftLogStore
from jetpy.store.raftlog.statefiles import HARDSTATE_FILE, SNAPSHOT_FILE

__all__ = ["IO_THREADS", "MEMBER_FILE", "RaftHost", "RaftHostError", "groups_root"]

log = logging.getLogger("jetpy.server")

MEMBER_FILE: Final = "member"
IO_THREADS: Final = 4
EAGER_CAMPAIGN: Final = 2.0
"""A new group's first founder campaigns at every tick until a leader is known, for this many
election timeouts (nats-server's preferred member campaigns at once too): a stream's create is
answered in a few ticks, not after the 5-10 s of a first election timeout."""
"""Worker threads for the groups' fsyncs and snapshot writes (each group has at most one job in
flight; more groups than threads simply queue, each still one fsync per batch)."""


def groups_root(store_dir: str, system_account: str = "$SYS") -> Path | None:
    """Where a server's groups live under its store directory (None: it has none): the system
    account's directory, as nats-server keeps them."""
    return Path(os.path.abspath(store_dir), "jetstream", system_account, "_js_") if store_dir else None


class RaftHostError(Exception):
    """A group that cannot be started as asked (the reason is the message)."""


class RaftHost:
    def __init__(
        self,
        server_name: str,
        broker: Broker,
        root: Path | None,
        peer_names: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self.server_name = server_name
        self.broker = broker  # the system account's: the groups' traffic crosses routes there
        self.root = root
        self._peer_names = peer_names  # the cluster's servers, for naming founding members
        self.groups: dict[str, RaftGroup] = {}
        self.names: dict[str, str] = {member_id(server_name): server_name}
        self._executor = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="raft-io")
        self._starting: set[str] = set()

    async def start_group(
        self,
        name: str,
        machine: StateMachine,
        founders: Sequence[str] = (),
        config: GroupConfig | None = None,
    ) -> RaftGroup:
        """Start this server's member of group ``name``: recovered from its directory if it has
        one; else founded with ``founders`` (server names, this one among them) as its voters;
        else a new member that asks the group to take it in."""
        if not valid_group_name(name):
            raise RaftHostError(f"invalid raft group name {name!r}: one subject token, no path separators")
        if self.root is None:
            raise RaftHostError("a raft group needs a store directory (-sd, jetstream { store_dir })")
        if name in self.groups or name in self._starting:
            raise RaftHostError(f"raft group {name} is already running")
        for f in founders:
            self.names[member_id(f)] = f
        self._starting.add(name)
        try:
            loop = asyncio.get_running_loop()
            member, store, joining = await loop.run_in_executor(
                self._executor, self._open, self.root / name, tuple(founders)
            )
            group = RaftGroup(
                name,
                member,
                store,
                machine,
                self.broker,
                self._executor,
                config or GroupConfig(),
                self.server_name,
                self.names,
                joining=joining,
            )
            if store.report.problems:
                for problem in store.report.problems:
                    log.warning("raft %s: recovery: %s", name, problem)
            group.start()
            if founders and founders[0] == self.server_name and not joining and store.last_index() == 0:
                group.campaign_soon(EAGER_CAMPAIGN * group.cfg.election_timeout)
            self.groups[name] = group
            log.info(
                "raft %s: started member %s (%s)",
                name,
                member,
                "joining" if joining else ("founder" if store.last_index() == 0 else "recovered"),
            )
            return group
        finally:
            self._starting.discard(name)

    def _open(self, d: Path, founders: tuple[str, ...]) -> tuple[str, RaftLogStore, bool]:
        """(member id, store, joining) for the directory ``d`` (on a worker thread)."""
        id_file = d / MEMBER_FILE
        if (d / HARDSTATE_FILE).exists():
            try:
                member = id_file.read_text().strip()
            except OSError as exc:
                raise RaftHostError(f"{d}: a raft log without its member file: {exc}") from exc
            return member, RaftLogStore.open(d, keep_snapshot=True), False
        if d.exists() and (any(d.glob("*.rlog")) or (d / SNAPSHOT_FILE).exists()):
            aside = d.with_name(f"{d.name}.lost-{time.strftime('%Y%m%dT%H%M%S')}")
            log.error(
                "raft %s: %s holds a log but no hard state (what this member voted for is lost): "
                "moved to %s, joining again as a new member",
                d.name,
                d,
                aside.name,
            )
            os.replace(d, aside)
            fsync_dir(d.parent)
            founders = ()
        if self.server_name in founders:
            member = member_id(self.server_name)
            voters = frozenset(member_id(f) for f in founders)
            snapshot: Snapshot | None = Snapshot(SnapshotMeta(0, 0, Membership(voters)))
        else:
            member = new_member_id(self.server_name)
            snapshot = None
        d.mkdir(parents=True, exist_ok=True)
        tmp = id_file.with_name(MEMBER_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write(member + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, id_file)
        fsync_dir(d)
        return member, RaftLogStore.create(d, snapshot, keep_snapshot=True), snapshot is None

    async def stop_group(self, name: str) -> None:
        group = self.groups.pop(name, None)
        if group is not None:
            await group.stop()

    async def stop(self) -> None:
        """Stop every group (their stores synced and closed), then the worker threads."""
        groups = list(self.groups.values())
        self.groups.clear()
        if groups:
            await asyncio.gather(*(g.stop() for g in groups), return_exceptions=True)
        self._executor.shutdown(wait=False, cancel_futures=True)  # idle now: never wait on the loop

    def known_names(self) -> dict[str, str]:
        """Member id -> server name, the cluster's current servers included."""
        if self._peer_names is not None:
            for n in self._peer_names():
                if n:
                    self.names.setdefault(member_id(n), n)
        return self.names

    def status(self) -> list[GroupStatus]:
        self.known_names()
        return [g.status() for _, g in sorted(self.groups.items())]
