"""Replayed tool_history corpora: importers, the synthetic generator and the labels file.

Every corpus becomes a GAIA-schema ``memory.db`` plus a separate labels file that only
scoring may read (task or family, attempt index, success, reward, ground-truth steps), so
the pipeline under test can never see the answers.
"""

from __future__ import annotations

from .labels import LabelStore, SessionLabel
from .synthetic import FAMILIES, NoiseConfig, generate_corpus

__all__ = ["FAMILIES", "LabelStore", "NoiseConfig", "SessionLabel", "generate_corpus"]
