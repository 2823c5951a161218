"""Sourcing: the host of every stream's copies of other streams (its mirror or its sources).

Owns which streams copy which (a :class:`~jetpy.jetstream.mirror.Mirror` or a
:class:`~jetpy.jetstream.sources.Sources` per stream, started when the stream is created or
recovered, changed when its config changes, stopped before it is deleted or the server stops),
the report hook each stream's info reads (``Stream.origins``), the nudge that makes copies
waiting for an origin try again at once when a stream of that name appears or goes (nats-server
waits for its next retry; the result is the same, sooner), and which mirrors answer direct gets
for their origin's name (``mirror_direct``). It is the ``StreamApi``'s watcher.

Must not know: how a copy is made (the mirror's and sources' own), the API's handlers, stores.
"""

from __future__ import annotations

import random

from jetpy.jetstream.mirror import Mirror
from jetpy.jetstream.models import StreamConfig
from jetpy.jetstream.ports import MessageBus
from jetpy.jetstream.registry import StreamRegistry
from jetpy.jetstream.sources import Sources
from jetpy.jetstream.stream import Stream

__all__ = ["Sourcing"]


class Sourcing:
    def __init__(self, registry: StreamRegistry, bus: MessageBus) -> None:
        self.registry = registry
        self.bus = bus
        self.copies: dict[str, Mirror | Sources] = {}  # by the name of the stream that copies
        self._direct: dict[str, list[Stream]] = {}  # origin name -> mirrors answering its direct gets
        self.enabled = True  # False: streams' copies are run elsewhere (a cluster's stream leaders)

    # -- the StreamApi's watcher ----------------------------------------------------------------

    def started(self, stream: Stream) -> None:
        """A stream was created or recovered: its copies start."""
        if not self.enabled:
            return
        cfg = stream.config
        copy: Mirror | Sources
        if cfg.mirror is not None:
            copy = Mirror(stream, self.registry, self.bus, self._mirror_direct)
        elif cfg.sources:
            copy = Sources(stream, self.registry, self.bus)
        else:
            self._nudge(stream.name)
            return
        self.copies[stream.name] = copy
        stream.origins = copy
        copy.start()
        self._nudge(stream.name)

    def updated(self, stream: Stream, old: StreamConfig) -> None:
        """A stream's config changed: a removed mirror stops (the stream is promoted), sources
        added start and those removed stop."""
        cfg = stream.config
        copy = self.copies.get(stream.name)
        if isinstance(copy, Mirror):
            if cfg.mirror is None:
                self.stopping(stream)
            elif cfg.mirror_direct != old.mirror_direct and not cfg.mirror_direct:
                copy.stop_direct()
            return
        if copy is None:
            if cfg.sources:
                self.started(stream)
            return
        if not cfg.sources:
            self.stopping(stream)
            return
        if cfg.sources != old.sources:
            copy.update()

    def stopping(self, stream: Stream) -> None:
        """A stream is about to go (deleted, or promoted from mirror): its copies stop."""
        copy = self.copies.pop(stream.name, None)
        if copy is not None:
            copy.stop()
        stream.origins = None

    def deleted(self, name: str) -> None:
        """A stream is gone: copies of it notice at once (their info shows the error)."""
        self._nudge(name, gone=True)

    def close(self) -> None:
        """The server stops: every copy stops (copying resumes from the stored state at start)."""
        for copy in self.copies.values():
            copy.stop()
        self.copies.clear()

    # -- direct gets ----------------------------------------------------------------------------

    def direct_answerer(self, name: str) -> Stream | None:
        """Who answers a direct get for stream ``name``: the stream itself when it allows direct
        gets, or one of its caught-up mirrors with ``mirror_direct`` (one at random, as a queue
        group of them all would pick), None when nobody does."""
        own = self.registry.get(name)
        candidates = [own] if own is not None and own.config.allow_direct else []
        candidates += self._direct.get(name, [])
        if not candidates:
            return None
        return candidates[0] if len(candidates) == 1 else random.choice(candidates)

    def _mirror_direct(self, mirror: Mirror, on: bool) -> None:
        answering = self._direct.setdefault(mirror.origin, [])
        if on and mirror.stream not in answering:
            answering.append(mirror.stream)
        elif not on and mirror.stream in answering:
            answering.remove(mirror.stream)
        if not answering:
            del self._direct[mirror.origin]

    def _nudge(self, origin: str, gone: bool = False) -> None:
        for copy in self.copies.values():
            copy.nudge(origin, gone)
