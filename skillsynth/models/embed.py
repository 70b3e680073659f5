"""Embeddings over an OpenAI-compatible ``/embeddings`` route, L2-normalised float32.

An :class:`Embedder` carries an ``embedder_id`` (``<model>:<dimension>``), the value GAIA
keeps in ``meta.embedder_id``. Vectors from different embedders are never mixed:
:func:`check_store_embedder` refuses a database whose stored vectors came from another one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Self

import httpx
import numpy as np

from ..errors import EmbedderError, LLMError, MalformedResponse
from ..protocols import Embeds, Kind
from ..store import MemoryStore
from .cache import CallCache, cache_key
from .llm import Endpoint, ModelConnection

__all__ = ["EMBEDDER_META_KEY", "MAX_CHARS", "TOKEN_CHECK_CHARS", "Embedder", "Embeds",
           "check_store_embedder"]

EMBEDDER_META_KEY = "embedder_id"


#: The default bound on one embedded text, in characters (see :class:`Embedder`).
MAX_CHARS = 2000
#: Above this many characters a text is measured in tokens on the embedded server.
TOKEN_CHECK_CHARS = 500
log = logging.getLogger(__name__)


class Embedder:
    """Batched embeddings from one endpoint.

    Args:
        endpoint: where the embedding model is served.
        batch_size: texts per request.
        query_prefix: prepended to query texts (nomic-style models want ``"search_query: "``).
        document_prefix: prepended to document texts (``"search_document: "``).
        cache: optional call cache; each text is cached on its own.
        transport: for tests that count requests.
        max_chars: texts longer than this are cut to it before embedding (and counted in
            :attr:`truncated`): an embedding model has a fixed context (MiniLM and nomic:
            512 tokens) and a longer input fails the whole batch. Every shipped corpus's
            goals fit (the longest, tau-bench's, is 1,326 characters).

    On the embedded llama-server (backend ``local``) the bound is exact: a text over
    :data:`TOKEN_CHECK_CHARS` characters is tokenized by the server and, when it has more
    tokens than the server's context allows, cut to the tokens that fit (counted too).
    """

    def __init__(self, endpoint: Endpoint, *, batch_size: int = 64, query_prefix: str = "",
                 document_prefix: str = "", cache: CallCache | None = None,
                 transport: httpx.BaseTransport | None = None, max_chars: int = MAX_CHARS):
        if batch_size < 1:
            raise EmbedderError("batch_size must be >= 1")
        if max_chars < 1:
            raise EmbedderError("max_chars must be >= 1")
        self.max_chars = max_chars
        #: texts cut to fit the model so far.
        self.truncated = 0
        self._ctx: int | None = None
        self._fitted: dict[str, str] = {}
        self.endpoint = endpoint
        self.batch_size = batch_size
        self.prefixes = {"query": query_prefix, "document": document_prefix}
        self.cache = cache
        self.conn = ModelConnection(endpoint, transport=transport)
        self._dim: int | None = None

    def close(self) -> None:
        """Close the HTTP client."""
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dimension(self) -> int:
        """The vector size (asked of the server once)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @property
    def embedder_id(self) -> str:
        """``<model>:<dimension>``: what ``meta.embedder_id`` records."""
        return f"{self.endpoint.model}:{self.dimension}"

    def embed(self, texts: Sequence[str], *, kind: Kind = "document",
              progress: bool = False) -> np.ndarray:
        """Embed ``texts``; returns an ``(n, d)`` float32 array of unit-length rows.

        Raises:
            EmbedderError: the server failed, or answered vectors that are empty,
                non-finite, zero or of inconsistent size (the model error is chained).
        """
        if isinstance(texts, str):
            raise EmbedderError("embed() takes a list of texts, not one string")
        if kind not in self.prefixes:
            raise EmbedderError(f"kind must be 'query' or 'document', got {kind!r}")
        prefix = self.prefixes[kind]
        inputs = [self._bound(prefix + t) for t in texts]
        out: list[np.ndarray | None] = [None] * len(inputs)
        keys: list[str | None] = [None] * len(inputs)
        if self.cache is not None:
            for i, text in enumerate(inputs):
                keys[i] = cache_key(kind="embed", backend=self.endpoint.backend,
                                    model=self.endpoint.model, input=text)
                hit = self.cache.get(keys[i] or "")
                if hit is not None:
                    out[i] = np.frombuffer(hit, dtype="<f4").astype(np.float32)
        # each distinct text is requested once (corpora repeat goals verbatim)
        where: dict[str, list[int]] = {}
        for i, v in enumerate(out):
            if v is None:
                where.setdefault(inputs[i], []).append(i)
        todo = list(where)
        batches = range(0, len(todo), self.batch_size)
        if progress and len(todo) > self.batch_size:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="embedding", unit="batch")
        for start in batches:
            chunk = todo[start:start + self.batch_size]
            vecs = self._request(chunk)
            for text, v in zip(chunk, vecs, strict=True):
                first = where[text][0]
                if self.cache is not None and keys[first] is not None:
                    stored = self.cache.put(keys[first] or "", v.astype("<f4").tobytes(),
                                            kind="embed", model=self.endpoint.model)
                    v = np.frombuffer(stored, dtype="<f4").astype(np.float32)  # first wins
                for i in where[text]:
                    out[i] = v
        if not inputs:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        arr = np.vstack([v for v in out if v is not None]).astype(np.float32)
        self._set_dim(arr.shape[1])
        return arr

    def _bound(self, text: str) -> str:
        """``text`` cut to what the model can read (counted when cut)."""
        cut = text[:self.max_chars]
        if self.endpoint.backend == "local" and len(cut) > TOKEN_CHECK_CHARS:
            if cut not in self._fitted:  # a long text is measured once, not on every call
                self._fitted[cut] = self._token_bound(cut)
            cut = self._fitted[cut]
        if cut != text:
            self.truncated += 1
            log.info("a %d-character text was cut to %d characters before embedding",
                     len(text), len(cut))
        return cut

    def _token_bound(self, text: str) -> str:
        """llama-server: keep the tokens that fit the server's context (CLS and SEP aside)."""
        root = self.endpoint.base_url.removesuffix("/v1")
        try:
            if self._ctx is None:
                props = self.conn.request("GET", f"{root}/props")
                self._ctx = int(props["default_generation_settings"]["n_ctx"])
            tokens = self.conn.request("POST", f"{root}/tokenize", {"content": text})["tokens"]
            room = self._ctx - 2
            if len(tokens) <= room:
                return text
            out = self.conn.request("POST", f"{root}/detokenize", {"tokens": tokens[:room]})
            return str(out["content"]).strip()
        except (LLMError, KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(f"{self.endpoint.model}: cannot bound a {len(text)}-character "
                                f"text to the server's context: {exc}") from exc

    def _set_dim(self, d: int) -> None:
        if self._dim is None:
            self._dim = d
        elif self._dim != d:
            raise EmbedderError(f"{self.endpoint.model} returned {d}-d vectors after "
                                f"{self._dim}-d ones (a cache from another model?)")

    def _request(self, batch: list[str]) -> list[np.ndarray]:
        try:
            self.conn.ensure_model()
            body = self.conn.request("POST", "/embeddings",
                                     {"model": self.endpoint.model, "input": batch})
        except LLMError as exc:
            raise EmbedderError(f"embedding {len(batch)} text(s) failed: {exc}") from exc
        try:
            data = sorted(body["data"], key=lambda d: d.get("index", 0))
            vecs = [np.asarray(d["embedding"], dtype=np.float64) for d in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(f"/embeddings answered no data[].embedding: "
                                f"{str(body)[:200]}") from MalformedResponse(str(exc))
        if len(vecs) != len(batch):
            raise EmbedderError(f"sent {len(batch)} texts, got {len(vecs)} vectors")
        result = []
        for v in vecs:
            if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
                raise EmbedderError(f"{self.endpoint.model} returned a malformed vector")
            norm = float(np.linalg.norm(v))
            if norm == 0.0:
                raise EmbedderError(f"{self.endpoint.model} returned a zero vector")
            result.append((v / norm).astype(np.float32))
            self._set_dim(v.size)
        return result


def check_store_embedder(store: MemoryStore, embedder: Embeds, *, record: bool = True) -> None:
    """Refuse to mix embedders in one database; record ours where none is recorded.

    GAIA clears every stored vector when its embedder changes; skillsynth never does that
    to a user's database, so a different ``meta.embedder_id`` is an error to resolve by
    hand (use that embedder, or work on a copy).

    Raises:
        EmbedderError: the database records another embedder.
    """
    ours = embedder.embedder_id
    theirs = store.get_meta(EMBEDDER_META_KEY)
    if theirs is None:
        if record and not store.read_only:
            store.set_meta(EMBEDDER_META_KEY, ours)
        return
    if theirs != ours:
        raise EmbedderError(
            f"{store.path}: its stored embeddings came from {theirs!r}, this run embeds "
            f"with {ours!r}; vectors from two embedders are not comparable. Configure "
            f"{theirs!r}, or run on a copy of the database without its embeddings")
