"""The live side: an agent that acts in a world, a simulated user, and histories the agent
generates itself.

* :mod:`.agent`: the agent loop over a chat model with function calling;
* :mod:`.user_sim`: a simulated user for worlds with a user side;
* :mod:`.history`: the closed loop's history (k+1 attempts per task, written as GAIA does);
* :mod:`.worlds`: the replay world and tau2-bench's domains.

Imports nothing else from :mod:`skillsynth.evaluation`.
"""

__all__: list[str] = []
