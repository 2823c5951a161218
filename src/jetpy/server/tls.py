"""TLS: the server's context from the ``tls {}`` block or the ``--tls*`` flags, and the TLS layer
of a client connection.

Owns :class:`TlsOptions` (what jetpy takes from nats-server's tls block: ``cert_file``,
``key_file``, ``ca_file``, ``verify``, ``verify_and_map``, ``timeout``, ``handshake_first``,
``min_version``), :func:`server_context` (TLS 1.2 at least, as nats-server; client certificates
required and verified against ``ca_file`` with ``verify``/``verify_and_map``),
:func:`client_context` (this server as the client: the routes it solicits), and
:class:`TlsLayer`, a memory-BIO TLS session (the standard library's ``ssl.SSLObject``) that a
connection's :class:`~jetpy.server.stack.Stack` runs its bytes through, so TLS works the same
under the NATS protocol and under WebSocket.

As nats-server: the first record must be a TLS handshake (a plaintext client is closed with
``TLS handshake error: first record does not look like a TLS handshake`` in the log and no
-ERR, since it would not be read); a handshake that fails (an untrusted or missing client
certificate) sends the TLS alert and closes; one that is not finished within ``timeout`` closes
with ``TLS handshake timeout``. The names a verified client certificate carries are read for
``verify_and_map`` (:meth:`TlsLayer.cert_names`). Knows nothing of NATS.
"""

from __future__ import annotations

import ssl
from typing import Any, Final

from jetpy.server.auth import CertNames
from jetpy.server.options import TlsOptions
from jetpy.server.stack import LayerError

__all__ = ["MIN_VERSIONS", "TlsLayer", "client_context", "server_context", "subject_string"]

_HANDSHAKE_RECORD: Final = 0x16  # the first byte of a TLS ClientHello
_READ_CHUNK: Final = 256 * 1024
_MIN_VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
MIN_VERSIONS: Final = tuple(_MIN_VERSIONS)

# Go's short names for the attribute types its pkix.Name prints (everything else it prints as an
# object identifier, which jetpy does not reproduce: such subjects are not used for mapping)
_GO_NAMES: Final = {
    "commonName": "CN",
    "serialNumber": "SERIALNUMBER",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "postalCode": "POSTALCODE",
}


def server_context(opts: TlsOptions) -> ssl.SSLContext:
    """The server's context; raises ``ssl.SSLError`` or ``OSError`` for unusable files."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _MIN_VERSIONS[opts.min_version]
    ctx.load_cert_chain(opts.cert_file, opts.key_file)
    if opts.verifies:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if opts.ca_file:
            ctx.load_verify_locations(opts.ca_file)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(opts: TlsOptions) -> ssl.SSLContext:
    """The context this server dials with when it is the client of a TLS connection (a route it
    solicits): its certificate as the client certificate, the peer's verified against
    ``ca_file`` (else the system's roots) and the name it was dialled by, as nats-server's
    route TLS does."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = _MIN_VERSIONS[opts.min_version]
    ctx.load_cert_chain(opts.cert_file, opts.key_file)
    if opts.ca_file:
        ctx.load_verify_locations(opts.ca_file)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return ctx


def _escape(value: str) -> str:
    """RFC 2253 escaping, as Go's pkix prints attribute values."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_string(subject: Any) -> str:
    """A certificate subject as Go's ``pkix.Name.String()`` prints it (last RDN first:
    ``CN=bob,OU=eng,O=Acme``); "" when it holds an attribute Go prints as an OID."""
    rdns: list[str] = []
    for rdn in subject or ():
        parts = []
        for name, value in rdn:
            short = _GO_NAMES.get(name)
            if short is None:
                return ""
            parts.append(f"{short}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


class TlsLayer:
    """One connection's TLS session over memory buffers (see the module doc)."""

    __slots__ = ("_closed", "_in", "_obj", "_out", "_queued", "_seen_first", "ready")

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=True)
        self._queued = bytearray()  # protocol bytes sent before the handshake finished
        self._seen_first = False
        self._closed = False  # close_notify sent
        self.ready = False

    def receive(self, data: bytes) -> bytes:
        if not self._seen_first and data:
            self._seen_first = True
            if data[0] != _HANDSHAKE_RECORD:
                raise LayerError(
                    "TLS handshake error: first record does not look like a TLS handshake",
                    "TLS Handshake Failure",
                )
        self._in.write(data)
        if not self.ready:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            except (ssl.SSLError, ValueError) as e:
                raise LayerError(f"TLS handshake error: {_reason(e)}", "TLS Handshake Failure") from None
            self.ready = True
            if self._queued:
                self._obj.write(bytes(self._queued))
                self._queued.clear()
        out = bytearray()
        read = self._obj.read
        try:
            while True:
                chunk = read(_READ_CHUNK)
                if not chunk:  # the client's close_notify: answered before the socket closes
                    raise ssl.SSLZeroReturnError
                out += chunk
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self.closing()
            raise LayerError(None, "Client Closed", data=bytes(out)) from None
        except ssl.SSLError as e:
            raise LayerError(f"TLS read error: {_reason(e)}", "Read Error") from None
        return bytes(out)

    def send(self, data: bytes) -> bytes:
        if not self.ready:
            self._queued += data
            return b""
        self._obj.write(data)
        return self._out.read()

    def pending(self) -> bytes:
        return self._out.read() if self._out.pending else b""

    def closing(self, reason: str = "") -> bytes:
        """Our close_notify (clients wait for it before they call a connection closed)."""
        if self.ready and not self._closed:
            self._closed = True
            try:
                self._obj.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # the alert was still written (or the session is beyond saving)
        return self.pending()

    def cert_names(self) -> CertNames | None:
        """The names of the verified client certificate (None without one)."""
        if not self.ready:
            return None
        cert: dict[str, Any] | None = self._obj.getpeercert()  # type: ignore[assignment]
        if not cert:
            return None
        sans: dict[str, list[str]] = {"email": [], "DNS": [], "URI": []}
        for entry in cert.get("subjectAltName", ()):
            kind, value = entry[0], entry[1]
            if kind in sans:
                sans[kind].append(str(value))
        return CertNames(
            emails=tuple(sans["email"]),
            dns_names=tuple(sans["DNS"]),
            uris=tuple(sans["URI"]),
            subject=subject_string(cert.get("subject")),
        )

    def describe(self) -> str:
        """``TLS version 1.3, cipher suite TLS_AES_128_GCM_SHA256`` for the debug log."""
        version = (self._obj.version() or "").replace("TLSv", "")
        cipher = self._obj.cipher()
        return f"TLS version {version}, cipher suite {cipher[0] if cipher else ''}"


def _reason(e: Exception) -> str:
    reason = getattr(e, "reason", None)
    verify = getattr(e, "verify_message", None)
    if verify:
        return f"failed to verify certificate: {verify}"
    return str(reason or e).lower().replace("_", " ")
