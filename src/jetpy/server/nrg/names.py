"""Names in the Raft host: member ids, group names and the ``$NRG.`` subjects they travel on.

Owns: how a server's member id in a group is made (nats-server's: the first 8 characters of a
base-62 SHA-256 of the server name, so ``n1`` is ``fjFyEjc1`` here as there), the rule for group
names (one subject token), and every subject of a group's traffic in the system account. Must not
know: what travels on them (``wire``) or who sends it.

Subjects (``<g>`` the group, ``<n>`` the member addressed; jetpy's Raft messages go to one
member each, so the member is the last token, where nats-server's broadcast ones end at the
group; the extra token also keeps jetpy's traffic apart from a nats-server peer's)::

    $NRG.V.<g>.<n>        vote requests (and pre-votes) for n
    $NRG.AE.<g>.<n>       the leader's appends, heartbeats, snapshots and hand-overs for n
    $NRG.R.<g>.<n>        answers to n: votes, append and heartbeat responses
    $NRG.R.<g>.<n>.<id>   the answer to a request n forwarded (a proposal or a change)
    $NRG.P.<g>.<n>        proposals forwarded to n, the leader as the sender knows it
    $NRG.RP.<g>.<n>       membership changes and leadership transfers asked of n (nats-server's
                          "remove peer" subject, carrying jetpy's other changes too)
    $NRG.J.<g>            a new member asks to join (every member listens; the leader acts)
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final

__all__ = [
    "MAX_GROUP_NAME",
    "Subjects",
    "join_subject",
    "member_id",
    "new_member_id",
    "valid_group_name",
]

_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
ID_LENGTH: Final = 8  # nats-server's peer ids are 8 characters
MAX_GROUP_NAME: Final = 128  # a group's name is also its directory's name: well within NAME_MAX
_FORBIDDEN: Final = frozenset(" \t\r\n.*>/\\\x00")


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "".join(_DIGITS[b % len(_DIGITS)] for b in digest[:ID_LENGTH])


def member_id(server_name: str) -> str:
    """A founding member's id: derived from its server's name, so founders know each other's."""
    return _hash(server_name)


def new_member_id(server_name: str) -> str:
    """A new incarnation's id (a member that joins, or rejoins after losing its state): never
    one that may already have voted in the group."""
    return _hash(f"{server_name}\x00{secrets.token_hex(16)}")


def valid_group_name(name: str) -> bool:
    """One subject token and one file name: no dots, wildcards, whitespace or path separators."""
    return 0 < len(name) <= MAX_GROUP_NAME and not (_FORBIDDEN & set(name)) and name not in (".", "..")


def join_subject(group: str) -> bytes:
    return f"$NRG.J.{group}".encode()


class Subjects:
    """A group's subjects, built once per peer (the send path looks them up in a dict)."""

    __slots__ = ("_ae", "_r", "_v", "group")

    def __init__(self, group: str) -> None:
        self.group = group
        self._v: dict[str, bytes] = {}
        self._ae: dict[str, bytes] = {}
        self._r: dict[str, bytes] = {}

    def vote(self, member: str) -> bytes:
        s = self._v.get(member)
        if s is None:
            s = self._v[member] = f"$NRG.V.{self.group}.{member}".encode()
        return s

    def append(self, member: str) -> bytes:
        s = self._ae.get(member)
        if s is None:
            s = self._ae[member] = f"$NRG.AE.{self.group}.{member}".encode()
        return s

    def response(self, member: str) -> bytes:
        s = self._r.get(member)
        if s is None:
            s = self._r[member] = f"$NRG.R.{self.group}.{member}".encode()
        return s

    def reply(self, member: str, request: int) -> bytes:
        return f"$NRG.R.{self.group}.{member}.{request}".encode()

    def replies(self, member: str) -> str:
        return f"$NRG.R.{self.group}.{member}.*"

    def proposals(self, member: str) -> bytes:
        return f"$NRG.P.{self.group}.{member}".encode()

    def control(self, member: str) -> bytes:
        return f"$NRG.RP.{self.group}.{member}".encode()

    def join(self) -> bytes:
        return join_subject(self.group)
