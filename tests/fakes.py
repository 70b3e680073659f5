"""FAKES for unit tests only: a scripted HTTP server on a real loopback socket, and
family-aware fake embedder and distiller for the evaluation protocol.

It stands in for Lemonade (which cannot run here) and for broken servers. Responses are
either scripted per test or RECORDED from Lemonade's documented API shapes (see
``LEMONADE_RECORDED``); it counts every request it receives.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np

# Recorded Lemonade Server responses (shapes as Lemonade documents and returns them).
LEMONADE_RECORDED: dict[str, Any] = {
    "health": {"status": "ok", "checkpoint_loaded": "unsloth/gemma-4-E4B-it-GGUF:Q4_K_M",
               "model_loaded": "Gemma-4-E4B-it-GGUF",
               "all_models_loaded": [
                   {"model_name": "Gemma-4-E4B-it-GGUF", "type": "llm", "device": "gpu",
                    "recipe": "llamacpp", "backend_url": "http://127.0.0.1:8001/v1"},
                   {"model_name": "user.embeddinggemma-300m-GGUF", "type": "embedding",
                    "device": "gpu", "recipe": "llamacpp",
                    "backend_url": "http://127.0.0.1:8002/v1"}]},
    "models": {"object": "list", "data": [
        {"id": "Gemma-4-E4B-it-GGUF", "object": "model", "created": 1744173590,
         "owned_by": "lemonade", "checkpoint": "unsloth/gemma-4-E4B-it-GGUF:Q4_K_M",
         "recipe": "llamacpp", "labels": ["vision", "tool-calling"]},
        {"id": "user.embeddinggemma-300m-GGUF", "object": "model", "created": 1744173590,
         "owned_by": "lemonade", "checkpoint": "unsloth/embeddinggemma-300m-GGUF:Q8_0",
         "recipe": "llamacpp", "labels": ["embeddings"]}]},
    "model_not_found": {"error": {"message": "Model 'Gemma-9' not found. Use /pull to "
                                  "download it.", "type": "not_found",
                                  "code": "model_not_found"}},
    "model_load_error": {"error": {"message": "llama-server failed to start: out of memory",
                                   "type": "server_error", "code": "model_load_error"}},
    "chat": {"id": "chatcmpl-1", "object": "chat.completion", "created": 1744173600,
             "model": "Gemma-4-E4B-it-GGUF",
             "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": "Hello."}}],
             "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}},
}


class FakeServer:
    """A scripted HTTP server: ``routes[(method, path)] = (status, body)`` or a list of them
    (served in turn, the last one repeating). ``requests`` records (method, path, json)."""

    def __init__(self, routes: dict[tuple[str, str], Any]):
        self.routes = routes
        self.requests: list[tuple[str, str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                outer.requests.append((method, self.path, json.loads(raw) if raw else None))
                outer.headers_seen = dict(self.headers)
                spec = outer.routes.get((method, self.path), (404, {"error": "no route"}))
                if isinstance(spec, list):
                    spec = spec.pop(0) if len(spec) > 1 else spec[0]
                status, body = spec
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.headers_seen: dict[str, str] = {}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# --------------------------------------------------------------------------- pipeline fakes
#: Keyword rules of the FAKE family embedder, checked in order (first match wins).
_FAMILY_WORDS = (
    ("compare", r"report.*(compare|changed|diff|differ)|(compare|changed|diff|differ).*report"),
    ("summary", r"report"),
    ("invoice", r"invoice"),
    ("mail", r"e?mail|write back|message"),
    ("jira", r"ticket|jira|bug"),
    ("tests", r"test"),
    ("notes", r"note"),
    ("index", r"index|folder|ingest|searchable|knowledge"),
)


class FakeFamilyEmbedder:
    """FAKE embedder: one direction per synthetic family keyword, plus a small hash jitter.

    Texts of the same synthetic family embed at cosine ~0.99, other families at ~0.
    """

    embedder_id = "fake-family:10"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts, *, kind="document", progress=False):
        self.calls += 1
        out = []
        for t in texts:
            v = np.zeros(len(_FAMILY_WORDS) + 2, dtype=np.float32)
            low = t.lower()
            hit = next((i for i, (_, rx) in enumerate(_FAMILY_WORDS) if re.search(rx, low)),
                       len(_FAMILY_WORDS))
            v[hit] = 1.0
            v[-1] = int(hashlib.sha256(t.encode()).hexdigest()[:4], 16) / 65535 * 0.1
            out.append(v / np.linalg.norm(v))
        return np.vstack(out)


class FakeBlurEmbedder(FakeFamilyEmbedder):
    """FAKE embedder: the family embedder's vectors plus a direction every text shares, so
    texts of different families sit at cosine ~``shared**2 / (1 + shared**2)`` (0.5 by
    default) and a low enough tau merges every family into one cluster."""

    embedder_id = "fake-blur:11"

    def __init__(self, shared: float = 1.0) -> None:
        super().__init__()
        self.shared = shared

    def embed(self, texts, *, kind="document", progress=False):
        base = super().embed(texts, kind=kind, progress=progress)
        out = np.hstack([base, np.full((len(base), 1), self.shared, dtype=np.float32)])
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@dataclass
class FakeAnswer:
    content: str
    cached: bool = False
    tool_calls: tuple = ()
    usage: dict = field(default_factory=dict)


class FakeChatModel:
    """What every FAKE chat client shares with skillsynth.protocols.ChatModel: counters and a
    readiness probe that always passes (the real one is tested against real servers)."""

    calls = 0
    cache_hits = 0
    model_id = "fake-chat"

    def ensure_ready(self) -> None:
        pass


class FakeDistiller(FakeChatModel):
    """FAKE chat client for json-mode distillation: echoes the cluster's goal and tools.

    Like a ChatClient with a call cache, ``cached`` answers only what ``chat`` answered.
    Its steps name the tools sorted by name; ``ordered``: in the representative run's order.
    """

    def __init__(self, ordered: bool = False) -> None:
        self.calls = 0
        self.ordered = ordered
        self._seen: set[str] = set()

    def cached(self, messages, **kw):
        key = json.dumps(messages, sort_keys=True)
        return self._answer(messages, cached=True) if key in self._seen else None

    def chat(self, messages, **kw):
        self.calls += 1
        self._seen.add(json.dumps(messages, sort_keys=True))
        return self._answer(messages)

    def _answer(self, messages, cached=False):
        user = messages[-1]["content"]
        goal = re.search(r"representative run: (.*)", user).group(1).strip()
        tools = re.search(r"Tools available to name: (.*)\.", user).group(1).split(", ")
        if self.ordered:
            run = re.search(r"in order:\n((?:\d+\. .*\n?)+)", user).group(1)
            tools = list(dict.fromkeys(x.split(". ", 1)[1] for x in run.strip().splitlines()))
        words = re.findall(r"[a-z0-9]+", goal.lower())[:4]
        return FakeAnswer(json.dumps({
            "name": "-".join(words) or "procedure",
            "when_to_use": f"The user wants this: {goal}",
            "tools_required": tools, "steps": [f"Call {t}" for t in tools],
            "edge_cases": ["If a call fails, retry it once"], "skip": False}), cached)


class FakeGaiaDistiller(FakeChatModel):
    """FAKE chat client answering GAIA's own distillation prompt (amd-gaia's YAML shape).

    Reads the recurring goal and the numbered tool sequence from GAIA's user message and
    answers SKILL frontmatter (name, when_to_use, tools_required) and a body with an
    ``## Edge cases`` section. A goal containing a word of ``skip`` gets ``SKIP``, one of
    ``garble`` a document without frontmatter. Records every request.
    """

    def __init__(self, skip=(), garble=()) -> None:
        self.calls = 0
        self.skip, self.garble = tuple(skip), tuple(garble)
        self.requests: list[tuple[list, dict]] = []

    def chat(self, messages, **kw):
        self.calls += 1
        self.requests.append((list(messages), kw))
        user = messages[-1]["content"]
        goal = re.search(r"Recurring user goal:\n(.*)\n", user).group(1).strip()
        seq = re.search(r"most complete run\):\n((?:\d+\. .*\n?)+)", user).group(1)
        tools = [line.split(". ", 1)[1] for line in seq.strip().splitlines()]
        if any(w in goal for w in self.skip):
            return FakeAnswer("SKIP")
        if any(w in goal for w in self.garble):
            return FakeAnswer("Here is a procedure: do the thing.")
        name = "-".join(re.findall(r"[a-z0-9]+", goal.lower())[:4]) or "procedure"
        steps = "\n".join(f"{i}. Call {t}" for i, t in enumerate(tools, 1))
        return FakeAnswer(f"---\nname: {name}\nwhen_to_use: The user asks to {goal}\n"
                          f"tools_required: [{', '.join(tools)}]\n---\n\n# {goal}\n\n"
                          f"{steps}\n\n## Edge cases\n- If a call fails, retry it once\n")


class FakeBrokenChat(FakeChatModel):
    """FAKE chat client whose server is down: every request raises LLMUnavailable."""

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **kw):
        from skillsynth.errors import LLMUnavailable

        raise LLMUnavailable("FAKE: the chat server is down")


class FakeToolAgent(FakeChatModel):
    """FAKE function-calling chat client: follows an injected procedure, else explores.

    With a ``RECALLED PROCEDURES`` block in the system prompt it calls the block's tools in
    order with ``args`` and then answers; without one it first calls ``explore`` (a tool the
    environment has no recording for), then the same tools. Records every request.
    """

    def __init__(self, tools: list[str], args: dict[str, str]):
        self.tools, self.args = tools, args
        self.calls = 0
        self.requests: list[tuple[list, list]] = []

    def chat(self, messages, *, tools=None, **kw):
        self.calls += 1
        self.requests.append((messages, tools))
        guided = "RECALLED PROCEDURES" in messages[0]["content"]
        plan = self.tools if guided else ["explore", *self.tools]
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= len(plan):
            return FakeAgentAnswer("done", ())
        name = plan[done]
        return FakeAgentAnswer(None, ({"id": f"c{done}", "type": "function", "function": {
            "name": name, "arguments": self.args.get(name, "{}")}},))


@dataclass
class FakeAgentAnswer:
    content: str | None
    tool_calls: tuple
    cached: bool = False
    usage: dict = None  # type: ignore[assignment]

    def __post_init__(self):
        self.usage = {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10}


class FakeScriptedAgent(FakeChatModel):
    """FAKE function-calling chat client that plays a fixed script of calls, then answers.

    ``plan`` is a list of ``(tool, arguments)``; with a ``RECALLED PROCEDURES`` block in the
    system prompt it plays ``guided`` instead (when given). Records every request.
    """

    def __init__(self, plan, final="Done.", guided=None):
        self.plan, self.final, self.guided = list(plan), final, guided
        self.calls = 0
        self.requests: list[tuple[list, list]] = []

    def chat(self, messages, *, tools=None, **kw):
        self.calls += 1
        self.requests.append((list(messages), tools))  # a copy: the loop appends to it
        plan = self.guided if self.guided is not None and \
            "RECALLED PROCEDURES" in messages[0]["content"] else self.plan
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= len(plan):
            return FakeAgentAnswer(self.final, ())
        name, args = plan[done]
        return FakeAgentAnswer(None, ({"id": f"c{done}", "type": "function", "function": {
            "name": name, "arguments": json.dumps(args)}},))


class FakeProcedureFollower(FakeChatModel):
    """FAKE function-calling chat client that follows a recalled procedure's numbered steps.

    With a ``RECALLED PROCEDURES`` block in the system prompt it calls each step's tool in
    order (``N. Call <tool>[ with {json}]: ...``) with the step's arguments, or
    ``{"guess": "?"}`` where the step has none; without one it calls ``explore`` once.
    Then it answers. Records every request.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.requests: list[tuple[list, list]] = []

    def chat(self, messages, *, tools=None, **kw):
        self.calls += 1
        self.requests.append((list(messages), tools))
        system = messages[0]["content"]
        plan = [(m.group(1), m.group(2) or json.dumps({"guess": "?"}))
                for m in re.finditer(r"^\d+\. Call ([^\s:]+)(?: with (\{.*\}))?: ", system,
                                     re.MULTILINE)] \
            if "RECALLED PROCEDURES" in system else [("explore", "{}")]
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= len(plan):
            return FakeAgentAnswer("Done.", ())
        name, args = plan[done]
        return FakeAgentAnswer(None, ({"id": f"c{done}", "type": "function", "function": {
            "name": name, "arguments": args}},))


