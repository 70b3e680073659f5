"""A recalled plan offered to the live agent as one tool (``procedure_form`` plan or both).

Prose leaves every step to the agent; a plan (:mod:`skillsynth.pipeline.plan`) the agent can
*call* takes the steps it binds out of the agent's hands (ASI's skills as actions). Each
recalled skill whose body holds a plan that passes :func:`~skillsynth.pipeline.execute.check_plan`
against the world's tools becomes one extra tool: its name made from the skill's name, its
description the tools it calls in order and where it hands back, its parameters the plan's
inputs (typed as the slots declare; the customer's required, a pick optional). Calling it
runs the steps in the world one at a time, each a normal world call recorded in the
transcript (``Turn.via`` names the plan tool) and scored by the world as any other; the agent gets back every step's result, the
error of the step that stopped it, and where to go on by hand. A plan's choice inputs
(v2) are optional parameters: left out, the call stops where the pick is needed and lists
the values to pick from, and the agent's next call of the same tool with the pick goes on
from there without calling the earlier steps again (the run holds each tool's last run;
the earlier inputs may be left out, and changing one is refused:
:func:`~skillsynth.pipeline.execute.execute_plan`).

What is counted: the agent's *decisions* (model turns that issued a call) and the world's
calls (every step a plan ran included), so a plan cannot hide calls: ``steps`` stays the
world's count. A plan refused by the checks is not offered and is counted
(:attr:`PlanTools.refused`), never silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ...errors import PlanError, PlanRefused
from ...pipeline.execute import PlanRun, WorldCall, check_plan, execute_plan
from ...pipeline.plan import InputSlot, Plan, find_plan, strip_plan
from ...pipeline.resolve import parse_result
from ...pipeline.skill import Skill

__all__ = ["PLAN_TOOL_PREFIX", "PROCEDURE_FORMS", "PlanTool", "PlanTools", "ProcedureForm",
           "plan_reply", "plan_tools", "recalled_forms", "run_plan_tool", "shortcut"]

#: Every plan tool's name starts so (a world tool with this prefix is never shadowed).
PLAN_TOOL_PREFIX = "procedure_"
#: How a recalled procedure reaches the agent: ``prose`` (GAIA: the body in the prompt, the
#: plan block left out), ``plan`` (a procedure with a plan the world accepts as a tool
#: instead of its prose; one without, as prose) or ``both`` (the tool, and the prose opened
#: by a line naming the tool: :func:`shortcut`).
ProcedureForm = Literal["prose", "plan", "both"]
PROCEDURE_FORMS: tuple[ProcedureForm, ...] = ("prose", "plan", "both")
_NAME_CHARS = 64
#: The most values a "needs your pick" reply lists.
_OPTIONS = 30


@dataclass(frozen=True)
class PlanTool:
    """One recalled plan as a tool: its name, the skill it came from, the plan, its schema."""

    name: str
    skill: str
    plan: Plan
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class PlanTools:
    """The plan tools of one run, and the recalled plans that were not offered (skill name
    -> why: the plan is malformed or names a tool or argument the world refuses)."""

    tools: tuple[PlanTool, ...] = ()
    refused: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str) -> PlanTool | None:
        """The plan tool called ``name``, if one is offered."""
        return next((t for t in self.tools if t.name == name), None)

    @property
    def specs(self) -> list[Mapping[str, Any]]:
        """The tools' OpenAI function schemas."""
        return [t.spec for t in self.tools]


def recalled_forms(recalled: Sequence[Skill], tool_specs: Sequence[Mapping[str, Any]],
                   form: ProcedureForm) -> tuple[list[Skill], PlanTools]:
    """What the agent is shown of the recalled skills under ``form``: the skills whose prose
    goes into the system prompt (plan blocks left out; a body that is only a plan has no
    prose), and the plan tools (checked against ``tool_specs``, the world tools the agent is
    offered)."""
    plans = plan_tools(recalled, tool_specs) if form != "prose" else PlanTools()
    tools = {t.skill: t for t in plans.tools}
    prose = []
    for skill in recalled:
        body = strip_plan(skill.body)
        tool = tools.get(skill.name)
        if tool is not None and form == "plan":
            continue
        if tool is not None:  # both: the body opens by saying how to run it in one call
            body = shortcut(tool) + "\n\n" + body
        if body.strip():
            prose.append(skill if body == skill.body else replace(skill, body=body))
    return prose, plans


def shortcut(tool: PlanTool) -> str:
    """The line that opens a recalled body under ``both``: the tool that runs its plan, what
    to give it and where it hands back (first, so that GAIA's recall cut keeps it)."""
    plan = tool.plan
    steps = f"step 1 ({plan.steps[0].tool})" if len(plan.steps) == 1 else \
        f"steps 1-{len(plan.steps)} ({' -> '.join(s.tool for s in plan.steps)})"
    gives = ", ".join(s.name for s in plan.inputs if s.source != "choice") or "nothing"
    text = f"Shortcut: the tool {tool.name} makes {steps} in one call; give it {gives}."
    if plan.choices:
        text += f" It asks you to pick {', '.join(s.name for s in plan.choices)} on the way."
    if plan.stop is not None:
        text += f" Then go on by hand from {plan.stop.tool or 'the next step'}."
    return text


def _tool_name(skill: str, taken: set[str]) -> str:
    stem = PLAN_TOOL_PREFIX + (re.sub(r"[^A-Za-z0-9_]+", "_", skill).strip("_").lower()
                               or "plan")
    stem = stem[:_NAME_CHARS]
    name, n = stem, 2
    while name in taken:
        suffix = f"_{n}"
        name, n = stem[:_NAME_CHARS - len(suffix)] + suffix, n + 1
    return name


