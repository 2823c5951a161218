"""jetpy: a NATS JetStream-compatible streaming server written in Python.

The public API is small: :class:`Server` runs an embedded server inside an asyncio program::

    async with jetpy.Server(port=0, store_dir=tmp) as srv:
        nc = await nats.connect(srv.client_url)

It is imported lazily so that clients of the package (the CLI, the Spark connector) do not pay
for the server's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jetpy.version import VERSION

__all__ = ["Server", "__version__"]
__version__ = VERSION

if TYPE_CHECKING:
    from jetpy.server.app import Server


def __getattr__(name: str) -> Any:
    if name == "Server":
        # imported by name so that importing any jetpy package does not pull the server in
        return importlib.import_module("jetpy.server.app").Server
    raise AttributeError(name)
