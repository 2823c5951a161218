"""Stack: the byte layers between a client's socket and the NATS protocol (TLS, WebSocket).

Owns the :class:`Layer` protocol, the ordered list of layers one connection goes through
(:class:`Stack`, bottom first: TLS under WebSocket), and :class:`Listener`, what a listening
port's connections are given (a TLS context and how to start it, WebSocket settings). A plain
connection has no stack at all: the protocol reads the socket's bytes as they come, and nothing
is added to its path.

Inbound bytes go up through every layer's ``receive``; what a layer must answer on its own (TLS
handshake records, a WebSocket upgrade response or pong) goes down through the layers beneath
it. Outbound protocol bytes go down through every ``send``. A layer raises :class:`LayerError`
to have the connection closed (after writing what it left pending, a TLS alert for one). Knows
nothing of NATS, subscriptions or auth.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jetpy.server.auth import CertNames

__all__ = ["Layer", "LayerError", "Listener", "Stack"]


class LayerError(Exception):
    """The connection must close. ``log`` is what the server logs (None: nothing), at ``level``
    (``"error"`` or ``"debug"``); ``reason`` is its closed-connection reason in /connz; ``data``
    what arrived before the end (a client's last message before its close), to be handled."""

    def __init__(
        self, log: str | None, reason: str, level: str = "error", data: bytes = b"", anonymous: bool = False
    ) -> None:
        super().__init__(log or reason)
        self.log = log
        self.reason = reason
        self.level = level
        self.data = data
        self.anonymous = anonymous  # logged with the client's address only (no connection yet)


class Layer(Protocol):
    @property
    def ready(self) -> bool:
        """Can protocol bytes go through now (a handshake is done)?"""
        ...

    def receive(self, data: bytes) -> bytes:
        """Bytes from below in, the bytes this layer passes up (possibly none yet)."""
        ...

    def send(self, data: bytes) -> bytes:
        """Protocol bytes in, the bytes to write below (kept until the layer is ready)."""
        ...

    def pending(self) -> bytes:
        """What the layer itself must write below now (handshakes, control frames)."""
        ...

    def closing(self, reason: str) -> bytes:
        """What to write below before the socket closes (a close_notify, a close frame for
        ``reason``, the connection's closed reason)."""
        ...


class Stack:
    """One connection's layers, bottom (nearest the socket) first."""

    __slots__ = ("layers", "write")

    def __init__(self, layers: list[Layer], write: Callable[[bytes], None]) -> None:
        self.layers = layers
        self.write = write  # to the socket

    @property
    def ready(self) -> bool:
        return all(layer.ready for layer in self.layers)

    def inbound(self, data: bytes) -> bytes:
        """Socket bytes up through every layer; each layer's own answers are written down."""
        return self._up(0, data)

    def _up(self, start: int, data: bytes) -> bytes:
        for i in range(start, len(self.layers)):
            layer = self.layers[i]
            try:
                data = layer.receive(data)
            except LayerError as e:
                if e.data:  # what came before the end goes on up (or is lost with the layer above)
                    try:
                        e.data = self._up(i + 1, e.data)
                    except LayerError:
                        e.data = b""
                raise
            finally:
                own = layer.pending()
                if own:
                    self._down(i, own)
            if not data:
                return b""
        return data

    def outbound(self, data: bytes) -> None:
        """Protocol bytes down through every layer to the socket."""
        self._down(len(self.layers), data)

    def closing(self, reason: str) -> None:
        """Every layer's goodbye, the top one first, each through the layers below it."""
        for i in range(len(self.layers) - 1, -1, -1):
            try:
                data = self.layers[i].closing(reason)
            except LayerError:
                continue
            if data:
                self._down(i, data)

    def _down(self, above: int, data: bytes) -> None:
        for layer in reversed(self.layers[:above]):
            data = layer.send(data)
            if not data:
                return
        self.write(data)


@dataclass(frozen=True, slots=True)
class Listener:
    """What the connections of one listening port get. ``tls``: the server's context (None:
    plaintext); ``tls_first``: the handshake comes before INFO (nats-server's handshake_first),
    else INFO goes out in plaintext and the client starts TLS; ``tls_timeout``: seconds the
    handshake may take; ``tls_map``: the verified certificate names the user (verify_and_map);
    ``kind``: what the connection is called in logs and monitoring."""

    tls: ssl.SSLContext | None = None
    tls_first: bool = False
    tls_timeout: float = 2.0
    tls_map: bool = False
    kind: str = "Client"
    layers: Callable[[], list[Layer]] | None = None  # the stack to build (None: plain)

    @property
    def conn_type(self) -> str:
        """nats-server's name of this kind of connection (what a user JWT may restrict)."""
        return "WEBSOCKET" if self.kind == "websocket" else "STANDARD"

    @property
    def plain(self) -> bool:
        return self.layers is None


def cert_names_of(layers: list[Layer]) -> CertNames | None:
    """The verified client certificate's names, from the stack's TLS layer (if any)."""
    for layer in layers:
        names = getattr(layer, "cert_names", None)
        if callable(names):
            found: CertNames | None = names()
            return found
    return None
