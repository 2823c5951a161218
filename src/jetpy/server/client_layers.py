"""ClientLayers: a client connection's byte layers (TLS, WebSocket) and their handshakes.

Owns, for one connection: bytes going up through its :class:`~jetpy.server.stack.Stack` (and
what a layer's end leaves to handle), the moment every layer is ready (the TLS session's names
for verify_and_map, the INFO sent then when it could not go first), the handshake timeout, a
layer's failure (logged, closed with its reason) and writes going down through the layers. A
mixin of :class:`~jetpy.server.connection.ClientConnection`, knowing it only by the attributes
below; a connection without layers never comes here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from jetpy.server.auth import CertNames
from jetpy.server.client_log import ClientIdentity, ClientLog, client_prefix
from jetpy.server.stack import LayerError, Listener, Stack, cert_names_of

__all__ = ["ClientLayers"]

log = logging.getLogger("jetpy.server")


class ClientLayers:
    """The layers half of a client connection (a mixin)."""

    listener: Listener
    stack: Stack | None
    cert: CertNames | None
    closed: bool
    out: bytearray
    host: str
    port: int
    ident: ClientIdentity
    log: ClientLog
    transport: asyncio.Transport | None
    _stack_up: bool
    _greeted: bool
    _handshake_timer: asyncio.TimerHandle | None

    if TYPE_CHECKING:

        def info(self) -> bytes:
            """The INFO this client is greeted with."""
            ...

        def send(self, data: bytes) -> None: ...

        def close(self, reason: str, abort: bool = False) -> None: ...

        def _received(self, data: bytes) -> None: ...

    def _layered(self, stack: Stack, data: bytes) -> None:
        """Socket bytes up through the layers, then to the protocol."""
        try:
            data = stack.inbound(data)
        except LayerError as e:
            if e.data and self._stack_up:
                self._received(e.data)  # what came before the end
            self._layer_failed(e)
            return
        if not self._stack_up and stack.ready:
            self._stack_ready(stack)
        if data:
            self._received(data)

    def _greet(self) -> None:
        self._greeted = True
        self.send(self.info())

    def _stack_ready(self, stack: Stack) -> None:
        """Every layer's handshake is done: the client may speak NATS (greeted now if it was not)."""
        self._stack_up = True
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self.cert = cert_names_of(stack.layers)
        if self.listener.tls is not None and log.isEnabledFor(logging.DEBUG):
            prefix = client_prefix(self.ident)
            log.debug("%s - TLS handshake complete", prefix)
            for layer in stack.layers:
                describe = getattr(layer, "describe", None)
                if callable(describe):
                    log.debug("%s - %s", prefix, describe())
        if not self._greeted:
            self._greet()

    def _handshake_timeout(self) -> None:
        self._handshake_timer = None
        if not self._stack_up and not self.closed:
            what = "TLS handshake" if self.listener.tls is not None else "WebSocket handshake"
            self.log.debug(self.ident, f"{what} timeout")
            self.close(
                "TLS Handshake Failure" if self.listener.tls is not None else "Protocol Violation", abort=True
            )

    def _layer_failed(self, e: LayerError) -> None:
        if e.log:
            level = logging.ERROR if e.level == "error" else logging.DEBUG
            if e.anonymous:  # before the client exists for nats-server: its address alone
                host = f"[{self.host}]" if ":" in self.host else self.host
                log.log(level, "%s:%d - %s", host, self.port, e.log)
            else:
                self.log.log(level, self.ident, e.log)
        self.out = bytearray()  # nothing more can go out through a broken layer
        self.close(e.reason)

    def _write(self, data: bytes | bytearray) -> None:
        stack = self.stack
        t = self.transport
        if stack is not None:
            stack.outbound(bytes(data))
        elif t is not None:
            t.write(data)
