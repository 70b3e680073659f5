"""The model contracts every stage is written against, in one place.

:class:`ChatModel` is what :class:`~skillsynth.models.chat.ChatClient` offers and what the stages
use of it; :class:`Embeds` is what :class:`~skillsynth.models.embed.Embedder` offers. Unit tests
hand in fakes (named as fakes) that satisfy the same protocols; nothing checks for
attributes at run time: every model says which model it is (``model_id``, ``embedder_id``),
so a run record never has to guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np

__all__ = ["ChatAnswer", "ChatModel", "Embeds", "Kind"]

#: How a text is embedded: a goal asked about (``query``) or a stored text (``document``).
Kind = Literal["query", "document"]


class ChatAnswer(Protocol):
    """One completion as the stages read it (:class:`~skillsynth.models.chat.ChatResult`)."""

    @property
    def content(self) -> str | None: ...

    @property
    def tool_calls(self) -> tuple[dict[str, Any], ...]: ...

    @property
    def cached(self) -> bool: ...

    @property
    def usage(self) -> dict[str, Any]: ...


class ChatModel(Protocol):
    """A chat model behind one endpoint, through an optional call cache.

    Attributes:
        calls: completions requested from the server so far (cache hits excluded).
        cache_hits: completions answered by the call cache so far.
    """

    calls: int
    cache_hits: int

    @property
    def model_id(self) -> str:
        """The model the answers come from (recorded with every run)."""
        ...

    def chat(self, messages: Sequence[Mapping[str, Any]], *, temperature: float = ...,
             max_tokens: int = ..., stop: Sequence[str] | None = ...,
             json_schema: Mapping[str, Any] | None = ...,
             tools: Sequence[Mapping[str, Any]] | None = ..., seed: int | None = ...,
             prompt_version: str = ...) -> ChatAnswer:
        """One completion (raises :class:`~skillsynth.errors.LLMError` subclasses)."""
        ...

    def ensure_ready(self) -> None:
        """Fail now, before anything is written, when the model cannot answer."""
        ...


class Embeds(Protocol):
    """What the stages need of an embedder (an :class:`~skillsynth.models.embed.Embedder`)."""

    @property
    def embedder_id(self) -> str:
        """``<model>:<dimension>``: what GAIA's ``meta.embedder_id`` records."""
        ...

    def embed(self, texts: Sequence[str], *, kind: Kind = ...,
              progress: bool = ...) -> np.ndarray: ...
