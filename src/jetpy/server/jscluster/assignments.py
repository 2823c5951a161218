"""The meta group's records of where streams and consumers are: what the meta group's entries
carry and its state holds, and what placement rules (:mod:`.consumer_placement`) rewrite.

Owns: :class:`StreamAssignment` and :class:`ConsumerAssignment` (msgpack in the meta log),
each naming the account whose stream or consumer it is (as nats-server's assignments carry their
client's account: one meta group serves every account; a record without one, written before
accounts, is the global account's, :data:`GLOBAL_ACCOUNT`). Must not know: how they change
(:mod:`.meta`), Raft, the API.
"""

from __future__ import annotations

from typing import Final

import msgspec

from jetpy.store.base import ConsumerState

__all__ = ["GLOBAL_ACCOUNT", "ConsumerAssignment", "StreamAssignment"]

GLOBAL_ACCOUNT: Final = "$G"  # the account of a record that names none


class StreamAssignment(msgspec.Struct, frozen=True):
    """A stream placed on servers: ``config`` is its StreamConfig as JSON (checked by the meta
    leader before proposing), ``peers`` the servers holding a replica (server names), ``group``
    the Raft group they form, ``reply`` where its create is answered by its first leader,
    ``joined`` the peers placed after its creation (scaled up, or replacing a removed peer):
    those join its group as new members rather than found it, ``account`` the account whose
    stream it is (its name is unique in that account only). A change of ``peers`` moves its
    consumers with it (:func:`.consumer_placement.follow`), in the same entry."""

    name: str
    config: bytes
    group: str
    peers: list[str]
    created: int
    reply: str = ""
    joined: list[str] = []
    account: str = GLOBAL_ACCOUNT


class ConsumerAssignment(msgspec.Struct, frozen=True):
    """A consumer of an assigned stream placed on some of the stream's servers: ``config`` its
    ConsumerConfig as JSON (checked by the meta leader), ``group`` the Raft group its replicas
    form (``C-R<n>F-<random>``), ``reply`` where its create is answered by its first leader,
    ``joined`` (as a stream's) the peers placed after its creation, which join its group,
    ``account`` its stream's account, ``state`` the replicated state every replica starts from (a
    restored backup's; none: a new consumer's)."""

    stream: str
    name: str
    config: bytes
    group: str
    peers: list[str]
    created: int
    reply: str = ""
    joined: list[str] = []
    account: str = GLOBAL_ACCOUNT
    state: ConsumerState | None = None
