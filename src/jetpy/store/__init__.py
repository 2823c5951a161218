"""jetpy.store: synchronous stream storage behind the ``StreamStore`` protocol.

Owns: the seam (``base``), the in-memory oracle (``MemoryStore``), the block-file store
(``FileStore``) and consumer/metadata persistence. Must not know: asyncio, sockets, the JSON API,
delivery. Everything importable from here is public; the submodules are private.
"""

from .base import (
    FILE_HDR_OVERHEAD,
    FILE_MSG_OVERHEAD,
    MAX_PAYLOAD,
    MAX_SUBJECT_BYTES,
    MEMORY_MSG_OVERHEAD,
    UNLIMITED,
    ConsumerState,
    ConsumerStore,
    ErrCorrupt,
    ErrInvalidName,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    ErrStoreClosed,
    ErrStoreIO,
    ErrStoreLocked,
    LostData,
    SimpleState,
    StoreConfig,
    StoredMsg,
    StoreError,
    StoreLimits,
    StreamState,
    StreamStore,
    msg_size,
)
from .filestore import DEFAULT_BLOCK_SIZE, FileStore
from .memory import MemoryStore

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "FILE_HDR_OVERHEAD",
    "FILE_MSG_OVERHEAD",
    "MAX_PAYLOAD",
    "MAX_SUBJECT_BYTES",
    "MEMORY_MSG_OVERHEAD",
    "UNLIMITED",
    "ConsumerState",
    "ConsumerStore",
    "ErrCorrupt",
    "ErrInvalidName",
    "ErrMaxBytes",
    "ErrMaxMsgs",
    "ErrMaxMsgsPerSubject",
    "ErrMsgTooLarge",
    "ErrStoreClosed",
    "ErrStoreIO",
    "ErrStoreLocked",
    "FileStore",
    "LostData",
    "MemoryStore",
    "SimpleState",
    "StoreConfig",
    "StoreError",
    "StoreLimits",
    "StoredMsg",
    "StreamState",
    "StreamStore",
    "msg_size",
]
