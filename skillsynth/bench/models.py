"""Model server throughput: tokens/s, embeddings/s, cached-call latency."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ..models.cache import CallCache
from ..models.chat import ChatClient
from ..models.embed import Embedder
from ..models.serve import LocalServers

__all__ = ['bench_models']


_GOALS = [f"{verb} the {obj} for {who}" for verb in ("Summarise", "Find", "Draft a reply to",
                                                       "Index", "Search")
          for obj in ("quarterly report", "invoice", "inbox thread", "design doc")
          for who in ("Alice", "the team", "finance", "me")]


def bench_models(servers: LocalServers, *, repeats: int = 5, max_tokens: int = 128
                 ) -> dict[str, Any]:
    """Generated tokens/s, embeddings/s for short goals, cached-call latency (medians).

    Each figure is the median over ``repeats`` runs, reported with n.
    """
    if servers.chat is None or servers.embed is None:
        raise ValueError("bench_models needs both the chat and the embedding server")
    out: dict[str, Any] = {"repeats": repeats}
    with ChatClient(servers.chat) as chat:
        chat.chat([{"role": "user", "content": "warm up"}], max_tokens=4)
        rates = []
        for i in range(repeats):
            t0 = time.perf_counter()
            r = chat.chat([{"role": "user", "content": f"Write a short story about tool "
                            f"number {i}."}], max_tokens=max_tokens, temperature=0.7, seed=i)
            rates.append(r.completion_tokens / (time.perf_counter() - t0))
        out["chat_tokens_per_s"] = {"median": statistics.median(rates), "n": repeats,
                                    "model": servers.chat.model, "max_tokens": max_tokens}
        rates = []
        for i in range(repeats):  # a ~600-token prompt, one generated token: prompt speed
            # each prompt differs from its first token, so the server's prompt cache
            # (longest common prefix) cannot skip any of it
            text = f"Batch {i * 7919}. " + " ".join(_GOALS[i % 5:] + _GOALS[:i % 5]) * 2 + \
                " Summarise these requests in one word."
            t0 = time.perf_counter()
            r = chat.chat([{"role": "user", "content": text}], max_tokens=1)
            rates.append(int(r.usage.get("prompt_tokens") or 0) / (time.perf_counter() - t0))
        out["prompt_tokens_per_s"] = {"median": statistics.median(rates), "n": repeats,
                                      "model": servers.chat.model}
    with Embedder(servers.embed) as emb:
        emb.embed(["warm up"])
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            emb.embed(_GOALS)
            rates.append(len(_GOALS) / (time.perf_counter() - t0))
        out["embeddings_per_s"] = {"median": statistics.median(rates), "n": repeats,
                                   "batch": len(_GOALS), "model": servers.embed.model}
    with tempfile.TemporaryDirectory() as tmp, CallCache(Path(tmp) / "cache.db") as cache, \
            ChatClient(servers.chat, cache=cache) as chat:
        msgs = [{"role": "user", "content": "Name one fruit."}]
        chat.chat(msgs, max_tokens=16)
        lat = []
        for _ in range(max(repeats, 20)):
            t0 = time.perf_counter()
            assert chat.chat(msgs, max_tokens=16).cached
            lat.append((time.perf_counter() - t0) * 1000)
        out["cached_call_ms"] = {"median": statistics.median(lat), "n": len(lat)}
    return out