# --------------------------------------------------------------------------- broken servers
_MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()


def _http(status: int, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: "
            f"{len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def _chat(content: str | None) -> bytes:
    return json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": content}}], "usage": {}}).encode()


class BadServer:
    """FAKE model server: raw-socket HTTP on loopback, ``/models`` fine, the chat endpoint
    misbehaving as told (``fault``) down to the byte, as a broken server would."""

    def __init__(self, fault: str):
        self.fault, self.stop = fault, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> Self:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)
        self.sock.close()

    def _spawn(self, fn: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        self.threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                           if h.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            if head.startswith(b"GET"):
                conn.sendall(_http(200, _MODELS))
                return
            try:
                self._misbehave(conn)
            except OSError:  # the client gave up: what a deadline is for
                pass

    def _misbehave(self, conn: socket.socket) -> None:
        f = self.fault
        if f == "http-500":
            conn.sendall(_http(500, b'{"error": "internal"}'))
        elif f == "over-context":  # llama-server's words for a conversation over its window
            conn.sendall(_http(400, b'{"error": {"code": 400, "type": "exceed_context_size_'
                               b'error", "message": "request (9055 tokens) exceeds the '
                               b'available context size (8192 tokens), try increasing it"}}'))
        elif f == "hang":
            self.stop.wait()
        elif f == "trickle":  # the whole answer, status line included, a byte a second
            for b in _http(200, _chat("SKIP")):
                conn.sendall(bytes([b]))
                if self.stop.wait(1.0):
                    return
        elif f == "closed":
            conn.shutdown(socket.SHUT_RDWR)
        elif f == "not-json":
            conn.sendall(_http(200, b'{"choices": [{"message": '))
        elif f == "empty-body":
            conn.sendall(_http(200, b""))
        elif f == "no-choices":
            conn.sendall(_http(200, b"{}"))
        elif f == "empty-answer":
            conn.sendall(_http(200, _chat("")))
        elif f == "null-answer":
            conn.sendall(_http(200, _chat(None)))


class FakeModelServer:
    """FAKE OpenAI-compatible model server for a whole sweep (its kernels reach it over
    loopback): ``/models`` lists ``chat`` and ``embed``; ``/embeddings`` answers with
    :class:`FakeFamilyEmbedder`'s vectors; ``/chat/completions`` stalls while ``stalled`` is
    set (an outage), else answers as :class:`FakeDistiller` in json mode."""

    def __init__(self, *, stalled: bool = False):
        self.stalled = threading.Event()
        if stalled:
            self.stalled.set()
        self.chat_requests = 0
        outer, embedder, distiller = self, FakeFamilyEmbedder(), FakeDistiller()

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "chat"}, {"id": "embed"}]})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = json.loads(raw)
                if self.path.endswith("/embeddings"):
                    vecs = embedder.embed(list(req["input"]))
                    self._send({"data": [{"index": i, "embedding": v.tolist()}
                                         for i, v in enumerate(vecs)]})
                    return
                outer.chat_requests += 1
                if outer.stalled.is_set():
                    outer._stop.wait()  # never answers while the test runs
                    return
                answer = distiller._answer(req["messages"]).content
                self._send({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": answer}}], "usage": {}})

            def log_message(self, *args: Any) -> None:
                pass

        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


class FakeWorldCalls:
    """FAKE world calls for running plans: each tool answers from a script (a result, or a
    function of the arguments); a tool in ``failing`` (or with no answer) fails; every call
    is recorded in ``calls``. It returns the live worlds' own ``CallOutcome``, so what a
    plan's executor accepts here a world episode's ``execute`` satisfies too."""

    def __init__(self, answers: dict[str, Any], failing: tuple[str, ...] = ()):
        self.answers, self.failing = answers, set(failing)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, arguments: dict[str, Any]) -> Any:
        from skillsynth.evaluation.live.worlds.base import CallOutcome

        self.calls.append((name, dict(arguments)))
        answer = self.answers.get(name)
        if callable(answer):
            answer = answer(arguments)
        if name in self.failing or answer is None:
            return CallOutcome(f"Error: {name} could not be done", False)
        return CallOutcome(answer if isinstance(answer, str) else json.dumps(answer), True)
