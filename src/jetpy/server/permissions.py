"""Permissions: what one user may publish and subscribe to, decided as nats-server decides it.

Owns the compiled form of a user's ``permissions`` block (``publish``/``subscribe`` allow and
deny lists, queue-qualified subscribe entries such as ``"foo.> workers"``, ``allow_responses``)
and every question asked of it:

* **publish** (:meth:`Permissions.may_publish`): allowed by the allow list (none: everything)
  and not denied. Answered once per subject and remembered (a bounded cache shared by the user's
  connections), so an allowed publish costs one dict lookup. A reply subject the client received
  a request on may be answered within ``allow_responses`` (max replies, expiry) even when
  publishing there is not allowed (:class:`Replies`, one per connection).
* **subscribe** (:meth:`Permissions.may_subscribe`): a subscription's subject matched token by
  token against the lists as nats-server's sublist matches it, queue entries deciding for queue
  subscriptions, the queue ``_sys_`` reserved. Two deliberate differences close what nats-server
  2.9.10 and 2.15.1 leak: a wildcard subscription must fall *within* an allow entry (nats-server
  lets ``foo.>`` through an allow of ``foo.*``, and then delivers ``foo.a.b``), and a queue
  entry in the deny list never lifts a plain deny (nats-server 2.12.7's fix).
* **delivery** (:meth:`Permissions.filters`, :meth:`Permissions.denies_delivery`): a wildcard
  subscription may overlap a deny entry (``>`` with ``secret.>`` denied); messages on denied
  subjects are then not delivered to it, as nats-server filters them. Only such subscriptions
  pay a check per message.
* **whole patterns** (:meth:`Permissions.may_publish_all`, :meth:`Permissions.may_subscribe_all`):
  may the user publish to (or read) *every* subject a pattern matches? The stricter question the
  JetStream API asks for what a request would capture, read or write.

Also the reply subjects no client may use (``_R_.``, ``$JS.ACK.``, ``$GNR.``: service import,
JetStream ack and gateway replies, refused for every client as nats-server refuses them) and the
-ERR texts and log lines of a violation. Pure: no sockets, no clock (callers pass ``now``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from jetpy.subjects import subject_is_subset, subject_matches, subjects_overlap

__all__ = [
    "RESERVED_REPLY_PREFIXES",
    "SYS_QUEUE",
    "Permissions",
    "Replies",
    "ResponsePermission",
    "pub_violation",
    "reply_violation",
    "reserved_reply",
    "sub_violation",
    "tokens_violation",
]

RESERVED_REPLY_PREFIXES: Final = (b"_R_.", b"$JS.ACK.", b"$GNR.")
"""Reply subjects a client may not give: a responder would answer into a service import, acknowledge
a JetStream message on the client's behalf, or route through a gateway (nats-server's
``isReservedReply``). Their second bytes are R, J and G: :func:`reserved_reply` tests that byte
first.
"""


def reserved_reply(reply: bytes) -> bool:
    """Whether a client may not give ``reply`` (:data:`RESERVED_REPLY_PREFIXES`); a first test on
    the second byte keeps the usual inbox replies cheap."""
    return len(reply) > 3 and reply[1] in b"RJG" and reply.startswith(RESERVED_REPLY_PREFIXES)


SYS_QUEUE: Final = b"_sys_"
"""The queue group name nats-server keeps for its own subscriptions."""

CACHE_SIZE: Final = 4096
"""Subjects remembered per user for publish and delivery decisions; cleared when full, so a client
publishing to ever new subjects costs memory bounded by this."""

REPLY_LIMIT: Final = 4096
"""Reply subjects tracked per connection for ``allow_responses`` before expired ones are pruned
(nats-server's ``replyPermLimit``)."""


@dataclass(frozen=True, slots=True)
class ResponsePermission:
    """``allow_responses``: up to ``max_msgs`` replies to a request, within ``ttl`` seconds of it
    (a value of zero or less: no limit)."""

    max_msgs: int
    ttl: float


def _subjects(block: object, key: str) -> tuple[str, ...] | None:
    """The ``allow``/``deny`` list of a normalised permission block; None when absent."""
    if not isinstance(block, Mapping):
        return None
    value = block.get(key)
    if value is None:
        return None
    return tuple(str(s) for s in value)


def _split_queue(entries: Iterable[str]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Subscribe entries split into plain subjects and ``(subject, queue)`` pairs."""
    plain: list[str] = []
    queued: list[tuple[str, str]] = []
    for entry in entries:
        fields = entry.split()
        if len(fields) == 2:
            queued.append((fields[0], fields[1]))
        elif fields:
            plain.append(fields[0])
    return tuple(plain), tuple(queued)


def _has_wildcard(subject: str) -> bool:
    return ("*" in subject or ">" in subject) and any(t in ("*", ">") for t in subject.split("."))


def _queue_matches(queue: str, names: Iterable[str]) -> bool:
    """nats-server's ``queueMatches``: a queue name equal to an entry's, or within a wildcard one."""
    return any(queue == n or (_has_wildcard(n) and subject_is_subset(queue, n)) for n in names)


class Permissions:
    """One user's compiled permissions (shared by all of that user's connections)."""

    __slots__ = (
        "_deliver_cache",
        "_pub_cache",
        "pub_allow",
        "pub_deny",
        "responses",
        "sub_allow",
        "sub_allow_queues",
        "sub_deny",
        "sub_deny_queues",
    )

    def __init__(
        self,
        *,
        pub_allow: tuple[str, ...] | None = None,
        pub_deny: tuple[str, ...] = (),
        sub_allow: tuple[str, ...] | None = None,
        sub_deny: tuple[str, ...] = (),
        responses: ResponsePermission | None = None,
    ) -> None:
        self.pub_allow = pub_allow  # None: everything; () : nothing (allow_responses alone)
        self.pub_deny = pub_deny
        if sub_allow is not None:
            self.sub_allow: tuple[str, ...] | None
            self.sub_allow, self.sub_allow_queues = _split_queue(sub_allow)
        else:
            self.sub_allow, self.sub_allow_queues = None, ()
        self.sub_deny, self.sub_deny_queues = _split_queue(sub_deny)
        self.responses = responses
        self._pub_cache: dict[bytes, bool] = {}
        self._deliver_cache: dict[bytes, bool] = {}

    @classmethod
    def from_config(cls, perms: Mapping[str, object]) -> Permissions:
        """From the config's normalised shape (``config._permissions``): ``{"publish": {"allow",
        "deny"}, "subscribe": {...}, "responses": {"max", "ttl"}}``, each part optional.

        As in nats-server, an empty subscribe allow list allows everything, while
        ``allow_responses`` without a publish allow list allows publishing nothing but replies."""
        pub, sub = perms.get("publish"), perms.get("subscribe")
        sub_allow = _subjects(sub, "allow")
        responses = None
        resp = perms.get("responses")
        if isinstance(resp, Mapping):
            max_msgs, ttl = resp.get("max", 1), resp.get("ttl", 120.0)
            responses = ResponsePermission(
                int(max_msgs) if isinstance(max_msgs, int | float) else 1,
                float(ttl) if isinstance(ttl, int | float) else 120.0,
            )
        pub_allow = _subjects(pub, "allow") or None  # an empty list is no list, as in nats-server
        if responses is not None and pub_allow is None:
            pub_allow = ()
        return cls(
            pub_allow=pub_allow,
            pub_deny=_subjects(pub, "deny") or (),
            sub_allow=sub_allow or None,
            sub_deny=_subjects(sub, "deny") or (),
            responses=responses,
        )

    # -- what a connection needs to know up front --------------------------------------------------

    @property
    def checks_publish(self) -> bool:
        """Does publishing need a check at all? (nats-server skips it without lists.)"""
        return self.pub_allow is not None or bool(self.pub_deny)

    def filters(self, subject: bytes) -> bool:
        """Must deliveries to an (allowed) subscription on ``subject`` be checked one by one? Only
        a wildcard subscription overlapping a deny entry can see denied subjects (nats-server
        2.12.7's rule: overlap, not only a deny entry within it)."""
        if not self.sub_deny:
            return False
        s = subject.decode(errors="replace")
        return _has_wildcard(s) and any(subjects_overlap(s, d) for d in self.sub_deny)

    # -- publish ----------------------------------------------------------------------------------

    def may_publish(self, subject: bytes) -> bool:
        """May the user publish to ``subject`` (allow_responses aside)? Cached."""
        ok = self._pub_cache.get(subject)
        if ok is None:
            s = subject.decode(errors="replace")
            ok = (self.pub_allow is None or any(subject_matches(a, s) for a in self.pub_allow)) and not any(
                subject_matches(d, s) for d in self.pub_deny
            )
            cache = self._pub_cache
            if len(cache) >= CACHE_SIZE:
                cache.clear()
            cache[subject] = ok
        return ok

    # -- subscribe --------------------------------------------------------------------------------

    def may_subscribe(self, subject: bytes, queue: bytes | None = None) -> bool:
        """May the user subscribe to ``subject`` (in ``queue``)? Not cached: subscriptions are
        rare next to messages."""
        s = subject.decode(errors="replace")
        q = queue.decode(errors="replace") if queue else ""
        if self.sub_allow is not None:
            allowed = any(_allows(a, s) for a in self.sub_allow)
            if q:
                names = [name for a, name in self.sub_allow_queues if _allows(a, s)]
                if names:
                    allowed = _queue_matches(q, names)
            if not allowed:
                return False
        if any(subject_matches(d, s) for d in self.sub_deny):
            return False
        if q:
            names = [name for d, name in self.sub_deny_queues if subject_matches(d, s)]
            if names and _queue_matches(q, names):
                return False
        return True

    def denies_delivery(self, subject: bytes) -> bool:
        """Is a message on ``subject`` kept from this user's (wildcard) subscriptions? Cached."""
        denied = self._deliver_cache.get(subject)
        if denied is None:
            s = subject.decode(errors="replace")
            denied = any(subject_matches(d, s) for d in self.sub_deny)
            cache = self._deliver_cache
            if len(cache) >= CACHE_SIZE:
                cache.clear()
            cache[subject] = denied
        return denied

    # -- whole patterns (the JetStream API's questions) ----------------------------------------------

    def may_publish_all(self, pattern: str) -> bool:
        """May the user publish to every subject ``pattern`` matches?"""
        if self.pub_allow is not None and not any(subject_is_subset(pattern, a) for a in self.pub_allow):
            return False
        return not any(subjects_overlap(pattern, d) for d in self.pub_deny)

    def may_subscribe_all(self, pattern: str) -> bool:
        """May the user read every subject ``pattern`` matches (plain subscriptions only)?"""
        if self.sub_allow is not None and not any(subject_is_subset(pattern, a) for a in self.sub_allow):
            return False
        return not any(subjects_overlap(pattern, d) for d in self.sub_deny)


def _allows(entry: str, subject: str) -> bool:
    """Does an allow ``entry`` admit a subscription to ``subject``? Token by token as nats-server
    matches, and for a wildcard subscription only when it falls within the entry."""
    return subject_matches(entry, subject) and (
        not _has_wildcard(subject) or subject_is_subset(subject, entry)
    )


class Replies:
    """The reply subjects one connection received requests on, for ``allow_responses``."""

    __slots__ = ("_seen", "permission")

    def __init__(self, permission: ResponsePermission) -> None:
        self.permission = permission
        self._seen: dict[bytes, list[float]] = {}  # reply -> [received at, replies sent]

    def received(self, reply: bytes, now: float) -> None:
        """A request with ``reply`` was delivered to the connection."""
        seen = self._seen
        seen[reply] = [now, 0.0]
        if len(seen) > REPLY_LIMIT:
            self._prune(now)

    def may_answer(self, subject: bytes, now: float) -> bool:
        """May the connection publish to ``subject`` as a reply (counted when it may)?"""
        entry = self._seen.get(subject)
        if entry is None:
            return False
        perm = self.permission
        entry[1] += 1
        if (perm.max_msgs > 0 and entry[1] > perm.max_msgs) or (perm.ttl > 0 and now - entry[0] > perm.ttl):
            del self._seen[subject]
            return False
        return True

    def _prune(self, now: float) -> None:
        perm = self.permission
        for reply, (at, n) in list(self._seen.items()):
            if (perm.max_msgs > 0 and n >= perm.max_msgs) or (perm.ttl > 0 and now - at > perm.ttl):
                del self._seen[reply]


# -- what a violation looks like: the -ERR text and the log line (nats-server 2.15's) --------------


def _q(b: bytes) -> str:
    """Go's %q of a subject (nats-server quotes subjects with it)."""
    out = ['"']
    for ch in b.decode(errors="replace"):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}")
    out.append('"')
    return "".join(out)


