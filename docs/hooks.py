"""MkDocs hook: the pages that live beside what they describe join the site unchanged.

METHODS.md (the repository's methods), eval/sweeps/README.md (beside the specs) and
datasets/README.md (beside the data) stay where a reader of the repository looks for them;
the site shows them as methods.md, sweeps.md and datasets.md. Links from them to files
outside the site become plain code, so ``mkdocs build --strict`` holds.

figures.md ("Measured figures") is rendered from the measurement records in eval/figures/
(written by ``skillsynth bench ... --record eval/figures``), so a new measurement is a new
record, never an edit of a page.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"methods.md": "METHODS.md", "sweeps.md": "eval/sweeps/README.md",
         "datasets.md": "datasets/README.md"}
_SITE = {"METHODS.md": "methods.md", "README.md": "index.md"}
FIGURES = "eval/figures"
_FIGURES_INTRO = (
    "Every figure below is read from a measurement record in `eval/figures/`, written by the "
    "benchmark that measured it (`skillsynth bench ... --record eval/figures`): its command, "
    "date, skillsynth version and machine, and each figure with its n. A new measurement "
    "replaces its record; nothing here is edited by hand. How to add one: "
    "[Contributing](contributing.md#adding-a-measurement).")


def _localise(text: str, source: str) -> str:
    def link(m: re.Match[str]) -> str:
        label, target = m.group(1), m.group(2)
        if target.startswith(("http://", "https://", "#")):
            return m.group(0)
        name = Path(target).name
        if target in _SITE:
            return f"[{label}]({_SITE[target]})"
        if (ROOT / Path(source).parent / target).resolve() == (ROOT / "eval/sweeps/README.md"):
            return f"[{label}](sweeps.md)"
        return f"{label} (`{name if label == name else target}`)"

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", link, text)


def figures_page() -> str:
    """The Measured figures page, from this checkout's records and code."""
    if str(ROOT) not in sys.path:  # the checkout's skillsynth, not another installed one
        sys.path.insert(0, str(ROOT))
    figures = importlib.import_module("skillsynth.figures")
    return str(figures.render(ROOT / FIGURES, intro=_FIGURES_INTRO))


def on_files(files: Files, config: Any) -> Files:
    for page, source in PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=_localise(text, source)))
    files.append(File.generated(config, "figures.md", content=figures_page()))
    return files
