"""jetpy's own release number (the protocol level it speaks is the server's ``identity``)."""

from __future__ import annotations

from typing import Final

__all__ = ["VERSION"]

VERSION: Final = "0.1.0"
