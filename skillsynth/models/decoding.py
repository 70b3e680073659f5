"""How the embedded chat server decodes: plain, or speculative (n-gram lookup, a draft model).

Live runs are generation-bound and predictable: most of what an agent writes is tool-call JSON
whose values it copies from the context. llama-server can draft tokens and verify them in one
batch, either from n-grams of the context itself (no second model) or with a small draft
model of the same family and tokenizer (Qwen2.5-Coder 0.5B for the 1.5B). Verification keeps
the target model's own choice, so a greedy answer should not change; a sampled one may (the
random stream is consumed differently), so a speculative setting is part of a sampled call's
cache identity (:attr:`Decoding.identity`) and recorded in every run record.
``skillsynth bench live`` measures each setting's runs per hour and whether greedy transcripts
stay identical; nothing here is on by default until that benchmark says it pays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from ..errors import ConfigError

__all__ = ["DECODINGS", "DRAFT_FOR", "Decoding", "DecodingName"]

DecodingName = Literal["none", "ngram", "draft"]
DECODINGS: tuple[DecodingName, ...] = get_args(DecodingName)
#: The draft model for each chat model that has one (same family and tokenizer).
DRAFT_FOR = {"qwen2.5-coder-1.5b": "qwen2.5-coder-0.5b"}
#: n-gram lookup: match the last NGRAM_N tokens in the context, draft up to NGRAM_M after them.
NGRAM_N, NGRAM_M = 4, 16
#: Tokens the draft model proposes per step.
DRAFT_MAX = 8


@dataclass(frozen=True)
class Decoding:
    """One decoding setting of the embedded chat server.

    Attributes:
        name: ``none`` (plain), ``ngram`` (prompt-lookup drafting from the context's own
            n-grams, ``--spec-type ngram-simple``) or ``draft`` (a draft model,
            :data:`DRAFT_FOR`).
    """

    name: DecodingName = "none"

    def __post_init__(self) -> None:
        if self.name not in DECODINGS:
            raise ConfigError(f"decoding must be one of {', '.join(DECODINGS)}, got "
                              f"{self.name!r}", key="decoding")

    @property
    def identity(self) -> str:
        """What a sampled call's cache key and a run record carry ("" for plain decoding)."""
        if self.name == "ngram":
            return f"ngram-simple:n{NGRAM_N}:m{NGRAM_M}"
        if self.name == "draft":
            return f"draft-simple:n{DRAFT_MAX}"
        return ""

    def server_args(self, draft_model: Path | None = None) -> list[str]:
        """llama-server's arguments for this setting (``draft_model``: the draft's GGUF).

        Raises:
            ConfigError: ``draft`` without a draft model file.
        """
        if self.name == "ngram":
            return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(NGRAM_N),
                    "--spec-ngram-simple-size-m", str(NGRAM_M)]
        if self.name == "draft":
            if draft_model is None:
                raise ConfigError("decoding draft needs a draft model; the chat models with "
                                  f"one: {', '.join(DRAFT_FOR)}", key="decoding")
            return ["--spec-type", "draft-simple", "--model-draft", str(draft_model),
                    "--spec-draft-n-max", str(DRAFT_MAX)]
        return []
