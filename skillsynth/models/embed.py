"""Embeddings over an OpenAI-compatible ``/embeddings`` route, L2-normalised float32.

An :class:`Embedder` carries an ``embedder_id`` (``<model>:<dimension>``, the model by its
recorded id: :func:`~skillsynth.models.llm.canonical_model_id`), the value GAIA keeps in
``meta.embedder_id``. Vectors from different embedders are never mixed:
:func:`check_store_embedder` refuses a database whose stored vectors came from another one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Self

import httpx
import numpy as np

from ..errors import EmbedderError, InputTooLarge, LLMError, MalformedResponse
from ..protocols import Embeds, Kind
from ..store import MemoryStore
from .cache import CallCache, cache_key
from .llm import Endpoint, ModelConnection, canonical_model_id

__all__ = ["EMBEDDER_META_KEY", "LEMONADE_EMBED_MAX_TOKENS", "MAX_CHARS", "TOKEN_CHECK_CHARS",
           "Embedder", "Embeds", "check_store_embedder", "same_embedder"]

EMBEDDER_META_KEY = "embedder_id"


#: The default bound on one embedded text, in characters (see :class:`Embedder`).
MAX_CHARS = 2000
#: Above this many characters a text is measured in tokens on the embedded server.
TOKEN_CHECK_CHARS = 500
#: The most tokens one embedding input may have on Lemonade when the server's refusal does
#: not say (llama-server's default physical batch, which Lemonade 11.7.0 gives an embedder
#: loaded without ``--ubatch-size``; an input over it fails with HTTP 500).
LEMONADE_EMBED_MAX_TOKENS = 512
#: Tries to fit one refused text (each cut in proportion to what the server said).
_FIT_ROUNDS = 4
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

    On Lemonade, whose ``/tokenize`` answers for whichever model was loaded last, the server
    says it: an input over its token batch is refused with both counts ("input (N tokens) is
    too large to process ... (current batch size: B)"; B taken as
    :data:`LEMONADE_EMBED_MAX_TOKENS` when not said). The refused batch is halved until the
    text is alone, then the text is cut in proportion (B/N, less a margin) until the server
    takes it; the cut is counted and remembered, so the text is not measured again.
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
        """``<model>:<dimension>``: what ``meta.embedder_id`` records (the model's recorded
        id, so ``user.X`` and ``X`` on Lemonade give one embedder id)."""
        return f"{self.endpoint.model_id}:{self.dimension}"

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
                                    model=self.endpoint.model_id, input=text)
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
        fitted_before = set(self._fitted)
        for start in batches:
            chunk = todo[start:start + self.batch_size]
            vecs = self._request_fitting(chunk)
            for text, v in zip(chunk, vecs, strict=True):
                first = where[text][0]
                if self.cache is not None and keys[first] is not None:
                    stored = self.cache.put(keys[first] or "", v.astype("<f4").tobytes(),
                                            kind="embed", model=self.endpoint.model_id)
                    v = np.frombuffer(stored, dtype="<f4").astype(np.float32)  # first wins
                for i in where[text]:
                    out[i] = v
        for text in set(self._fitted) - fitted_before:  # cut at the server's word just now
            if self._fitted[text] != text:
                # each occurrence counts once: a text _bound already cut is counted there
                self.truncated += sum(inputs[i] == prefix + texts[i]
                                      for i in where.get(text, ()))
        if not inputs:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        arr = np.vstack([v for v in out if v is not None]).astype(np.float32)
        self._set_dim(arr.shape[1])
        return arr

    def _bound(self, text: str) -> str:
        """``text`` cut to what the model can read (counted when cut)."""
        cut = text[:self.max_chars]
        if cut in self._fitted:  # a long text is measured once, not on every call
            cut = self._fitted[cut]
        elif self.endpoint.backend == "local" and len(cut) > TOKEN_CHECK_CHARS:
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

    def _request_fitting(self, batch: list[str]) -> list[np.ndarray]:
        """:meth:`_request`, with each text the server refuses as too long cut to fit."""
        try:
            return self._request(batch)
        except InputTooLarge as exc:
            if len(batch) == 1:
                return [self._fit(batch[0], exc)]
            # the refusal does not say which text it was: halve the batch until it is alone
            mid = len(batch) // 2
            return self._request_fitting(batch[:mid]) + self._request_fitting(batch[mid:])

    def _fit(self, text: str, refused: InputTooLarge) -> np.ndarray:
        """Cut ``text`` until the server takes it, in proportion to the counts it gave."""
        cut = text
        for _ in range(_FIT_ROUNDS):
            limit = refused.limit or LEMONADE_EMBED_MAX_TOKENS
            if not refused.tokens:
                break
            keep = max(1, int(len(cut) * 0.95 * limit / refused.tokens))
            cut = cut[:keep]
            if " " in cut[keep // 2:]:  # end on a word boundary where one is near
                cut = cut[:cut.rindex(" ")]
            try:
                (v,) = self._request([cut])
            except InputTooLarge as again:
                refused = again
                continue
            self._fitted[text] = cut
            log.info("a %d-character text over the server's token batch (%s tokens, at most "
                     "%d) was cut to %d characters", len(text), refused.tokens, limit, len(cut))
            return v
        raise EmbedderError(f"{self.endpoint.model}: a {len(text)}-character text stays over "
                            f"the server's token batch after {_FIT_ROUNDS} cuts: "
                            f"{refused}") from refused

    def _request(self, batch: list[str]) -> list[np.ndarray]:
        try:
            self.conn.ensure_model()
            body = self.conn.request("POST", "/embeddings",
                                     {"model": self.conn.served_model, "input": batch})
        except InputTooLarge:
            raise
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


def _split_embedder_id(embedder_id: str) -> tuple[str, str | None]:
    """``<model>:<dimension>`` -> (model by its recorded id, dimension); GAIA stamps the
    model id alone (dimension None)."""
    model, sep, dim = embedder_id.rpartition(":")
    if sep and dim.isdigit():
        return canonical_model_id(model), dim
    return canonical_model_id(embedder_id), None


def same_embedder(a: str, b: str) -> bool:
    """Whether two embedder ids name one embedder: the same model (``user.X`` and ``X`` are
    one Lemonade model) and, where both give it, the same dimension."""
    (ma, da), (mb, db) = _split_embedder_id(a), _split_embedder_id(b)
    return ma == mb and (da is None or db is None or da == db)


def check_store_embedder(store: MemoryStore, embedder: Embeds, *, record: bool = True) -> None:
    """Refuse to mix embedders in one database; record ours where none is recorded.

    GAIA clears every stored vector when its embedder changes; skillsynth never does that
    to a user's database, so a different ``meta.embedder_id`` is an error to resolve by
    hand (use that embedder, or work on a copy). Ids are compared by :func:`same_embedder`
    (an id recorded in Lemonade's ``user.`` form, or GAIA's stamp without a dimension, is the
    same embedder); the recorded value is never rewritten.

    Raises:
        EmbedderError: the database records another embedder.
    """
    ours = embedder.embedder_id
    theirs = store.get_meta(EMBEDDER_META_KEY)
    if theirs is None:
        if record and not store.read_only:
            store.set_meta(EMBEDDER_META_KEY, ours)
        return
    if not same_embedder(theirs, ours):
        raise EmbedderError(
            f"{store.path}: its stored embeddings came from {theirs!r}, this run embeds "
            f"with {ours!r}; vectors from two embedders are not comparable. Configure "
            f"{theirs!r}, or run on a copy of the database without its embeddings")
