"""Reading back a durable consumer at start-up, and what to do when its files are missing or
damaged: loss of consumer state is never silent.

Owns the metadata document a durable consumer persists (:class:`ConsumerMeta`) and the
decisions, each logged with the stream, the consumer, the file and the reason:

* metadata (``meta.dat``) unreadable, undecodable or missing while the consumer has a state:
  the consumer is **offline** (:class:`Offline`): not started, its files left exactly as they
  are, its name answered with an error (10195) by the API; the stream and its other consumers
  run. A directory with neither file, or only the initial state of a consumer that never
  delivered anything (a creation cut short by a crash), is ignored with a warning.
* state (``o.dat``) missing, damaged or impossible: the consumer **restarts** without it, from
  the position :func:`restart_position` states (the first message it could ever have
  been meant to deliver), so no unacknowledged message is skipped and what was acknowledged is
  delivered again. A damaged file is renamed to ``o.dat.damaged``, never deleted. A state is
  written when a consumer is created, so a missing one is always a loss.
* state pointing past the stream's last sequence (the stream lost its tail): the delivered
  position is moved back to the stream's last sequence (and pending acks above it dropped), so
  the messages stored under those sequences next are delivered.

nats-server has no advisory for any of these (it restarts such a consumer from its ack floor 0
without a word); the log line is the report. Must not know: the network or the API.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import msgspec

from jetpy.jetstream.consumers.persist import clamp_state
from jetpy.jetstream.models import ConsumerConfig, parse_time
from jetpy.jetstream.seek import seq_at_time
from jetpy.jetstream.stream import Stream
from jetpy.store.base import ConsumerState, ConsumerStore, StoreError, StreamStore
from jetpy.store.consumer_state import past_last_seq, state_problems
from jetpy.store.layout import CONSUMER_META_FILE, CONSUMER_STATE_FILE

__all__ = ["RESTART_CLOCK_MARGIN", "ConsumerMeta", "Offline", "Recovered", "read_durable", "restart_position"]

log = logging.getLogger("jetpy.jetstream")

RESTART_CLOCK_MARGIN = 1_000_000_000
"""How far before its creation time (ns) a ``deliver_policy: new`` consumer whose state is gone
starts again: messages are stamped with the wall clock, which may have been stepped back."""


class ConsumerMeta(msgspec.Struct):
    """What a durable consumer persists about itself besides its state (``meta.dat``)."""

    config: ConsumerConfig
    created: int


@dataclass(frozen=True, slots=True)
class Recovered:
    """A consumer to start: from ``state``, or (``lost`` says why) from its restart position."""

    config: ConsumerConfig
    created: int
    state: ConsumerState | None
    lost: str = ""  # why the state could not be used ("" when it could)


@dataclass(frozen=True, slots=True)
class Offline:
    """A consumer that cannot be started: ``reason`` names the file and what is wrong with it."""

    reason: str


def _where(cs: ConsumerStore, file: str) -> str:
    return f"{cs.where}/{file}" if cs.where else file


def read_durable(stream: Stream, name: str) -> Recovered | Offline | None:
    """Read consumer ``name`` of ``stream`` back (None: nothing to start, said in the log)."""
    sname = stream.name
    try:
        cs = stream.store.consumer_store(name)
    except StoreError as e:
        log.error("consumer '%s > %s' is offline: its directory cannot be used: %s", sname, name, e)
        return Offline(f"consumer directory: {e}")
    meta_file = _where(cs, CONSUMER_META_FILE)
    state_file = _where(cs, CONSUMER_STATE_FILE)
    state: ConsumerState | None = None
    state_error = ""
    try:
        state = cs.load()
    except StoreError as e:
        state_error = str(e)
    try:
        raw = cs.read_meta()
        if raw is None:
            if state is None and not state_error:
                log.warning(
                    "consumer '%s > %s' has no files (its creation never completed): ignored", sname, name
                )
                return None
            if state is not None and state.delivered_consumer_seq == 0:
                log.warning(
                    "consumer '%s > %s' has no metadata and never delivered (its creation never "
                    "completed): ignored, %s kept",
                    sname,
                    name,
                    state_file,
                )
                return None
            raise ValueError(f"{CONSUMER_META_FILE} is missing")
        meta = msgspec.json.decode(raw, type=ConsumerMeta)
    except (StoreError, ValueError, msgspec.DecodeError) as e:  # DecodeError is a ValueError
        reason = f"{meta_file}: {e}"
        log.error(
            "consumer '%s > %s' is offline: metadata file %s unreadable (%s); its files are kept, "
            "the stream and its other consumers run",
            sname,
            name,
            meta_file,
            e,
        )
        return Offline(reason)
    if state is None:
        if state_error:
            kept = _set_aside(cs)
            why = f"state file {state_file} is damaged ({state_error})" + (
                f", kept as {kept}" if kept else ""
            )
        else:
            why = f"state file {state_file} is missing"
        return Recovered(meta.config, meta.created, None, why)
    problems = state_problems(state)
    if problems:
        kept = _set_aside(cs)
        why = f"state file {state_file} is inconsistent ({'; '.join(problems)})"
        return Recovered(meta.config, meta.created, None, why + (f", kept as {kept}" if kept else ""))
    last = stream.store.state().last_seq
    past = past_last_seq(state, last)
    if past is not None:
        log.warning(
            "consumer '%s > %s' state file %s points past the stream (%s): delivered position moved "
            "back to %d, messages stored from %d on are delivered",
            sname,
            name,
            state_file,
            past,
            last,
            last + 1,
        )
        state = clamp_state(state, last)
    return Recovered(meta.config, meta.created, state)


def _set_aside(cs: ConsumerStore) -> str:
    """Rename a damaged state file out of the way (never deleted); "" if that failed too."""
    try:
        return cs.set_aside_state() or ""
    except StoreError as e:
        log.error("consumer state file could not be renamed aside: %s", e)
        return ""


def restart_position(store: StreamStore, cfg: ConsumerConfig, created_ns: int) -> int:
    """Where a durable consumer whose state is gone starts again: the first message it could ever
    have been meant to deliver, so nothing unacknowledged is skipped (what was acknowledged is
    delivered again). By deliver policy: ``by_start_sequence`` and ``by_start_time`` where they
    started; ``new`` at the first message stored after the consumer was created (less
    :data:`RESTART_CLOCK_MARGIN`); ``all``, ``last`` and ``last_per_subject`` at the stream's
    first message (which older message was last at creation is not recorded anywhere)."""
    st = store.state()
    first, last = max(st.first_seq, 1), st.last_seq
    policy = cfg.deliver_policy
    if policy == "by_start_sequence":
        return max(cfg.opt_start_seq, first)
    if policy == "by_start_time":
        return max(seq_at_time(store, parse_time(cfg.opt_start_time or ""), first, last), first)
    if policy == "new":
        return max(seq_at_time(store, created_ns - RESTART_CLOCK_MARGIN, first, last), first)
    return first
