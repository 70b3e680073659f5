"""The model backends of Dask workers: each worker's own model servers (a plugin) and the
backend a worker resolves a submitted :class:`~skillsynth.models.backend.BackendSpec` to.

A leaf of :mod:`.dask_cluster` and :mod:`.shipping`, so both can reach a worker's backend
without importing each other.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from ...errors import EvaluationError
from ...models.backend import BackendSpec

__all__ = ["PLUGIN", "ModelServers", "on_worker", "register_model_servers", "worker_backend"]

#: The name the model-server plugin is registered under on every worker.
PLUGIN = "skillsynth-models"


class ModelServers(WorkerPlugin):  # type: ignore[misc]
    """A Dask worker plugin: the embedded models a worker started, stopped when it closes.

    Registered for a remote cluster whose spec's backend is ``local``; the first point on a
    worker starts them, later points reuse them.
    """

    name = PLUGIN

    # built in setup(), on the worker: the plugin object is pickled to get there
    _stack: contextlib.ExitStack
    _lock: threading.Lock
    _served: dict[tuple[Any, ...], BackendSpec]

    def setup(self, worker: Any) -> None:
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()
        self._served = {}

    def teardown(self, worker: Any) -> None:
        with self._lock:
            self._stack.close()
            self._served.clear()

    def backend_for(self, spec: BackendSpec) -> BackendSpec:
        """``spec`` with a ``local`` backend replaced by this worker's running servers."""
        if spec.backend != "local":
            return spec
        from ...models.serve import locate_models, serve_local

        key = (spec.chat_model, spec.embed_model, spec.timeout_s)
        with self._lock:
            if key not in self._served:
                servers = self._stack.enter_context(serve_local(
                    locate_models(chat=spec.chat_model), request_timeout_s=spec.timeout_s))
                assert servers.chat is not None and servers.embed is not None
                self._served[key] = BackendSpec(
                    "endpoints", chat_model=servers.chat.model, embed_model=servers.embed.model,
                    chat_url=servers.chat.base_url, embed_url=servers.embed.base_url,
                    cache=spec.cache, timeout_s=spec.timeout_s)
            return replace(self._served[key], cache=spec.cache)


def register_model_servers(client: Any, backend: BackendSpec) -> None:
    """Give every worker of a remote cluster its :class:`ModelServers` (a ``local`` backend)."""
    if backend.backend == "local":
        client.register_plugin(ModelServers(), name=PLUGIN)


def worker_backend(spec: BackendSpec) -> BackendSpec:
    """The backend as this worker resolves it (see :class:`ModelServers`)."""
    if spec.backend != "local":
        return spec
    from distributed import get_worker

    plugin = get_worker().plugins.get(PLUGIN)
    if not isinstance(plugin, ModelServers):
        raise EvaluationError("this Dask worker has no skillsynth model plugin; the sweep "
                              "registers it before submitting points")
    backend: BackendSpec = plugin.backend_for(spec)
    return backend


def on_worker(fn: Callable[..., Any], backend: BackendSpec, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, backend=..., **kwargs)`` with the backend as this worker resolves it
    (submitted as a task: the goal similarities, a live-history corpus)."""
    return fn(*args, backend=worker_backend(backend), **kwargs)
