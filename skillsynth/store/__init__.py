"""MemoryStore: read and write GAIA's ``memory.db`` exactly as GAIA lays it out.

GAIA's database is not ours (house rule 13): this module creates GAIA's tables, runs
GAIA's additive migrations (v1 -> v2 -> v3) and adds nothing else. A user's real database
can be opened ``read_only=True``; that open changes no byte of the file and creates no
``-wal``/``-shm`` file.
"""

from .memory import CURRENT_VERSION, MemoryStore
from .rows import (
    MigrationReport,
    Procedure,
    StoreInfo,
    ToolCall,
    Turn,
    decode_embedding,
    encode_embedding,
    now_iso,
    serialize_args,
)

__all__ = [
    "CURRENT_VERSION",
    "MemoryStore",
    "MigrationReport",
    "Procedure",
    "StoreInfo",
    "ToolCall",
    "Turn",
    "decode_embedding",
    "encode_embedding",
    "now_iso",
    "serialize_args",
]
