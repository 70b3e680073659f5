"""Executing the shipped notebooks: where they are, and one papermill call for all of them.

The notebooks live at the repository's top level (``notebooks/``) and a wheel installs them
as ``skillsynth/notebooks/`` (``pyproject.toml`` maps the one onto the other).

Sweep points, the report and the tests run notebooks the same way: a fresh ``python3``
kernel over IPC sockets (no TCP ports to race the model servers' ports for, and no
per-kernel "running over TCP without encryption" warning), and a per-cell time limit so a
kernel that stops answering fails the run with papermill's timeout message instead of
hanging it.
"""

from __future__ import annotations

import math
import os
import tempfile
import uuid
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from ...errors import EvaluationError

__all__ = ["IPCKernelManager", "execute_notebook", "find_notebook", "notebooks_folder"]


class IPCKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels listen on IPC sockets of their own.

    Each kernel gets a unique socket prefix in the temporary folder: jupyter_client's
    default prefix is relative to the current folder, so kernels started at once by one
    process (parallel sweep workers) would bind the same sockets.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("ip", os.path.join(tempfile.gettempdir(),
                                             f"skillsynth-kernel-{uuid.uuid4().hex[:12]}"))
        super().__init__(**kwargs)


def notebooks_folder(package: str | Path | None = None) -> Path:
    """The folder of skillsynth's notebooks: a source checkout's or the installed package's.

    A checkout (an editable install, or the package on ``PYTHONPATH``) keeps them at its top
    level, ``notebooks/`` beside ``pyproject.toml``, where JupyterLab opens them; a wheel
    carries the same files as package data, ``skillsynth/notebooks/``. Where ``skillsynth``
    was imported from decides which one, so a stray copy in the other place is never run.

    Args:
        package: the ``skillsynth`` package folder to look from (default: the imported one).

    Raises:
        EvaluationError: the chosen folder is missing (the message names both places).
    """
    package = Path(str(resources.files("skillsynth")) if package is None else package)
    checkout = package.parent / "notebooks"
    installed = package / "notebooks"
    folder = checkout if (package.parent / "pyproject.toml").is_file() else installed
    if not folder.is_dir():
        raise EvaluationError(f"skillsynth's notebooks are in neither place: {checkout} (a "
                              f"source checkout) nor {installed} (an installed wheel); "
                              "restore notebooks/ in the checkout or reinstall skillsynth")
    return folder


def find_notebook(name: str) -> Path:
    """A notebook shipped with skillsynth, from :func:`notebooks_folder`.

    A checkout, an editable install and an installed wheel run the same file.

    Raises:
        EvaluationError: there is no such notebook (the message lists the shipped ones).
    """
    folder = notebooks_folder()
    path = folder / name
    if not path.is_file():
        shipped = sorted(x.name for x in folder.iterdir() if x.name.endswith(".ipynb"))
        raise EvaluationError(f"no notebook {name!r} ships with skillsynth ({folder}); "
                              f"shipped: {', '.join(shipped)}")
    return path


def execute_notebook(notebook: str | Path, out: str | Path, parameters: Mapping[str, Any], *,
                     cwd: str | Path | None = None, timeout_s: float | None = None) -> None:
    """Run ``notebook`` with ``parameters`` under papermill and write the executed copy to ``out``.

    Args:
        timeout_s: the longest one cell may run (rounded up to whole seconds; ``None``: no
            limit). Past it papermill raises its cell-timeout error and the kernel is stopped.

    Raises:
        papermill.PapermillExecutionError: a cell raised (it carries the kernel's exception).
    """
    import papermill

    papermill.execute_notebook(
        str(notebook), str(out), parameters=dict(parameters), progress_bar=False,
        kernel_name="python3", cwd=None if cwd is None else str(cwd),
        kernel_manager_class=f"{__name__}.IPCKernelManager",
        execution_timeout=None if timeout_s is None else max(1, math.ceil(timeout_s)))
