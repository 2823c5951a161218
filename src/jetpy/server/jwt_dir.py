"""JwtDirectory: the full account resolver's directory of account JWTs, laid out as
nats-server's (``<dir>/<account public key>.jwt``, the file's text the JWT itself), so a
directory one of them wrote opens in the other.

Owns reading the directory (files of other names, and unreadable ones, are passed over) and
writing one account's JWT so that a crash leaves the old file or the new one, never a torn
one: the JWT goes to a temporary file in the directory, is synced, and is renamed over the
old. Knows nothing of what a JWT says (``operator`` checks them).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

import nkeys

from jetpy.server.jwt_claims import is_public_key

__all__ = ["SUFFIX", "JwtDirectory"]

log = logging.getLogger("jetpy.server")

SUFFIX: Final = ".jwt"
MAX_JWT_BYTES: Final = 1024 * 1024  # a file larger than this is not an account JWT


class JwtDirectory:
    """One full resolver's directory."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def create(self) -> None:
        """Make the directory (and its parents) if it is not there yet."""
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, public: str) -> Path:
        if not is_public_key(public, nkeys.PREFIX_BYTE_ACCOUNT):  # never a path of another name
            raise ValueError(f"not an account public key: {public!r}")
        return self.path / f"{public}{SUFFIX}"

    def load(self) -> dict[str, str]:
        """Every account JWT in the directory, by account public key."""
        out: dict[str, str] = {}
        try:
            entries = sorted(self.path.iterdir())
        except FileNotFoundError:
            return out
        except OSError as e:
            log.warning("resolver directory %s cannot be read: %s", self.path, e)
            return out
        for entry in entries:
            public = entry.name[: -len(SUFFIX)]
            if not entry.name.endswith(SUFFIX) or not is_public_key(public, nkeys.PREFIX_BYTE_ACCOUNT):
                continue
            token = self.get(public)
            if token:
                out[public] = token
        return out

    def get(self, public: str) -> str | None:
        """The JWT stored for the account ``public`` (None: none, not readable, or ``public`` is
        no account key)."""
        if not is_public_key(public, nkeys.PREFIX_BYTE_ACCOUNT):
            return None
        path = self._file(public)
        try:
            if path.stat().st_size > MAX_JWT_BYTES:
                log.warning("resolver directory: %s is too large for an account JWT", path)
                return None
            return path.read_text("utf-8").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            log.warning("resolver directory: %s cannot be read: %s", path, e)
            return None

    def names(self) -> list[str]:
        """The accounts with a JWT in the directory."""
        return list(self.load())

    def save(self, public: str, token: str) -> None:
        """Store ``token`` as the account's JWT (replacing the one there), durably (OSError when
        it cannot be written: nothing is changed then)."""
        self.create()
        final = self._file(public)
        tmp = final.with_name(f".{final.name}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(token)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
