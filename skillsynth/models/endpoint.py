"""Where a model is served: an :class:`Endpoint` (backend, base URL, model id, timeouts), and
Lemonade's model ids.

Lemonade model ids (measured against Lemonade 11.7.0): a model registered as ``user.X`` is
listed by ``/models`` under its bare name ``X`` (since Lemonade 10.5), and requests accept
both forms; the bare name (:func:`canonical_model_id`) is what skillsynth records.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import LLMError

__all__ = [
    "LEMONADE_BASE_URL",
    "LEMONADE_CHAT_MODEL",
    "LEMONADE_EMBED_MODEL",
    "USER_PREFIX",
    "Backend",
    "Endpoint",
    "canonical_model_id",
    "lemonade_pull_command",
]

Backend = Literal["lemonade", "local"]
#: Lemonade Server's default base URL (v10.1 and later; port 8000 before).
LEMONADE_BASE_URL = "http://localhost:13305/api/v1"
#: The production chat model (#887).
LEMONADE_CHAT_MODEL = "Gemma-4-E4B-it-GGUF"
#: GAIA's embedder on Lemonade (768-d).
LEMONADE_EMBED_MODEL = "user.embeddinggemma-300m-GGUF"
#: The namespace Lemonade gives a model a user registered (``lemonade pull user.X ...``).
USER_PREFIX = "user."
#: User models whose registration is known (bare name -> checkpoint, recipe, labels): what
#: ``lemonade pull user.X`` needs besides the name. GAIA's embedder, as GAIA registers it.
KNOWN_USER_MODELS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "embeddinggemma-300m-GGUF": ("ggml-org/embeddinggemma-300M-GGUF:Q8_0", "llamacpp",
                                 ("embeddings",)),
}


def canonical_model_id(model: str) -> str:
    """The id skillsynth records for a Lemonade model: its public name, the one ``/models``
    lists since Lemonade 10.5 (``user.X`` -> ``X``; any other id as is).

    ``user.X`` and ``X`` name one model on Lemonade (a user model takes the bare name over a
    built-in of that name), so run records, ``embedder_id``, cache keys and calibration
    files use this form whichever one was configured.
    """
    return model.removeprefix(USER_PREFIX) if model.startswith(USER_PREFIX) else model


def lemonade_pull_command(model: str) -> str:
    """The Lemonade 11 command that makes ``model`` available (``lemonade pull``).

    A ``user.*`` model is registered by its checkpoint and recipe, so its command carries
    them (the known ones filled in, else placeholders to replace); a bare name that is not a
    known user model is pulled as a Lemonade built-in.
    """
    bare = canonical_model_id(model)
    known = KNOWN_USER_MODELS.get(bare)
    if known is None and not model.startswith(USER_PREFIX):
        return f"lemonade pull {model}"
    checkpoint, recipe, labels = known or ("OWNER/REPO-GGUF:VARIANT", "llamacpp", ())
    extra = "".join(f" --label {label}" for label in labels)
    return (f"lemonade pull {USER_PREFIX}{bare} --checkpoint main {checkpoint} "
            f"--recipe {recipe}{extra}")


@dataclass(frozen=True)
class Endpoint:
    """Where one model is served and how patiently to talk to it.

    Attributes:
        backend: ``"lemonade"`` or ``"local"`` (the embedded llama-server).
        base_url: the OpenAI-compatible root (``.../api/v1`` or ``.../v1``).
        model: the model id the server must list under ``/models``.
        api_key: sent as ``Authorization: Bearer``; never printed.
        timeout_s: the most seconds one request may take, answer read whole (each attempt;
            a trickling server is cut off too). Lemonade's first request to a model it has
            not downloaded can take minutes; raise this for that case rather than retrying.
        connect_timeout_s: how long to wait for the TCP connection.
        max_retries: retries after a connection failure, timeout or 5xx (then give up).
            On Lemonade a POST that timed out is not retried: Lemonade does not cancel a
            generation whose client went away, so a retry would run beside it (measured on
            11.7.0; docs/models.md).
        retry_backoff_s: first pause between retries; doubles each time.
        decoding: the server's speculative decoding, where it uses one
            (:attr:`skillsynth.models.decoding.Decoding.identity`; "" plain): part of a
            sampled call's cache key, since drafting changes how the random stream is used.
    """

    backend: Backend
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 300.0
    connect_timeout_s: float = 5.0
    max_retries: int = 2
    retry_backoff_s: float = 0.5
    decoding: str = ""

    def __post_init__(self) -> None:
        if self.backend not in ("lemonade", "local"):
            raise LLMError(f"unknown backend {self.backend!r}; use 'lemonade' or 'local'")
        if not self.base_url.startswith(("http://", "https://")):
            raise LLMError(f"base_url {self.base_url!r} must start with http:// or https://")
        if not self.model:
            raise LLMError("an endpoint needs a model id", base_url=self.base_url)
        if self.max_retries < 0 or self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise LLMError("timeouts must be positive and max_retries >= 0",
                           base_url=self.base_url)
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    @classmethod
    def lemonade(cls, model: str = LEMONADE_CHAT_MODEL, *, base_url: str | None = None,
                 env: Mapping[str, str] | None = None, **kwargs: Any) -> Endpoint:
        """A Lemonade endpoint; ``LEMONADE_BASE_URL`` and ``LEMONADE_API_KEY`` apply."""
        environ = os.environ if env is None else env
        url = base_url or environ.get("LEMONADE_BASE_URL") or LEMONADE_BASE_URL
        return cls(backend="lemonade", base_url=url, model=model,
                   api_key=environ.get("LEMONADE_API_KEY"), **kwargs)

    @property
    def model_id(self) -> str:
        """The id recorded for :attr:`model` (Lemonade: :func:`canonical_model_id`)."""
        return canonical_model_id(self.model) if self.backend == "lemonade" else self.model

    def with_(self, **changes: Any) -> Endpoint:
        """A copy with some fields replaced (e.g. a longer timeout)."""
        return replace(self, **changes)

    @property
    def how_to_get_model(self) -> str:
        """The command that makes :attr:`model` available on this backend."""
        if self.backend == "lemonade":
            return lemonade_pull_command(self.model)
        return "skillsynth models prepare"
