"""Test certificates made on the spot with ``cryptography``: a CA, a server certificate for
127.0.0.1/localhost and client certificates (with an e-mail, a DNS name or only a subject), plus
a second, untrusted CA. Written as PEM files into a directory; nothing is downloaded."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "make_pki"]

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files made by :func:`make_pki`."""

    ca: Path
    server_cert: Path
    server_key: Path
    alice_cert: Path  # e-mail alice@example.com, CN alice
    alice_key: Path
    bob_cert: Path  # subject only: CN=bob,OU=eng,O=Acme
    bob_key: Path
    rogue_ca: Path  # another CA, trusted by nobody
    rogue_cert: Path  # a client certificate it signed
    rogue_key: Path
    route_cert: Path  # 127.0.0.1/localhost for both ends of a TLS route (server and client auth)
    route_key: Path
    rogue_route_cert: Path  # the same, signed by the rogue CA
    rogue_route_key: Path


def _name(**parts: str) -> x509.Name:
    oids = {"cn": NameOID.COMMON_NAME, "ou": NameOID.ORGANIZATIONAL_UNIT_NAME, "o": NameOID.ORGANIZATION_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return path


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn=cn))
        .issuer_name(_name(cn=cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    subject: x509.Name,
    sans: list[x509.GeneralName],
    usage: list[x509.ObjectIdentifier],
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca[1], hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    """A CA, a server certificate, two client certificates and an untrusted CA's client."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca("jetpy test CA")
    rogue = _ca("rogue CA")
    server = _leaf(
        ca,
        _name(cn="localhost"),
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        [ExtendedKeyUsageOID.SERVER_AUTH],
    )
    client = [ExtendedKeyUsageOID.CLIENT_AUTH]
    alice = _leaf(ca, _name(cn="alice"), [x509.RFC822Name("alice@example.com")], client)
    bob = _leaf(ca, _name(o="Acme", ou="eng", cn="bob"), [], client)
    mallory = _leaf(rogue, _name(cn="alice"), [x509.RFC822Name("alice@example.com")], client)
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    local = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    route = _leaf(ca, _name(cn="route"), local, both)
    rogue_route = _leaf(rogue, _name(cn="route"), local, both)
    d = directory
    return Pki(
        ca=_write_cert(d / "ca.pem", ca[0]),
        server_cert=_write_cert(d / "server.pem", server[0]),
        server_key=_write_key(d / "server-key.pem", server[1]),
        alice_cert=_write_cert(d / "alice.pem", alice[0]),
        alice_key=_write_key(d / "alice-key.pem", alice[1]),
        bob_cert=_write_cert(d / "bob.pem", bob[0]),
        bob_key=_write_key(d / "bob-key.pem", bob[1]),
        rogue_ca=_write_cert(d / "rogue-ca.pem", rogue[0]),
        rogue_cert=_write_cert(d / "rogue.pem", mallory[0]),
        rogue_key=_write_key(d / "rogue-key.pem", mallory[1]),
        route_cert=_write_cert(d / "route.pem", route[0]),
        route_key=_write_key(d / "route-key.pem", route[1]),
        rogue_route_cert=_write_cert(d / "rogue-route.pem", rogue_route[0]),
        rogue_route_key=_write_key(d / "rogue-route-key.pem", rogue_route[1]),
    )
