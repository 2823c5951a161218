"""Subject mappings: the subject a client's message is published on in its account, as
nats-server's ``mappings {}`` (an account's, or the top level's for the global account) pick it.

Owns the choice: the first mapping whose source matches the subject (in configuration order)
applies; of its destinations, those of the server's cluster when the mapping names that
cluster, else those naming none; a destination is drawn by weight (percentages, the rest of
100 keeping the subject as it is), and its transform (``jetstream.transform``, the one
implementation of nats-server's mapping functions) gives the new subject. A subject no mapping
matches, and one a deterministic mapping maps, is remembered (bounded), so a mapped account's
publish costs a dictionary lookup. Knows nothing of brokers or connections.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from jetpy.jetstream.transform import SubjectTransform
from jetpy.server.options import Mapping
from jetpy.subjects import subject_matches

__all__ = ["SubjectMapper"]

MAX_CACHED: Final = 16_384
"""Subjects whose mapped subject is remembered; past it the memory starts over (a bounded cost
whatever subjects clients publish to)."""

_PERCENT: Final = 100


class _Compiled:
    """One mapping's destinations, as transforms with cumulative weights, by cluster."""

    __slots__ = ("by_cluster", "default", "source")

    def __init__(self, mapping: Mapping) -> None:
        self.source = mapping.source
        self.default: list[tuple[float, SubjectTransform]] = []
        self.by_cluster: dict[str, list[tuple[float, SubjectTransform]]] = {}
        for d in mapping.destinations:
            dests = self.by_cluster.setdefault(d.cluster, []) if d.cluster else self.default
            total = (dests[-1][0] if dests else 0.0) + d.weight
            dests.append((total, SubjectTransform(mapping.source, d.subject)))

    def destinations(self, cluster: str) -> list[tuple[float, SubjectTransform]]:
        if cluster and cluster in self.by_cluster:
            return self.by_cluster[cluster]
        return self.default

    def deterministic(self, cluster: str) -> bool:
        """Always the same answer for a subject: one destination taking all of it, whatever the
        cluster (a transform with ``random()`` is not, nor a weighted choice)."""
        dests = self.destinations(cluster)
        return (
            not self.by_cluster and len(dests) == 1 and dests[0][0] >= _PERCENT and dests[0][1].deterministic
        )


class SubjectMapper:
    """An account's mappings, applied to the subjects its clients publish on."""

    __slots__ = ("_cache", "_cluster", "_mappings")

    def __init__(self, mappings: tuple[Mapping, ...], cluster: Callable[[], str]) -> None:
        """``cluster`` names the server's cluster now ("" when there is none)."""
        self._mappings = [_Compiled(m) for m in mappings]
        self._cluster = cluster
        self._cache: dict[bytes, bytes] = {}

    def map(self, subject: bytes) -> bytes:
        """The subject the message is published on."""
        found = self._cache.get(subject)
        if found is not None:
            return found
        text = subject.decode("utf-8", "replace")
        cluster = self._cluster()
        for m in self._mappings:
            if not subject_matches(m.source, text):
                continue
            dests = m.destinations(cluster)
            draw = random.randrange(_PERCENT)
            for total, transform in dests:
                if draw < total:
                    mapped = transform.apply(text)
                    out = subject if mapped is None else mapped.encode()
                    break
            else:
                out = subject  # the weights left this share unmapped
            if m.deterministic(cluster):
                self._remember(subject, out)
            return out
        self._remember(subject, subject)
        return subject

    def _remember(self, subject: bytes, mapped: bytes) -> None:
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[subject] = mapped
