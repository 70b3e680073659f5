"""Chat completions through one :class:`~.llm.ModelConnection`, with the call cache.

:class:`ChatClient` is what every stage that asks a chat model holds: it builds the request
(messages, sampling settings, a JSON schema or tools), answers it from the call cache where it
can (keyed on the model, the request and the prompt version, never on timeouts or retries),
and parses the answer into a :class:`ChatResult`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

import httpx

from ..errors import MalformedResponse
from .cache import CallCache, cache_key
from .llm import Endpoint, ModelConnection

__all__ = ["ChatClient", "ChatResult"]


@dataclass(frozen=True)
class ChatResult:
    """One chat completion.

    Attributes:
        content: the assistant text (None when the model only called tools).
        tool_calls: OpenAI-shaped tool calls (``function.name``, ``function.arguments``).
        finish_reason: ``stop``, ``length`` or ``tool_calls``.
        usage: token counts as the server reported them.
        model: the model id the request was made for.
        cached: answered from the call cache (no request sent).
        timings: llama-server's own timings of the request, where it sent them (prompt
            tokens evaluated and reused from its cache, generated tokens, milliseconds,
            draft tokens proposed and accepted): the live-speed benchmark reads them.
    """

    content: str | None
    tool_calls: tuple[dict[str, Any], ...]
    finish_reason: str | None
    usage: dict[str, Any]
    model: str
    cached: bool = False
    timings: dict[str, Any] = field(default_factory=dict)

    @property
    def completion_tokens(self) -> int:
        """Generated tokens (0 when the server did not say)."""
        return int(self.usage.get("completion_tokens") or 0)


class ChatClient:
    """Chat completions against one :class:`Endpoint`, through an optional call cache."""

    def __init__(self, endpoint: Endpoint, *, cache: CallCache | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.endpoint = endpoint
        self.cache = cache
        self.conn = ModelConnection(endpoint, transport=transport)
        #: completions requested from the server (cache hits excluded).
        self.calls = 0
        #: completions answered by the call cache (``cached`` lookups excluded).
        self.cache_hits = 0
        #: the latest answer :meth:`chat` returned (its usage, for benchmarks).
        self.last: ChatResult | None = None

    @property
    def model_id(self) -> str:
        """The endpoint's model id, as recorded (:attr:`Endpoint.model_id`)."""
        return self.endpoint.model_id

    def close(self) -> None:
        """Close the HTTP client (the cache belongs to the caller)."""
        self.conn.close()

    def ensure_ready(self) -> None:
        """Fail with a typed error unless the server is up and serves the configured model."""
        self.conn.ensure_model()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        json_schema: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
        prompt_version: str = "",
    ) -> ChatResult:
        """One completion.

        Args:
            messages: OpenAI chat messages.
            temperature: sampling temperature (GAIA distils at 0.1).
            max_tokens: generation cap.
            stop: stop sequences.
            json_schema: constrain the answer to this JSON schema (sent in the nested
                ``response_format`` form that Lemonade passes through; bound every string and
                array in it, small models loop otherwise).
            tools: OpenAI function-calling tool specs.
            seed: sampling seed, where the server honours one.
            prompt_version: the version of the prompt template; part of the cache key.

        Raises:
            LLMUnavailable, ModelNotFound, MalformedResponse: see the module docstring.
        """
        payload, key = self._payload(messages, temperature=temperature, max_tokens=max_tokens,
                                     stop=stop, json_schema=json_schema, tools=tools, seed=seed,
                                     prompt_version=prompt_version)
        if key is not None and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                self.last = replace(self._parse(json.loads(hit)), cached=True)
                return self.last
        self.conn.ensure_model()
        payload["model"] = self.conn.served_model
        body = self.conn.request("POST", "/chat/completions", payload)
        self.calls += 1
        result = self._parse(body)
        if key is not None and self.cache is not None:
            stored = self.cache.put(key, json.dumps(body).encode("utf-8"), kind="chat",
                                    model=self.endpoint.model_id)
            result = self._parse(json.loads(stored))  # the first stored answer wins
        self.last = result
        return result

    def cached(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult | None:
        """The cached answer :meth:`chat` would return for these arguments, or None.

        Never sends a request (the tuning views use it to show only what is already known).
        """
        _, key = self._payload(messages, **kwargs)
        if key is None or self.cache is None:
            return None
        hit = self.cache.get(key)
        return None if hit is None else replace(self._parse(json.loads(hit)), cached=True)

    def _payload(self, messages: Sequence[Mapping[str, Any]], *, temperature: float = 0.0,
                 max_tokens: int = 512, stop: Sequence[str] | None = None,
                 json_schema: Mapping[str, Any] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None, seed: int | None = None,
                 prompt_version: str = "") -> tuple[dict[str, Any], str | None]:
        """The request body and its cache key (None without a cache)."""
        payload: dict[str, Any] = {"model": self.endpoint.model, "messages": list(messages),
                                   "temperature": temperature, "max_tokens": max_tokens,
                                   "stream": False}
        if stop:
            payload["stop"] = list(stop)
        if json_schema is not None:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "answer",
                                                          "schema": dict(json_schema)}}
        if tools:
            payload["tools"] = list(tools)
        if seed is not None:
            payload["seed"] = seed
        key = None
        if self.cache is not None:  # keyed on the recorded id: one entry for both forms
            request = {k: v for k, v in payload.items() if k != "stream"}
            request["model"] = self.endpoint.model_id
            if self.endpoint.decoding and temperature > 0:  # greedy: the same answer
                request["decoding"] = self.endpoint.decoding
            key = cache_key(kind="chat", backend=self.endpoint.backend,
                            model=self.endpoint.model_id, prompt_version=prompt_version,
                            request=request)
        return payload, key

    def _parse(self, body: Any) -> ChatResult:
        try:
            choice = body["choices"][0]
            msg = choice["message"]
            content = msg.get("content")
            calls = tuple(msg.get("tool_calls") or ())
        except (KeyError, IndexError, TypeError) as exc:
            raise self.conn._err(MalformedResponse, "chat completion without "
                                 f"choices[0].message: {str(body)[:200]}") from exc
        if content is not None and not isinstance(content, str):
            raise self.conn._err(MalformedResponse, f"message content is {type(content)}")
        return ChatResult(content=content, tool_calls=calls,
                          finish_reason=choice.get("finish_reason"),
                          usage=dict(body.get("usage") or {}), model=self.endpoint.model_id,
                          timings=dict(body.get("timings") or {}))
