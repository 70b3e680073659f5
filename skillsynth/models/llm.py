"""The one OpenAI-compatible model client: Lemonade in production, the embedded servers here.

Backends are configuration (an :class:`Endpoint`), never a guess: skillsynth does not
fall back from one server or model to another. Every failure is typed:

* unreachable, timed out, or 5xx after ``max_retries`` retries -> :class:`LLMUnavailable`;
* the configured model is not served -> :class:`ModelNotFound`, with the command that
  pulls (Lemonade) or prepares (local) it;
* HTTP 401/403 -> :class:`KeyRejected` (the server is up; the key is wrong or missing);
* one input over the server's token batch -> :class:`InputTooLarge` (not retried);
* a request over the server's context window -> :class:`ContextExceeded` (not retried);
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

import logging
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ..errors import (
    ContextExceeded,
    InputTooLarge,
    KeyRejected,
    LLMError,
    LLMUnavailable,
    MalformedResponse,
    ModelNotFound,
)
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
_OVER_CONTEXT = re.compile(r"request \((\d+) tokens\) exceeds the available context size"
                           r"(?: \((\d+) tokens\))?")
#: The refusals llama-server words with both numbers: (its words, the error, what it refused,
#: how the limit is said, what to do).
_REFUSALS: tuple[tuple[re.Pattern[str], type[InputTooLarge | ContextExceeded], str, str,
                       str], ...] = (
    (_OVER_CONTEXT, ContextExceeded, "a request", "its context holds",
     "shorten the conversation, or serve the model with a larger context"),
    (_TOO_LARGE, InputTooLarge, "an input", "it takes at most",
     "shorten the input, or load the model with a larger batch (--ubatch-size)"))

__all__ = [
    "LEMONADE_BASE_URL",
    "LEMONADE_CHAT_MODEL",
    "LEMONADE_EMBED_MODEL",
    "Backend",
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
        """An input over the server's token batch, or a request over its context: a typed
        error, never a retry."""
        e = self.endpoint
        for pattern, cls, what, holds, fix in _REFUSALS:
            if (found := pattern.search(resp.text)) is not None:
                n, cap = found.group(1), found.group(2)
                raise cls(f"{e.backend} at {e.base_url} (model {e.model}): {path} refused "
                          f"{what} of {n} tokens" + (f" ({holds} {cap})" if cap else "") +
                          f"; {fix}", base_url=e.base_url, model=e.model, tokens=int(n),
                          limit=int(cap) if cap else None)

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
