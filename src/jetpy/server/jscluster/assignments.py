"""The meta group's records of where streams and consumers are: what the meta group's entries
carry and its state holds, and what placement rules (:mod:`.consumer_placement`) rewrite.

Owns: :class:`StreamAssignment` and :class:`ConsumerAssignment` (msgpack in the meta log).
Must not know: how they change (:mod:`.meta`), Raft, the API.
"""

from __future__ import annotations

import msgspec

__all__ = ["ConsumerAssignment", "StreamAssignment"]


class StreamAssignment(msgspec.Struct, frozen=True):
    """A stream placed on servers: ``config`` is its StreamConfig as JSON (checked by the meta
    leader before proposing), ``peers`` the servers holding a replica (server names), ``group``
    the Raft group they form, ``reply`` where its create is answered by its first leader,
    ``joined`` the peers placed after its creation (scaled up, or replacing a removed peer):
    those join its group as new members rather than found it. A change of ``peers`` moves its
    consumers with it (:func:`.consumer_placement.follow`), in the same entry."""

    name: str
    config: bytes
    group: str
    peers: list[str]
    created: int
    reply: str = ""
    joined: list[str] = []


class ConsumerAssignment(msgspec.Struct, frozen=True):
    """A consumer of an assigned stream placed on some of the stream's servers: ``config`` its
    ConsumerConfig as JSON (checked by the meta leader), ``group`` the Raft group its replicas
    form (``C-R<n>F-<random>``), ``reply`` where its create is answered by its first leader,
    ``joined`` (as a stream's) the peers placed after its creation, which join its group."""

    stream: str
    name: str
    config: bytes
    group: str
    peers: list[str]
    created: int
    reply: str = ""
    joined: list[str] = []
