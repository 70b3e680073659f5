"""Open the chat client and embedder of one backend: the one place a run chooses its models.

* ``local``: start the embedded llama-server models (stopped on exit);
* ``lemonade``: Lemonade Server (production: Gemma-4-E4B-it-GGUF);
* ``endpoints``: servers that are already running (a sweep starts the embedded models once
  and hands their URLs to every point).

A failure is a typed error from the client or server; there is never a fallback to another
backend or model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, LLMError
from ..protocols import ChatModel
from .cache import CallCache
from .chat import ChatClient
from .decoding import Decoding
from .embed import Embedder
from .llm import LEMONADE_EMBED_MODEL, Endpoint

__all__ = ["AGENT_PLAYS_USER", "BACKENDS", "BackendName", "BackendSpec", "open_clients",
           "open_user", "point_user"]

#: A sweep's ``user: agent``: the agent's own model plays the simulated user on the agent's
#: endpoint (one model server on a small machine; its turns are cached under the user's own
#: prompt version, apart from the agent's).
AGENT_PLAYS_USER = "agent"

BackendName = Literal["local", "lemonade", "endpoints"]
BACKENDS: tuple[BackendName, ...] = ("local", "lemonade", "endpoints")


@dataclass(frozen=True)
class BackendSpec:
    """Which models a run talks to.

    Attributes:
        backend: ``local``, ``lemonade`` or ``endpoints``.
        chat_model, embed_model: local: ``chat_model`` names an embedded chat model
            (:func:`skillsynth.models.chat_models.chat_model_names`, default
            :data:`~skillsynth.models.chat_models.DEFAULT_CHAT_MODEL`); lemonade: model ids
            (default Gemma-4 and its embedder); endpoints: required.
        chat_url, embed_url: the OpenAI-compatible roots (``endpoints`` only).
        cache: the call cache file (None: no cache).
        timeout_s: seconds per model request.
        decoding: ``local`` only: the chat server's decoding (``none``, ``ngram`` or
            ``draft``; :mod:`~skillsynth.models.decoding`).
        chat_decoding: ``endpoints`` only: the running chat server's decoding identity
            (:attr:`~skillsynth.models.decoding.Decoding.identity`; a sweep hands its points
            the servers it started), for sampled calls' cache keys and run records.
    """

    backend: BackendName = "local"
    chat_model: str | None = None
    embed_model: str | None = None
    chat_url: str | None = None
    embed_url: str | None = None
    cache: str | None = None
    timeout_s: float = 300.0
    decoding: str = "none"
    chat_decoding: str = ""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got "
                              f"{self.backend!r}", key="backend")
        Decoding(self.decoding)  # type: ignore[arg-type]  # a bad name fails here, named
        if self.decoding != "none" and self.backend != "local":
            raise ConfigError("decoding applies to the embedded servers (backend local) only",
                              key="decoding")
        if self.backend == "endpoints":
            missing = [k for k in ("chat_url", "chat_model", "embed_url", "embed_model")
                       if not getattr(self, k)]
            if missing:
                raise ConfigError(f"backend 'endpoints' needs {', '.join(missing)}",
                                  key=missing[0])


@contextlib.contextmanager
def open_clients(spec: BackendSpec) -> Iterator[tuple[ChatClient, Embedder]]:
    """The chat client and embedder of ``spec``, closed (and local servers stopped) on exit."""
    from .serve import locate_models, serve_local

    cache = CallCache(Path(spec.cache)) if spec.cache else None
    try:
        if spec.backend == "local":
            with serve_local(locate_models(chat=spec.chat_model),
                             request_timeout_s=spec.timeout_s,
                             decoding=Decoding(spec.decoding)) as servers:  # type: ignore[arg-type]
                assert servers.chat is not None and servers.embed is not None
                with ChatClient(servers.chat, cache=cache) as chat, \
                        Embedder(servers.embed, cache=cache) as emb:
                    yield chat, emb
            return
        if spec.backend == "lemonade":
            chat_ep = Endpoint.lemonade(spec.chat_model or "Gemma-4-E4B-it-GGUF",
                                        timeout_s=spec.timeout_s)
            embed_ep = Endpoint.lemonade(spec.embed_model or LEMONADE_EMBED_MODEL,
                                         timeout_s=spec.timeout_s)
        else:
            assert spec.chat_url and spec.chat_model and spec.embed_url and spec.embed_model
            chat_ep = Endpoint(backend="local", base_url=spec.chat_url, model=spec.chat_model,
                               timeout_s=spec.timeout_s, decoding=spec.chat_decoding)
            embed_ep = Endpoint(backend="local", base_url=spec.embed_url, model=spec.embed_model,
                                timeout_s=spec.timeout_s)
        with ChatClient(chat_ep, cache=cache) as chat, Embedder(embed_ep, cache=cache) as emb:
            yield chat, emb
    finally:
        if cache is not None:
            cache.close()


@contextlib.contextmanager
def open_user(url: str | None, model: str | None, *, backend: str = "lemonade",
              cache: str | None = None, timeout_s: float = 300.0
              ) -> Iterator[ChatClient | None]:
    """The simulated user's chat client on its own OpenAI-compatible endpoint, or None
    (solo mode) when ``url`` is None; checked before any run."""
    if url is None:
        yield None
        return
    if not model:
        raise LLMError("a user simulator endpoint needs a model id (--user-model)",
                       base_url=url)
    store = CallCache(Path(cache)) if cache else None
    try:
        endpoint = Endpoint(backend=backend,  # type: ignore[arg-type]
                            base_url=url, model=model, timeout_s=timeout_s)
        with ChatClient(endpoint, cache=store) as user:
            user.ensure_ready()
            yield user
    finally:
        if store is not None:
            store.close()


@contextlib.contextmanager
def point_user(user: Mapping[str, Any] | str | None, agent: ChatModel,
               cache: str | None = None) -> Iterator[ChatModel | None]:
    """The simulated user a sweep point names: None (solo), :data:`AGENT_PLAYS_USER` (the
    agent's client itself), or an endpoint ``{base_url, model[, backend]}``."""
    if user == AGENT_PLAYS_USER:
        yield agent
        return
    if isinstance(user, str):
        raise ConfigError(f"user must be {AGENT_PLAYS_USER!r} or {{base_url, model[, backend]}}, "
                          f"not {user!r}", key="user")
    u = user or {}
    with open_user(u.get("base_url"), u.get("model"), backend=u.get("backend", "lemonade"),
                   cache=cache) as client:
        yield client
