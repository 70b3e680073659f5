"""The synthesis pipeline, one module per stage, in the order data flows through them.

``skill`` (the SKILL.md format) -> ``detect`` (successful tool sequences per goal) ->
``provenance`` (where each argument of a run's calls came from) -> ``plan`` (a procedure as
steps with bound arguments, stored in SKILL.md) -> ``resolve`` (what a plan's binding stands
for) -> ``schema`` (the JSON Schema subset tool specs use) -> ``induce`` (a plan from a
cluster's runs, no model) -> ``execute`` (a plan checked against a world's tool schemas, then run) ->
``partition`` (goal vectors cut into independent groups, at scale) -> ``cluster`` (goals by
similarity) -> ``distill`` (a cluster into a skill, by the LLM) -> ``recall`` (procedures
for a goal) -> ``reconcile`` (a new skill against the store) -> ``verify`` (a candidate
earns activation first) -> ``synthesize`` (one pass: all of the above with #887's floors) ->
``inject`` (recalled skills into the planner prompt) -> ``export`` (a procedure to disk) ->
``outcome`` (use counts). A stage imports only stages before it, the store and the models;
never evaluation.
"""

#: The stages in data-flow order (a stage may import only those before it).
STAGES = ("skill", "detect", "provenance", "plan", "resolve", "schema", "induce", "execute",
          "partition", "cluster", "distill", "recall", "reconcile", "verify", "synthesize",
          "inject", "export", "outcome")

__all__ = ["STAGES"]
