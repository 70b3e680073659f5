"""Which backends and models are reachable (``skillsynth models status``), and whether the
models home's manifest still names files that exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import KeyRejected, LLMUnavailable, ModelNotFound, SkillsynthError
from .llm import Endpoint, ModelConnection
from .serve import LocalServers, locate_models, models_home, serve_local

__all__ = ["manifest_missing", "models_status"]


def _probe(endpoint: Endpoint) -> dict[str, Any]:
    """What ``/models`` says: reachable (a server answered, a 401/403 included, which is
    ``key_rejected``), the ids it lists, and whether the endpoint's model is among them."""
    conn = ModelConnection(endpoint.with_(max_retries=0, timeout_s=5.0, connect_timeout_s=2.0))
    try:
        ids = conn.model_ids()
        return {"reachable": True, "base_url": endpoint.base_url, "models": ids,
                "model": endpoint.model, "model_served": conn.served_id(ids) is not None}
    except KeyRejected as exc:
        return {"reachable": True, "key_rejected": True, "base_url": endpoint.base_url,
                "model": endpoint.model, "error": str(exc)}
    except SkillsynthError as exc:
        return {"reachable": False, "base_url": endpoint.base_url, "model": endpoint.model,
                "error": str(exc)}
    finally:
        conn.close()


def _probe_servers(running: LocalServers) -> dict[str, Any]:
    return {role: _probe(ep) for role, ep in (("chat", running.chat), ("embed", running.embed))
            if ep}


def manifest_missing(home: str | Path | None = None) -> list[str]:
    """The files the models home's manifest (``models.json``) names that do not exist.

    Each entry reads ``key: path``; an empty list when the manifest is whole or absent (an
    unprepared home is reported by :func:`locate_models`). A manifest written before the
    server binary lived in the models home names a virtual environment's copy, which goes
    when that environment is deleted: this is how ``models status`` finds it.
    """
    manifest = (Path(home) if home else models_home()) / "models.json"
    try:
        data = json.loads(manifest.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        return [f"{manifest}: unreadable ({exc})"]
    named = {k: data.get(k) for k in ("llama_server", "chat_model", "embed_model")}
    named |= {f"chat_models.{k}": v for k, v in (data.get("chat_models") or {}).items()}
    return [f"{key}: {path}" for key, path in named.items()
            if isinstance(path, str) and path and not Path(path).is_file()]


def models_status(*, lemonade: Endpoint | None = None, home: str | Path | None = None,
                  running: LocalServers | None = None, start_local: bool = True,
                  chat: str | None = None) -> dict[str, Any]:
    """Which backends and models are reachable, with their ids (``skillsynth models status``).

    Args:
        lemonade: the Lemonade endpoint to probe (default :meth:`Endpoint.lemonade`).
        home: the models home.
        running: embedded servers already started; probed over HTTP.
        start_local: with no ``running`` servers, start the prepared ones briefly and probe
            them, so "reachable" means a real answer, not files on disk.
        chat: the embedded chat model to check (default the default model).
    """
    out: dict[str, Any] = {"lemonade": _probe(lemonade or Endpoint.lemonade())}
    missing = manifest_missing(home)
    try:
        prepared = locate_models(home, chat=chat)
        local: dict[str, Any] = {"prepared": True, **prepared.describe(),
                                 "manifest_missing": missing}
    except ModelNotFound as exc:
        out["local"] = {"prepared": False, "error": str(exc), "manifest_missing": missing}
        return out
    if running is not None:
        local["servers"] = _probe_servers(running)
    elif start_local:
        try:
            with serve_local(prepared) as started:
                local["servers"] = _probe_servers(started)
        except LLMUnavailable as exc:
            local["servers"] = {"error": str(exc)}
    out["local"] = local
    return out
