"""A replicated stream's or consumer's group following its assignment's peers (scaled up or
down by an update, a peer removed by ``STREAM.PEER.REMOVE``, a consumer following its stream).

Owns: the group leader's side (removing from the group, one change at a time, every member
whose server the assignment no longer names; servers newly named join by themselves, as new
members that the leader adds as learners and makes voters once caught up; a voter removed
only while as many voters as servers placed remain, so a moved group takes the new ones in
before the old ones go) and the side of a
server left out (handing leadership to a server that stays if it leads, then waiting until the
group has removed it, so that the group never loses its quorum to a replica gone too soon; its
files are deleted after). Must not know: the meta group, the API, what a stream or a consumer
is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from jetpy.server.nrg import ProposalError, RaftGroup

__all__ = ["leave", "moving", "reconcile"]

log = logging.getLogger("jetpy.jetstream")

STAYING_TICKS = 10  # a member placed again looks less often whether it was removed after all
WAITING_TICKS = 4  # a leader waiting for new members to be made voters looks again so often


def moving(group: RaftGroup, peers: Sequence[str], me: str) -> bool:
    """Whether some servers placed (``peers``) are not voters of the group yet while some of
    its members (``me``: this server's) are to go."""
    others = group.status().peers
    voters = {me, *(p.name for p in others if p.voter)}
    going = me not in peers or any(p.name not in peers for p in others)
    return going and any(p not in voters for p in peers)


async def reconcile(group: RaftGroup, peers: Callable[[], Sequence[str]]) -> None:
    """On the group's leader: remove the members whose servers are not in ``peers()`` (the
    assignment's, read again at each step). A voter goes only while as many voters as servers
    placed remain (a moved group keeps its old members until the new ones, learners that
    catch up, were made voters: it never has fewer voters than it should, as nats-server's
    move keeps the old peers until the new ones are current); until then it waits here."""
    while group.is_leader and not group.removed:
        keep = set(peers())
        st = group.status()
        voters = 1 + sum(p.voter for p in st.peers)  # the leader's own member is one
        waiting = False
        for p in st.peers:
            if p.name in keep:
                continue
            if p.voter and voters - 1 < len(keep):
                waiting = True
                continue
            try:
                await group.remove_member(p.id)
                log.info("raft %s: %s (%s) removed: no longer placed there", group.name, p.id, p.name)
            except ProposalError as exc:  # the next leader, or the next update, tries again
                log.warning("raft %s: %s (%s) could not be removed yet: %s", group.name, p.id, p.name, exc)
                return
            voters -= p.voter
            if not group.is_leader:
                return
        if not waiting:
            return
        await asyncio.sleep(group.cfg.tick * WAITING_TICKS)


async def leave(
    group: RaftGroup, peers: Sequence[str], tick: float, stays: Callable[[], bool] | None = None
) -> None:
    """On a server the assignment no longer names: hand leadership to one that stays, then
    wait until the group removed this member (or it stopped). While ``stays()`` (placed here
    again) it keeps its leadership and waits on: the group's leader may have removed it
    already, or may still."""
    keep = set(peers)
    while not group.removed and group.status().state != "CLOSED":
        if stays is not None and stays():
            await asyncio.sleep(tick * STAYING_TICKS)
            continue
        if group.is_leader:
            st = group.status()
            live = [p for p in st.peers if p.name in keep and p.voter and p.active]
            if live:
                try:
                    await group.transfer_leadership(max(live, key=lambda p: p.match or 0).id)
                except ProposalError as exc:
                    log.debug("raft %s: leadership not handed over yet: %s", group.name, exc)
        await asyncio.sleep(tick)
