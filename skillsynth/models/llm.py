"""The one OpenAI-compatible model client: Lemonade in production, the embedded servers here.

Backends are configuration (an :class:`Endpoint`), never a guess: skillsynth does not
fall back from one server or model to another. Every failure is typed:

* unreachable, timed out, or 5xx after ``max_retries`` retries -> :class:`LLMUnavailable`;
* the configured model is not served -> :class:`ModelNotFound`, with the command that
  pulls (Lemonade) or prepares (local) it;
* HTTP 401/403 -> :class:`KeyRejected` (the server is up; the key is wrong or missing);
* one input over the server's token batch -> :class:`InputTooLarge` (not retried);
* a body that is not what the API promises -> :class:`MalformedResponse`.

llama-server answers with its one loaded model whatever ``model`` a request names, so the
client checks the configured model against ``/models`` itself before its first call.

Lemonade model ids (measured against Lemonade 11.7.0): a model registered as ``user.X`` is
listed by ``/models`` under its bare name ``X`` (since Lemonade 10.5), and requests accept
both forms. The client matches the two forms as one model, sends the id the server lists,
and records the bare name (:func:`canonical_model_id`) in everything it keeps: run records,
``embedder_id``, call-cache keys and calibration file names. A generation Lemonade is asked
for runs to its end even when the client gives up (it does not cancel upstream), so a
timed-out completion on Lemonade is never retried (see :class:`Endpoint`).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

import httpx

from ..errors import (
    InputTooLarge,
    KeyRejected,
    LLMError,
    LLMUnavailable,
    MalformedResponse,
    ModelNotFound,
)
from .cache import CallCache, cache_key
from .endpoint import (
    LEMONADE_BASE_URL,
    LEMONADE_CHAT_MODEL,
    LEMONADE_EMBED_MODEL,
    Backend,
    Endpoint,
    canonical_model_id,
    lemonade_pull_command,
)

log = logging.getLogger(__name__)

#: llama-server's refusal of an input over its physical batch (Lemonade passes it on).
_TOO_LARGE = re.compile(r"input \((\d+) tokens\) is too large to process"
                        r"(?:.*?current batch size: (\d+))?", re.DOTALL)

__all__ = [
    "LEMONADE_BASE_URL",
    "LEMONADE_CHAT_MODEL",
    "LEMONADE_EMBED_MODEL",
    "Backend",
    "ChatClient",
    "ChatResult",
    "Endpoint",
    "ModelConnection",
    "canonical_model_id",
    "lemonade_pull_command",
]

class _DeadlineExceeded(Exception):
    """A request's answer did not arrive whole within the endpoint's deadline."""


#: The most often one kind of failure at one server is warned about (seconds): an outage
#: says so as it happens without a line per request.
WARN_EVERY_S = 30.0
_warned: dict[tuple[str, str], tuple[float, int]] = {}
_warned_lock = threading.Lock()


def _warn_retry(message: str, *, key: tuple[str, str]) -> None:
    """A warning per failed model request, rate limited per (server, kind of failure)."""
    now = time.monotonic()
    with _warned_lock:
        last, quiet = _warned.get(key, (-WARN_EVERY_S, 0))
        if now - last < WARN_EVERY_S:
            _warned[key] = (last, quiet + 1)
            return
        _warned[key] = (now, 0)
    more = f" ({quiet} more like it since the last warning)" if quiet else ""
    log.warning("%s%s", message, more)


class ModelConnection:
    """HTTP to one endpoint: retries, error translation, request counting.

    ``transport`` is for tests that count requests; normal use leaves it None.
    """

    def __init__(self, endpoint: Endpoint, *, transport: httpx.BaseTransport | None = None):
        self.endpoint = endpoint
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        # no keep-alive: each request opens its own connection, so the deadline's watchdog
        # (see :meth:`_send`) always knows the socket to cut; one local TCP connect per model
        # call costs nothing next to the call
        self._http = httpx.Client(
            base_url=endpoint.base_url, headers=headers, transport=transport,
            timeout=httpx.Timeout(endpoint.timeout_s, connect=endpoint.connect_timeout_s),
            limits=httpx.Limits(max_keepalive_connections=0))
        #: HTTP requests actually sent (retries included); cache hits send none.
        self.requests_sent = 0
        self._model_checked = False
        #: the model id requests carry: the configured one, or the form ``/models`` lists
        #: it in once :meth:`ensure_model` has matched them (Lemonade's ``user.`` forms).
        self.served_model = endpoint.model

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()

    def _err(self, cls: type[LLMError], message: str) -> LLMError:
        e = self.endpoint
        return cls(f"{e.backend} at {e.base_url} (model {e.model}): {message}",
                   base_url=e.base_url, model=e.model)

    def request(self, method: str, path: str, payload: Any = None) -> Any:
        """Send one request (retrying transient failures) and return the decoded JSON."""
        e = self.endpoint
        attempts = e.max_retries + 1
        last, why = "", ""
        for attempt in range(attempts):
            if attempt:
                _warn_retry(f"{e.backend} at {e.base_url} (model {e.model}): {path} attempt "
                            f"{attempt} of {attempts} failed ({last[:160]}); retrying",
                            key=(e.base_url, why))
                time.sleep(e.retry_backoff_s * 2 ** (attempt - 1))
            self.requests_sent += 1
            try:
                resp = self._send(method, path, payload)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last, why = f"{type(exc).__name__}: {exc}", "down"
                continue
            except httpx.TimeoutException as exc:
                self._refuse_to_pile_up(method, path)
                last, why = f"{type(exc).__name__}: {exc}", "slow"
                continue
            except httpx.TransportError as exc:
                last, why = f"{type(exc).__name__}: {exc}", "dropped"
                continue
            except _DeadlineExceeded as exc:
                self._refuse_to_pile_up(method, path)
                last, why = str(exc), "slow"
                continue
            if resp.status_code >= 400:
                self._raise_if_too_large(resp, path)
            if resp.status_code >= 500 and not self._is_model_error(resp):
                last, why = f"HTTP {resp.status_code}: {resp.text[:300]}", "failing"
                continue
            return self._decode(resp, path)
        start = ("start Lemonade Server" if e.backend == "lemonade"
                 else "start the embedded servers (`skillsynth models serve`)")
        hint = {"down": f"Is the server running? ({start})",
                "slow": f"The server did not answer in time; raise the timeout "
                        f"({e.timeout_s:g} s) if it is only slow, else restart it",
                "failing": "The server is up but failing; its log says why",
                "dropped": "The server closed the connection without an answer; its log "
                           "says why"}[why]
        raise self._err(LLMUnavailable, f"no usable answer from {path} after {attempts} "
                        f"attempt(s); last: {last}. {hint}")

    def _refuse_to_pile_up(self, method: str, path: str) -> None:
        """After a timed-out POST to Lemonade: fail now instead of retrying.

        Lemonade (11.7.0, measured) keeps generating a request whose client disconnected, so
        a retry would run beside the abandoned one, each slower for the other, and Lemonade
        defers unloading and shutdown until both finish.
        """
        e = self.endpoint
        if e.backend != "lemonade" or method != "POST":
            return
        raise self._err(LLMUnavailable, f"no answer from {path} within {e.timeout_s:g} s (the "
                        "request timeout); not retried: Lemonade keeps generating a request "
                        "its client gave up on, so a retry would run beside it. Raise the "
                        "timeout (`--timeout`, a sweep's `timeout_s`) or ask for fewer "
                        "tokens; the abandoned request holds the server until it ends")

    def _raise_if_too_large(self, resp: httpx.Response, path: str) -> None:
        """An input over the server's token batch: a typed error, never a retry."""
        found = _TOO_LARGE.search(resp.text)
        if found is None:
            return
        tokens, limit = found.group(1), found.group(2)
        e = self.endpoint
        raise InputTooLarge(
            f"{e.backend} at {e.base_url} (model {e.model}): {path} refused an input of "
            f"{tokens} tokens" + (f" (it takes at most {limit})" if limit else "") +
            "; shorten the input, or load the model with a larger batch (--ubatch-size)",
            base_url=e.base_url, model=e.model, tokens=int(tokens),
            limit=int(limit) if limit else None)

    def _send(self, method: str, path: str, payload: Any) -> httpx.Response:
        """One request, answered whole (status line, headers and body) within the endpoint's
        overall deadline (``timeout_s``).

        httpx's timeout bounds each read: a server that trickles a byte at a time, in its
        headers or its body, would keep a request (and whatever waits on it) alive
        indefinitely. A watchdog shuts the request's socket down at the deadline, which
        wakes a read blocked anywhere in the response.
        """
        limit = self.endpoint.timeout_s
        deadline = time.monotonic() + limit
        socks: list[socket.socket] = []
        expired = threading.Event()
        guard = threading.Lock()

        def _cut(sock: socket.socket) -> None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed
                pass

        def trace(event: str, info: Mapping[str, Any]) -> None:
            if event != "connection.connect_tcp.complete":
                return
            sock = info["return_value"].get_extra_info("socket")
            if sock is None:
                return
            with guard:
                socks.append(sock)
                late = expired.is_set()
            if late:  # connected after the deadline passed
                _cut(sock)

        def expire() -> None:
            with guard:
                expired.set()
                held = list(socks)
            for sock in held:
                _cut(sock)

        watchdog = threading.Timer(limit, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            with self._http.stream(method, path, json=payload,
                                   extensions={"trace": trace}) as resp:
                body = bytearray()
                for chunk in resp.iter_bytes():
                    body += chunk
                    if time.monotonic() > deadline:
                        raise _DeadlineExceeded(f"no complete answer within {limit:g} s")
                return httpx.Response(resp.status_code, headers=resp.headers,
                                      content=bytes(body), request=resp.request)
        except httpx.TransportError as exc:
            if expired.is_set():
                raise _DeadlineExceeded(f"no complete answer within {limit:g} s") from exc
            raise
        finally:
            watchdog.cancel()

    @staticmethod
    def _error_code(resp: httpx.Response) -> tuple[str, str]:
        try:
            body = resp.json()
        except ValueError:
            return "", resp.text[:300]
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            return str(err.get("code") or err.get("type") or ""), str(err.get("message") or "")
        return "", str(err or body)[:300]

    def _is_model_error(self, resp: httpx.Response) -> bool:
        code, _ = self._error_code(resp)
        return code in ("model_not_found", "model_load_error")

    def _decode(self, resp: httpx.Response, path: str) -> Any:
        if resp.status_code >= 400:
            code, message = self._error_code(resp)
            if code == "model_not_found" or (resp.status_code == 404 and "model" in
                                             message.lower()):
                raise self._err(ModelNotFound, f"model not served ({message or code}); run "
                                f"`{self.endpoint.how_to_get_model}`")
            if code == "model_load_error":
                raise self._err(LLMUnavailable, f"the server could not load the model: "
                                f"{message}")
            if resp.status_code in (401, 403):
                what = ("rejected the key" if self.endpoint.api_key
                        else "wants an API key and none was sent")
                where = ("check LEMONADE_API_KEY" if self.endpoint.backend == "lemonade"
                         else "the endpoint needs a key")
                raise self._err(KeyRejected, f"HTTP {resp.status_code} from {path}: the server "
                                f"{what} ({where})")
            raise self._err(LLMError, f"HTTP {resp.status_code} from {path}: "
                            f"{message or resp.text[:300]}")
        try:
            return resp.json()
        except ValueError as exc:
            raise self._err(MalformedResponse, f"{path} answered non-JSON: "
                            f"{resp.text[:200]!r}") from exc

    def model_ids(self) -> list[str]:
        """The model ids ``/models`` lists (OpenAI ``data[].id``; llama-server aliases too)."""
        body = self.request("GET", "/models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._err(MalformedResponse, f"/models has no data list: {str(body)[:200]}")
        ids: list[str] = []
        for m in data:
            if isinstance(m, dict) and isinstance(m.get("id"), str):
                ids.append(m["id"])
                ids += [a for a in m.get("aliases") or [] if isinstance(a, str)]
        return list(dict.fromkeys(ids))

    def served_id(self, ids: Sequence[str]) -> str | None:
        """The id among ``ids`` (as ``/models`` lists them) that names the configured model.

        The exact id first; on Lemonade, else the one that is the same model by
        :func:`canonical_model_id` (``user.X`` configured, ``X`` listed, or the reverse).
        """
        model = self.endpoint.model
        if model in ids:
            return model
        if self.endpoint.backend == "lemonade":
            same = [i for i in ids if canonical_model_id(i) == canonical_model_id(model)]
            if same:
                return same[0]
        return None

    def ensure_model(self) -> None:
        """Fail with :class:`ModelNotFound` unless the configured model is served."""
        if self._model_checked:
            return
        ids = self.model_ids()
        served = self.served_id(ids)
        if served is None:
            raise self._err(ModelNotFound, f"not among the served models {ids}; run "
                            f"`{self.endpoint.how_to_get_model}` or configure one of those")
        self.served_model = served
        self._model_checked = True

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer (Lemonade lists ``all_models_loaded``)."""
        body = self.request("GET", "/health")  # llama-server also answers /v1/health
        if not isinstance(body, dict):
            raise self._err(MalformedResponse, f"/health answered {str(body)[:200]}")
        return body


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
