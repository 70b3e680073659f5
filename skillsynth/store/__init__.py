"""MemoryStore: read and write GAIA's ``memory.db`` exactly as GAIA lays it out.

GAIA's database is not ours (house rule 13): this module creates the schema the released
GAIA (amd-gaia 0.25.1) creates, version 7, runs GAIA's additive migrations (v1 .. v6 -> v7)
and adds nothing else. :func:`compare_schema` names every schema difference between two
files (the tests hold skillsynth's files against ones GAIA made). A user's real database
can be opened ``read_only=True``; that open changes no byte of the file and creates no
``-wal``/``-shm`` file.
"""

from .compare import compare_schema
from .gaia_release import installed_gaia_version
from .memory import CURRENT_VERSION, MemoryStore
from .progress import Mark
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
    "Mark",
    "MemoryStore",
    "MigrationReport",
    "Procedure",
    "StoreInfo",
    "ToolCall",
    "Turn",
    "compare_schema",
    "decode_embedding",
    "encode_embedding",
    "installed_gaia_version",
    "now_iso",
    "serialize_args",
]
