"""A sweep's run folder at an fsspec URL (``s3://bucket/runs``, ``gs://...``, ``file://...``).

A point writes SQLite files, which need a POSIX filesystem, so points never write the URL
themselves: the sweep runs in a local mirror of ``<url>/<name>/`` on the submitting
machine, and only the submitting process writes the URL. Before the sweep the mirror
receives what the URL already holds (the spec, the corpus, the goal similarities and every
finished point), so a sweep resumes from the URL on another machine; each point is uploaded
as soon as it finishes (its ``summary.json`` last: a point at the URL with a summary is
complete even on stores without atomic renames); the aggregate files go at the end.
``skillsynth report`` and ``gate`` read the local mirror.

With a remote Dask cluster the points travel through the scheduler (the ``shipped``
transport): workers need neither the URL nor a shared folder.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError, EvaluationError
from ..point.run import SUMMARY

__all__ = ["ResultsURL", "default_mirror", "is_url", "open_results_url"]

#: The run folder's top-level entries that travel (points go one by one).
_TOP = ("spec.yaml", "similarity.json", "corpus", "results.jsonl", "summary.json")


def is_url(root: str | Path) -> bool:
    """True for ``scheme://...`` (any fsspec protocol); a plain path is not a URL."""
    return isinstance(root, str) and "://" in root


def default_mirror(url: str) -> Path:
    """Where a URL's run folders are mirrored by default: under the models home, by URL."""
    from ...models.serve import default_cache_path

    digest = hashlib.sha256(url.rstrip("/").encode("utf-8")).hexdigest()[:16]
    return default_cache_path().parent / "results-mirror" / digest


@dataclass(frozen=True)
class ResultsURL:
    """``<url>/<name>/`` (``path`` on the filesystem ``fs``) and its mirror ``local``."""

    url: str
    path: str
    local: Path
    fs: Any

    def _remote(self, *parts: str) -> str:
        return "/".join([self.path.rstrip("/"), *parts])

    def _put(self, local: Path, dest: str) -> None:
        self.fs.makedirs(dest.rsplit("/", 1)[0], exist_ok=True)
        self.fs.put_file(str(local), dest)

    def pull(self) -> int:
        """Copy what the URL holds into the mirror; the finished points copied."""
        if not self.fs.exists(self.path):
            return 0
        self.local.mkdir(parents=True, exist_ok=True)
        for name in ("spec.yaml", "similarity.json"):  # the URL's, over a kept mirror's
            if self.fs.exists(self._remote(name)):
                self.fs.get_file(self._remote(name), str(self.local / name))
        corpus = self._remote("corpus")
        if self.fs.exists(f"{corpus}/BUILT") and not (self.local / "corpus" / "BUILT").exists():
            self.fs.get(corpus.rstrip("/") + "/", str(self.local / "corpus") + "/",
                        recursive=True)
        pulled = 0
        points = self._remote("points")
        if self.fs.exists(points):
            for remote in sorted(self.fs.ls(points, detail=False)):
                pid = remote.rstrip("/").rsplit("/", 1)[-1]
                target = self.local / "points" / pid
                if (target / SUMMARY).exists() or not self.fs.exists(f"{remote}/{SUMMARY}"):
                    continue  # already here, or never finished at the URL
                target.mkdir(parents=True, exist_ok=True)
                self.fs.get(remote.rstrip("/") + "/", str(target) + "/", recursive=True)
                pulled += 1
        return pulled

    def push_point(self, point_id: str) -> None:
        """Upload one finished point (its summary last)."""
        folder = self.local / "points" / point_id
        if not (folder / SUMMARY).exists():
            return
        remote = self._remote("points", point_id)
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        for f in [*(p for p in files if p.name != SUMMARY or p.parent != folder),
                  folder / SUMMARY]:
            self._put(f, f"{remote}/{f.relative_to(folder).as_posix()}")

    def push_run(self) -> None:
        """Upload the run folder's top-level files (spec, corpus, similarities, aggregate),
        and any finished point of the mirror the URL lacks (a mirror kept from before)."""
        self.fs.makedirs(self.path, exist_ok=True)
        for summary in sorted((self.local / "points").glob(f"*/{SUMMARY}")):
            if not self.fs.exists(self._remote("points", summary.parent.name, SUMMARY)):
                self.push_point(summary.parent.name)
        for name in _TOP:
            path = self.local / name
            if path.is_dir():
                # the corpus's BUILT marker last: a corpus at the URL with it is whole
                for f in sorted((p for p in path.rglob("*") if p.is_file()),
                                key=lambda p: (p.name == "BUILT", p.as_posix())):
                    self._put(f, self._remote(name, f.relative_to(path).as_posix()))
            elif path.exists():
                self._put(path, self._remote(name))


def open_results_url(url: str, name: str, mirror: str | Path | None = None) -> ResultsURL:
    """The run folder ``<url>/<name>/`` and its mirror; the URL's filesystem is reached here.

    Raises:
        ConfigError: no fsspec filesystem for the URL's scheme (the message names the
            package to install where fsspec knows it).
        EvaluationError: the filesystem cannot be reached or listed.
    """
    import fsspec

    try:
        fs, _ = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"results URL {url}: {exc}", key="results") from exc
    base = url.rstrip("/") + "/" + name
    out = ResultsURL(url=base, path=fs._strip_protocol(base),
                     local=Path(mirror or default_mirror(url)).resolve() / name, fs=fs)
    try:
        fs.exists(out.path)
    except Exception as exc:  # any backend's reachability error
        raise EvaluationError(f"cannot reach the results URL {base}: {type(exc).__name__}: "
                              f"{exc}") from exc
    return out
