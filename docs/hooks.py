"""MkDocs hook: the pages that live beside what they describe join the site unchanged.

METHODS.md (the repository's methods), eval/sweeps/README.md (beside the specs) and
datasets/README.md (beside the data) stay where a reader of the repository looks for them;
the site shows them as methods.md, sweeps.md and datasets.md. Links from them to files
outside the site become plain code, so ``mkdocs build --strict`` holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"methods.md": "METHODS.md", "sweeps.md": "eval/sweeps/README.md",
         "datasets.md": "datasets/README.md"}
_SITE = {"METHODS.md": "methods.md", "README.md": "index.md"}


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


def on_files(files: Files, config: Any) -> Files:
    for page, source in PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=_localise(text, source)))
    return files
