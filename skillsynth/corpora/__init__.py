"""Replayed tool_history corpora: importers, the synthetic generator and the labels file.

Every corpus becomes a GAIA-schema ``memory.db`` plus a separate labels file that only
scoring may read (task or family, attempt index, success, reward, ground-truth steps), so
the pipeline under test can never see the answers.
"""

from __future__ import annotations

from .importing import FORMATS, ImportReport, import_corpus
from .jsonl import export_jsonl
from .labels import LabelStore, SessionLabel, labels_path_for
from .stats import CorpusStats, corpus_digest, corpus_stats
from .synthetic import FAMILIES, NoiseConfig, generate_corpus

__all__ = ["FAMILIES", "FORMATS", "CorpusStats", "ImportReport", "LabelStore", "NoiseConfig",
           "SessionLabel", "corpus_digest", "corpus_stats", "export_jsonl", "generate_corpus", "import_corpus",
           "labels_path_for"]
