"""Keyword recall (the Pheron peer, seed 003): word overlap instead of vector search.

A procedure's words are those of its name and when_to_use. The score of a procedure for a
goal is the share of the goal's content words it contains; ties go to the procedure with
more recorded successes (Pheron's usage-count boost). Any overlap is a match: Pheron has
no similarity threshold, which is exactly what the comparison measures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...pipeline.recall import Recall
from ...store import Procedure

__all__ = ["STOPWORDS", "KeywordIndex", "content_words"]

#: Words too common to mean anything for matching (English function words).
_STOPWORD_TEXT = """
a about after all also an and any are as at be been before but by can could did do does
for from get give had has have how i if in into is it its just last let me my need no not
of on or our out please so some than that the their them then there these they this to up
us was we what when where which who why will with would you your
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words of two or more letters or digits, without stopwords."""
    words = re.findall(r"[a-z0-9]{2,}", text.lower().replace("_", " ").replace("-", " "))
    return frozenset(w for w in words if w not in STOPWORDS)


class KeywordIndex:
    """The active procedures' word sets, searched by overlap with a goal."""

    def __init__(self, procedures: Sequence[Procedure]):
        self.procedures = [p for p in procedures if p.active]
        self._words = [content_words(f"{p.name} {p.when_to_use}") for p in self.procedures]

    def __len__(self) -> int:
        return len(self.procedures)

    def search(self, goal: str, *, top_k: int) -> list[Recall]:
        """The best ``top_k`` procedures sharing at least one content word, best first."""
        q = content_words(goal)
        if not q:
            return []
        scored = [(len(q & w) / len(q), p.success_count, i)
                  for i, (p, w) in enumerate(zip(self.procedures, self._words, strict=True))
                  if q & w]
        scored.sort(key=lambda t: (-t[0], -t[1], t[2]))
        return [Recall(procedure=self.procedures[i], score=score) for score, _, i in scored[:top_k]]