def pub_violation(subject: bytes) -> tuple[str, str]:
    """(-ERR text, log text) of a refused publish."""
    return f"Permissions Violation for Publish to {_q(subject)}", f"Publish Violation - Subject {_q(subject)}"


def reply_violation(reply: bytes) -> tuple[str, str]:
    """(-ERR text, log text) of a refused reply subject."""
    return (
        f"Permissions Violation for Publish with Reply of {_q(reply)}",
        f"Publish Violation - Reply {_q(reply)}",
    )


def sub_violation(subject: bytes, queue: bytes | None, sid: bytes) -> tuple[str, str]:
    """(-ERR text, log text) of a refused subscription."""
    sid_text = sid.decode(errors="replace")
    if queue:
        return (
            f"Permissions Violation for Subscription to {_q(subject)} using queue {_q(queue)}",
            f"Subscription Violation - Subject {_q(subject)}, Queue: {_q(queue)}, SID {sid_text}",
        )
    return (
        f"Permissions Violation for Subscription to {_q(subject)}",
        f"Subscription Violation - Subject {_q(subject)}, SID {sid_text}",
    )


def tokens_violation(subject: bytes, sid: bytes) -> tuple[str, str]:
    """(-ERR text, log text) of a subscription with more tokens than ``max_sub_tokens``."""
    return (
        f"Permissions Violation for Subscription to {_q(subject)}, too many tokens",
        f"Subscription Violation Too Many Tokens - Subject {_q(subject)}, SID {sid.decode(errors='replace')}",
    )
