"""The seam between the Raft host and what it replicates: the ``StateMachine`` protocol, and the
errors a proposal can end in.

Owns: what the host asks of a state machine (JetStream's streams and consumers next, the test
service in ``tests/chaos`` now) and the outcome of a proposal as the proposer sees it: a result,
or one of the errors below, each saying whether the proposal is *known* not to have taken effect
(``definite``) or may have (a caller must not simply retry those: it could apply twice).
Must not know: logs, messages or the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "GroupStopped",
    "NoLeader",
    "ProposalBusy",
    "ProposalError",
    "ProposalLost",
    "ProposalRefused",
    "ProposalUnknown",
    "StateMachine",
]


class StateMachine(Protocol):
    """Applied in the same order on every member; ``apply`` must be deterministic (the same
    entries, the same state and results everywhere), and may be called on a follower too."""

    def apply(self, index: int, items: Sequence[bytes]) -> Sequence[bytes]:
        """The proposals committed in the log entry ``index``, in order: one result per item
        (returned to its proposer, whichever server it proposed on)."""
        ...

    def snapshot(self) -> bytes:
        """The whole state as of the last applied entry (the host then compacts the log)."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace the whole state by a snapshot's (at start, or a leader's for a member that
        fell behind what the leader's log still holds); ``b""`` is the empty state."""
        ...


class ProposalError(Exception):
    """A proposal that got no result. ``definite``: it is known not to have taken effect."""

    definite = True


class NoLeader(ProposalError):
    """No leader was known within the time allowed (nothing was proposed)."""


class ProposalRefused(ProposalError):
    """The leader would not take it now (a leadership transfer, too much uncommitted data, a
    membership change still pending, a change that makes no sense); retrying later may work."""


class ProposalBusy(ProposalRefused):
    """Refused for the moment (a leadership transfer under way, a membership change still
    pending, too much data waiting for a quorum): the same request may succeed shortly."""


class ProposalLost(ProposalError):
    """Proposed, then replaced in the log by another leader's entry: it will never apply."""


class ProposalUnknown(ProposalError):
    """No answer in time, or the group stopped: it may or may not have been applied."""

    definite = False


class GroupStopped(ProposalUnknown):
    """The group was stopped while the proposal was in flight."""
