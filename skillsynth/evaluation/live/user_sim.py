"""A simulated user on a second model endpoint, for worlds whose tasks have a user side.

tau2-bench scores agents in conversation with an LLM user who knows the task's scenario
(reason for the call, known and unknown facts, how to behave) and reveals it as asked. The
simulator here plays that role: it opens the conversation, answers each of the agent's
messages, and ends it by saying ``###STOP###`` (tau2's stop token) when the request is
done or cannot be done. It never sees the tools, the policy or the recalled procedures. Its
turns go through the call cache like every model call (prompt version ``user-sim-v2``).

Each turn hands the model the conversation as a transcript to continue ("Agent: ...",
"Customer: ...") rather than the agent's words in the chat's user role (tau2's framing,
``user-sim-v1``): a small model given the agent's line as its user turn answers as the
assistant it was tuned to be, so no run ever learns the request; given the transcript, and
asked first why it came, it opens with the request (docs/live.md has the measurement).
"""

from __future__ import annotations

from ...errors import LLMError
from ...protocols import ChatModel

__all__ = ["GREETING", "STOP", "USER_PROMPT_VERSION", "UserSimulator"]

#: Part of the call-cache key of every simulated user turn.
USER_PROMPT_VERSION = "user-sim-v2"
#: What the simulated user says to end the conversation (tau2's token).
STOP = "###STOP###"
#: The agent's opening line, to which the user answers first (as in tau2).
GREETING = "Hi! How can I help you today?"
_SYSTEM = ("You write the customer's lines in a chat between a customer and a customer-service "
           "agent. The scenario below is written to the customer (\"you\" is the customer). "
           "Write only the customer's next message: one or two short sentences, in the first "
           "person, in your own words. Say only what the scenario says the customer knows, "
           "and only when it is relevant or the agent asks for it. Do not invent facts. When "
           "the request is fully handled, or the agent cannot handle it, write "
           f"{STOP} alone.\n\nScenario:\n")
#: The first turn says why the customer came (asked only for the next message, a small model
#: answers the greeting with a refusal: "I'm sorry, but I can't help with that").
_FIRST = "Write the customer's first message: say why you are contacting the agent."
_NEXT = "Write the customer's next message."
_AGENT, _CUSTOMER = "Agent: ", "Customer: "


class UserSimulator:
    """One simulated user for one run.

    Args:
        llm: the user's chat model (a second endpoint; the agent's model works too).
        instructions: the task's user scenario (``WorldTask.instructions``).
        max_turns: most user messages before the run is cut off (``turn-limit``).
        seed, temperature: the user's sampling.
    """

    def __init__(self, llm: ChatModel, instructions: str, *, max_turns: int = 10,
                 seed: int = 0, temperature: float = 0.0):
        if not instructions.strip():
            raise LLMError("the user simulator needs the task's user scenario; this world's "
                           "tasks have none (run solo)")
        self.llm, self.max_turns, self.seed, self.temperature = llm, max_turns, seed, temperature
        self._system = _SYSTEM + instructions.strip()
        self._lines: list[str] = []
        self.turns = 0

    def reply(self, agent_text: str) -> tuple[str, bool]:
        """The user's answer to the agent's message, and whether the user ended the run.

        Raises:
            LLMError: the user's model failed (the run then ends as a model error).
        """
        self._lines.append(_AGENT + " ".join((agent_text or "(no reply)").split()))
        ask = _FIRST if len(self._lines) == 1 else _NEXT
        chat = "The chat so far:\n\n" + "\n".join(self._lines) + "\n\n" + ask
        r = self.llm.chat([{"role": "system", "content": self._system},
                           {"role": "user", "content": chat}],
                          temperature=self.temperature, max_tokens=192, seed=self.seed,
                          prompt_version=USER_PROMPT_VERSION)
        text = _own_line(r.content or "")
        self._lines.append(_CUSTOMER + " ".join(text.split()))
        self.turns += 1
        return text.replace(STOP, "").strip(), STOP in text or not text

    @property
    def exhausted(self) -> bool:
        """The user has spoken ``max_turns`` times."""
        return self.turns >= self.max_turns


def _own_line(text: str) -> str:
    """The customer's message in a completion: without a leading ``Customer:`` label, and
    cut where the model goes on to write the agent's next line."""
    text = text.strip()
    if text.lower().startswith(_CUSTOMER.lower().strip()):
        text = text[len(_CUSTOMER.strip()):].strip()
    cut = text.find("\n" + _AGENT.strip())
    return (text if cut < 0 else text[:cut]).strip()
