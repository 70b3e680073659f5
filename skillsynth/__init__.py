"""skillsynth: research and evaluation toolkit for skill auto-synthesis (GAIA #887).

Agents that remember *how* they solved a task get faster at it. skillsynth clusters an
agent's successful tool-call sequences by goal, distils each cluster into a SKILL.md
procedure, stores it in GAIA's ``memory.db`` and recalls it for the next similar goal,
and measures whether that helps.

The public API is re-exported here; each stage lives in its own module.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .config import Thresholds, gaia_memory_disabled, load_thresholds
from .errors import (
    ConfigError,
    CorpusFormatError,
    EmbedderError,
    LLMError,
    LLMUnavailable,
    MalformedResponse,
    MalformedSkill,
    ModelNotFound,
    ReadOnlyStoreError,
    SchemaError,
    SkillError,
    SkillsynthError,
    SkillValidationError,
    StoreError,
)
from .pipeline.skill import PROFILES, Skill, strip_wrappers, validate_dir, validate_skill
from .store import MemoryStore, Procedure, ToolCall, Turn

try:
    __version__ = version("skillsynth")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "PROFILES",
    "ConfigError",
    "CorpusFormatError",
    "EmbedderError",
    "LLMError",
    "LLMUnavailable",
    "MalformedResponse",
    "MalformedSkill",
    "MemoryStore",
    "ModelNotFound",
    "Procedure",
    "ReadOnlyStoreError",
    "SchemaError",
    "Skill",
    "SkillError",
    "SkillValidationError",
    "SkillsynthError",
    "StoreError",
    "Thresholds",
    "ToolCall",
    "Turn",
    "__version__",
    "gaia_memory_disabled",
    "load_thresholds",
    "strip_wrappers",
    "validate_dir",
    "validate_skill",
]
