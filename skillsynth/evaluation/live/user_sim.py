"""A simulated user on a second model endpoint, for worlds whose tasks have a user side.

tau2-bench scores agents in conversation with an LLM user who knows the task's scenario
(reason for the call, known and unknown facts, how to behave) and reveals it as asked. The
simulator here plays that role: it opens the conversation, answers each of the agent's
messages, and ends it by saying ``###STOP###`` (tau2's stop token) when the request is
done or cannot be done. It never sees the tools, the policy or the recalled procedures. Its
turns go through the call cache like every model call (prompt version ``user-sim-v1``).
"""

from __future__ import annotations

from typing import Any

from ...errors import LLMError
from ...protocols import ChatModel

__all__ = ["GREETING", "STOP", "USER_PROMPT_VERSION", "UserSimulator"]

#: Part of the call-cache key of every simulated user turn.
USER_PROMPT_VERSION = "user-sim-v1"
#: What the simulated user says to end the conversation (tau2's token).
STOP = "###STOP###"
#: The agent's opening line, to which the user answers first (as in tau2).
GREETING = "Hi! How can I help you today?"
_SYSTEM = ("You are a customer talking to a customer-service agent. Play the customer in the "
           "scenario below, one short message at a time, in your own words. Say only what "
           "the scenario says you know, and only when it is relevant or asked. Do not invent "
           "facts. When your request is fully handled, or the agent cannot handle it, reply "
           f"with {STOP} alone.\n\nScenario:\n")


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
        self._messages: list[dict[str, Any]] = [
            {"role": "system", "content": _SYSTEM + instructions.strip()}]
        self.turns = 0

    def reply(self, agent_text: str) -> tuple[str, bool]:
        """The user's answer to the agent's message, and whether the user ended the run.

        Raises:
            LLMError: the user's model failed (the run then ends as a model error).
        """
        self._messages.append({"role": "user", "content": agent_text or "(no reply)"})
        r = self.llm.chat(self._messages, temperature=self.temperature, max_tokens=192,
                          seed=self.seed, prompt_version=USER_PROMPT_VERSION)
        text = (r.content or "").strip()
        self._messages.append({"role": "assistant", "content": text})
        self.turns += 1
        return text.replace(STOP, "").strip(), STOP in text or not text

    @property
    def exhausted(self) -> bool:
        """The user has spoken ``max_turns`` times."""
        return self.turns >= self.max_turns
