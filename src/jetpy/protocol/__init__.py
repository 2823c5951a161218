"""jetpy.protocol: the NATS client protocol, sans-IO (no sockets, no asyncio, no clock).

Bytes in, ops out (:class:`Parser`); ops out, bytes (:mod:`encode`); header blocks
(:mod:`headers`). The only error that leaves this package is :class:`ProtocolError`.
"""

from jetpy.protocol.errors import ProtocolError
from jetpy.protocol.headers import Headers, encode_headers, get_header, parse_headers
from jetpy.protocol.parser import Parser

__all__ = ["Headers", "Parser", "ProtocolError", "encode_headers", "get_header", "parse_headers"]