def _describe(skill: Skill, plan: Plan) -> str:
    tools = " -> ".join(s.tool for s in plan.steps)
    text = (f"Runs the recalled procedure '{skill.name}' in one call: {tools}, each step's "
            "arguments taken from your inputs and the earlier steps' results. Returns every "
            "step's result.")
    if plan.choices:
        names = ", ".join(c.name for c in plan.choices)
        text += (f" You pick {names} among the values an earlier step returns: leave it out "
                 "and the call stops there and lists them; call again with your pick and it "
                 "goes on from there.")
    if plan.stop is not None:
        arg = f" (you choose its {plan.stop.argument})" if plan.stop.argument else ""
        text += f" It ends before {plan.stop.tool or 'the next step'}{arg}: go on from there."
    return text + " If a step fails, it stops there and says why; continue by hand."


def _param(plan: Plan, slot: InputSlot) -> dict[str, Any]:
    if slot.among is None:
        return {"type": slot.type, "description": "a value the customer gives"}
    step = slot.among.step
    where = f"{slot.among.path or 'the result'} of step {step} ({plan.steps[step - 1].tool})"
    param: dict[str, Any] = {"type": slot.type, "description": f"your pick among the values "
                             f"at {where}; leave out to be shown them"}
    if slot.type == "array":
        param["description"] += "; one or more"
        param["items"] = {"type": ["string", "number", "boolean"]}
    return param


def _spec(name: str, skill: Skill, plan: Plan) -> dict[str, Any]:
    props = {s.name: _param(plan, s) for s in plan.inputs}
    return {"type": "function", "function": {
        "name": name, "description": _describe(skill, plan),
        "parameters": {"type": "object", "properties": props,
                       "required": [s.name for s in plan.inputs if s.source != "choice"]}}}


def plan_tools(recalled: Sequence[Skill], tool_specs: Sequence[Mapping[str, Any]]
               ) -> PlanTools:
    """One tool per recalled skill whose body holds a plan the world's tools accept."""
    taken = {str(s["function"]["name"]) for s in tool_specs}
    tools: list[PlanTool] = []
    refused: dict[str, str] = {}
    for skill in recalled:
        try:
            plan = find_plan(skill.body)
            if plan is None:
                continue
            check_plan(plan, tool_specs)
        except (PlanError, PlanRefused) as exc:
            refused[skill.name] = f"{type(exc).__name__}: {exc}"
            continue
        name = _tool_name(skill.name, taken)
        taken.add(name)
        tools.append(PlanTool(name=name, skill=skill.name, plan=plan,
                              spec=_spec(name, skill, plan)))
    return PlanTools(tools=tuple(tools), refused=refused)


def plan_reply(run: PlanRun) -> str:
    """What the agent reads after calling a plan tool (JSON): each step that ran with its
    arguments and whole result (as the world answers a call), whether the plan finished, the error, and where to go on."""
    out: dict[str, Any] = {
        "status": "complete" if run.complete else "stopped" if run.error else
        "needs your pick" if run.needs else "handed back",
        "steps": [{"step": s.step, "tool": s.tool, "arguments": dict(s.arguments),
                   "ok": s.ok, **({"ran": "in your earlier call"} if s.reused else {}),
                   "result": parse_result(s.result)} for s in run.ran]}
    if run.error:
        out["error"] = run.error
        out["next"] = "correct what failed and continue with the tools yourself" \
            if run.goes_on_from is None else (
                f"call this tool again with the input corrected; it goes on from step "
                f"{run.goes_on_from} without repeating the steps above (or continue with the "
                "tools yourself)")
    elif run.needs is not None:
        n = run.needs
        out["pick"] = {"input": n.input, "for": n.tool, "one of": list(n.options[:_OPTIONS])}
        if len(n.options) > _OPTIONS:
            out["pick"]["more"] = len(n.options) - _OPTIONS
        out["next"] = (f"call this tool again with {n.input} set to your pick; it goes on "
                       f"from step {n.step} without repeating the steps above")
    elif run.handoff is not None:
        h = run.handoff
        out["next"] = (f"continue with {h.tool or 'the next step'} yourself"
                       + (f": choose its {h.argument}" if h.argument else ""))
    return json.dumps(out, ensure_ascii=False)


def run_plan_tool(tool: PlanTool, arguments: Any, call: WorldCall,
                  tool_specs: Sequence[Mapping[str, Any]], resume: PlanRun | None = None
                  ) -> tuple[str, bool, PlanRun | None]:
    """Call ``tool`` with the agent's ``arguments`` (a JSON object or its text): the reply
    the agent reads, whether it succeeded, and the plan's run (None: refused, nothing ran);
    ``resume``: the tool's last run in this episode (:func:`~skillsynth.pipeline.execute.execute_plan`)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return (json.dumps({"error": f"the arguments are not JSON: {arguments[:200]}"}),
                    False, None)
    if not isinstance(arguments, Mapping):
        return json.dumps({"error": "the arguments must be a JSON object"}), False, None
    try:
        run = execute_plan(tool.plan, dict(arguments), call, tool_specs=tool_specs,
                           resume=resume)
    except PlanRefused as exc:
        return json.dumps({"error": f"nothing ran: {exc}"}, ensure_ascii=False), False, None
    return plan_reply(run), run.error is None, run
