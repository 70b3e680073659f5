"""How a solo agent is told what a customer wants: in the third person.

tau2's user instructions are written *to the user* ("You want to exchange ...", "You are
mei_kovacs_8020 in zipcode 28236"). Handed to the agent verbatim they address the agent as
the customer, and small models then act as the customer (no lookups, invented ids). In solo
mode the agent gets the same facts as a third-party request instead: "A customer needs help.
Their request: The customer wants to exchange ...". The rewrite is a fixed set of rules (no
model), so every arm and every run sees the same text; it is checked on every tau2 task's
instructions in the tests.
"""

from __future__ import annotations

import re

__all__ = ["FRAMING_VERSION", "solo_request", "third_person"]

#: Part of the agent's prompt version (a change re-keys the call cache).
FRAMING_VERSION = "third-person-v1"

#: Verbs that follow "you" in tau2's instructions, with their third-person singular form.
_VERBS = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't",
    "go": "goes", "want": "wants", "need": "needs", "wish": "wishes", "live": "lives",
    "prefer": "prefers", "think": "thinks", "know": "knows", "remember": "remembers",
    "like": "likes", "plan": "plans", "expect": "expects", "own": "owns", "hold": "holds",
    "use": "uses", "intend": "intends", "agree": "agrees", "insist": "insists",
    "feel": "feels", "hope": "hopes", "mean": "means", "get": "gets", "try": "tries",
    "accept": "accepts", "refuse": "refuses", "decide": "decides", "demand": "demands",
    "ask": "asks", "say": "says", "understand": "understands", "care": "cares",
    "believe": "believes", "reside": "resides", "travel": "travels", "fly": "flies",
    "recall": "recalls", "see": "sees", "seem": "seems", "lost": "lost", "can't": "can't",
    "cannot": "cannot", "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
}
#: Words that may stand between the subject and its verb ("you also want").
_ADVERBS = ("also", "only", "still", "just", "really", "now", "no longer", "definitely",
            "then", "actually", "already", "originally", "usually", "never", "always")
_SUBJECT = re.compile(
    r"\b([Yy]ou)((?: (?:" + "|".join(_ADVERBS) + r"))*) ([A-Za-z']+)")


def _subject(m: re.Match[str]) -> str:
    who = "The customer" if m.group(1) == "You" else "the customer"
    verb = m.group(3)
    return f"{who}{m.group(2)} {_VERBS.get(verb.lower(), verb)}"


def third_person(text: str) -> str:
    """``text`` (addressed to the customer as "you") about the customer instead.

    "You want ..." -> "The customer wants ...", "your order" -> "their order", "You are X"
    -> "The customer is X". Words other than these pronouns and the verbs right after them
    are left as they are.
    """
    out = re.sub(r"\b([Yy])ou(?:r)? name is\b",
                 lambda m: ("The" if m.group(1) == "Y" else "the") + " customer's name is",
                 text)
    out = re.sub(r"\b([Yy])ou're\b",
                 lambda m: ("The" if m.group(1) == "Y" else "the") + " customer is", out)
    out = re.sub(r"\b([Yy])ourself\b", lambda m: "themselves", out)
    out = re.sub(r"\bYours\b", "Theirs", out)
    out = re.sub(r"\byours\b", "theirs", out)
    out = re.sub(r"\bYour\b", "Their", out)
    out = re.sub(r"\byour\b", "their", out)
    out = _SUBJECT.sub(_subject, out)
    # what is left is "you" as an object ("the agent tells you"): the customer
    return re.sub(r"\bYou\b", "The customer", re.sub(r"\byou\b", "them", out))


def solo_request(reason: str, known: str | None = None) -> str:
    """The first message of a solo run: the customer's request and facts, third person."""
    text = "A customer needs help. Their request: " + third_person(reason.strip())
    if known and known.strip():
        text += "\n\nWhat the customer told you about themselves: " + third_person(known.strip())
    return text
