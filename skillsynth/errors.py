"""One exception tree for skillsynth.

Every error skillsynth raises on purpose derives from :class:`SkillsynthError`, so a
caller can catch the whole family in one clause and a library exception never leaks
through untranslated (it is chained with ``raise ... from exc``)::

    SkillsynthError
    ├── ConfigError              a threshold or setting is invalid (names the key and range)
    ├── StoreError               memory.db cannot be opened, migrated or written
    │   ├── SchemaError          the file is not a GAIA memory.db we understand
    │   └── ReadOnlyStoreError   a write was attempted on a store opened read-only
    ├── SkillError               SKILL.md problems
    │   ├── MalformedSkill       LLM / intermediate output that is not a valid skill
    │   │   └── UngroundedSkill  a skill naming a tool its runs never called
    │   ├── SkillValidationError a file on disk fails a validator profile
    │   ├── ExportRefused        a procedure that may hold user data was not exported
    │   └── PlanError            an executable plan is malformed or cannot bind (names the field)
    │       ├── PlanRefused      a plan or its inputs fail the world's tool schemas (nothing ran)
    │       └── StepNotCalled    the harness declines a plan's step (its step limit)
    ├── PipelineError            a stage was handed input it cannot use
    ├── CorpusError              a corpus cannot be built or read as asked
    │   └── CorpusFormatError    a corpus record is broken (names file, record, field)
    ├── LLMError                 model traffic
    │   ├── LLMUnavailable       server unreachable or 5xx after bounded retries
    │   ├── ModelNotFound        the configured model is not served (says how to get it)
    │   ├── KeyRejected          the server refused the API key, or wants one (401/403)
    │   ├── InputTooLarge        one input has more tokens than the server takes (says both)
    │   ├── ContextExceeded      a request is longer than the server's context (says both)
    │   └── MalformedResponse    the server answered something we cannot parse
    ├── EmbedderError            embeddings could not be produced or would be mixed
    ├── PrepareError             a step of ``skillsynth models prepare`` failed (names it)
    ├── FigureError              a measurement record is malformed (names the figure)
    └── EvaluationError          an evaluation cannot run as asked (no probe, a finished point)
        ├── WorldError           a tool world is unknown, not installed, or has no such task
        ├── ArmSkipped           a control arm has nothing to recall for one probe (counted)
        └── PointInvalid         a point's model work did not run to its end (nothing recorded)

Messages say what happened and what to do next.
"""

from __future__ import annotations

__all__ = [
    "ArmSkipped",
    "ConfigError",
    "ContextExceeded",
    "CorpusError",
    "CorpusFormatError",
    "EmbedderError",
    "EvaluationError",
    "ExportRefused",
    "FigureError",
    "InputTooLarge",
    "KeyRejected",
    "LLMError",
    "LLMUnavailable",
    "MalformedResponse",
    "MalformedSkill",
    "ModelNotFound",
    "PipelineError",
    "PlanError",
    "PlanRefused",
    "PointInvalid",
    "PrepareError",
    "ReadOnlyStoreError",
    "SchemaError",
    "SkillError",
    "SkillValidationError",
    "SkillsynthError",
    "StepNotCalled",
    "StoreError",
    "UngroundedSkill",
    "WorldError",
]


class SkillsynthError(Exception):
    """Root of every error skillsynth raises deliberately."""


class ConfigError(SkillsynthError, ValueError):
    """A configuration value is missing, of the wrong type or out of range.

    Attributes:
        key: the dotted name of the offending setting (e.g. ``skill_synthesis.similarity_tau``).
        source: where the value came from (a file path, ``"override"``, an env var name).
    """

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None):
        self.key = key
        self.source = source
        where = f" (from {source})" if source else ""
        super().__init__(f"{message}{where}")


class StoreError(SkillsynthError):
    """A memory.db could not be opened, migrated or written."""

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class SchemaError(StoreError):
    """The database does not have a GAIA memory schema skillsynth understands."""


class ReadOnlyStoreError(StoreError):
    """A mutating call was made on a store opened with ``read_only=True``."""


class SkillError(SkillsynthError):
    """Base class for SKILL.md problems."""


class MalformedSkill(SkillError, ValueError):
    """Text that should describe a skill does not.

    Attributes:
        field: the frontmatter field or part (``"body"``, ``"frontmatter"``) at fault, if known.
    """

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class UngroundedSkill(MalformedSkill):
    """A well-formed skill whose ``tools_required`` names a tool none of its runs called.

    Counted apart from other malformed answers: ``grounded_tools_rate`` is the share of
    parsed distillations that are not this.
    """


class SkillValidationError(SkillError):
    """A SKILL.md file on disk fails a validator profile.

    Attributes:
        path: the skill directory.
        profile: ``"gaia691"`` or ``"agentskills"``.
        errors: every problem found, one message each.
    """

    def __init__(self, path: str, profile: str, errors: list[str]):
        self.path = path
        self.profile = profile
        self.errors = list(errors)
        joined = "; ".join(self.errors)
        super().__init__(f"{path}: invalid under profile {profile}: {joined}")


class ExportRefused(SkillError):
    """A procedure marked as possibly holding user data (distilled from the runs' argument
    values, ``distill_args: values``) was not exported: nothing was written."""


class PlanError(SkillError, ValueError):
    """A procedure's executable plan is malformed, or one of its bindings finds no single value.

    Attributes:
        field: where in the plan (``steps[2].args.order_id``, ``inputs[1].type``,
            ``version``); steps are numbered from 1, as the plan's bindings name them.
    """

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class StepNotCalled(PlanError):
    """The harness declines one step of a running plan (its step limit is reached); the
    plan's run stops there, nothing called, and says why."""


class PlanRefused(PlanError):
    """A plan, or the inputs it was called with, fails the world's tool schemas; nothing ran.

    Attributes:
        problems: every problem found, one message each (a step's tool the world does not
            offer, an argument its schema does not allow, an input too long).
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("refused before any call: " + "; ".join(self.problems))


class PipelineError(SkillsynthError):
    """A pipeline stage was handed input it cannot use (a goal-less sequence, no embedder)."""


class CorpusError(SkillsynthError):
    """A corpus cannot be built or read as asked (a path taken, a generator setting)."""


class CorpusFormatError(CorpusError, ValueError):
    """A corpus record cannot be imported.

    Attributes:
        file: the source file.
        record: the record index (or id) inside the file.
        field: the field at fault.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: int | str | None = None,
        field: str | None = None,
    ):
        self.file = file
        self.record = record
        self.field = field
        parts = [p for p in (file, f"record {record}" if record is not None else None,
                             f"field {field!r}" if field else None) if p]
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class LLMError(SkillsynthError):
    """Base class for failures talking to a model server."""

    def __init__(self, message: str, *, base_url: str | None = None, model: str | None = None):
        self.base_url = base_url
        self.model = model
        super().__init__(message)


class LLMUnavailable(LLMError):
    """The server is unreachable, timed out, or kept answering 5xx after bounded retries."""


class ModelNotFound(LLMError):
    """The server is up but does not serve the configured model."""


class KeyRejected(LLMError):
    """The server answered 401 or 403: the API key it was sent is wrong, or it wants one.

    A server that answers this is reachable; ``models status`` says so instead of calling
    it unreachable.
    """


class InputTooLarge(LLMError):
    """The server refused an input with more tokens than it processes at once.

    llama-server (behind Lemonade too) says both numbers: "input (N tokens) is too large to
    process. increase the physical batch size (current batch size: B)". Not retried: the
    same input fails the same way.

    Attributes:
        tokens: the input's token count (N), when the server said it.
        limit: the most tokens the server takes (B), when it said it.
    """

    def __init__(self, message: str, *, base_url: str | None = None, model: str | None = None,
                 tokens: int | None = None, limit: int | None = None):
        self.tokens = tokens
        self.limit = limit
        super().__init__(message, base_url=base_url, model=model)


class ContextExceeded(LLMError):
    """The request is longer than the server's context window.

    llama-server (behind Lemonade too) says both numbers: "request (N tokens) exceeds the
    available context size (C tokens)". Not retried: the same request fails the same way.
    Not an outage either: the live agent ends such a run at its context (``context-limit``),
    as a fixed-context agent would, instead of invalidating the point.

    Attributes:
        tokens: the request's token count (N), when the server said it.
        limit: the server's context size (C), when it said it.
    """

    def __init__(self, message: str, *, base_url: str | None = None, model: str | None = None,
                 tokens: int | None = None, limit: int | None = None):
        self.tokens = tokens
        self.limit = limit
        super().__init__(message, base_url=base_url, model=model)


class MalformedResponse(LLMError):
    """The server answered, but the body is not what the API promises."""


class EmbedderError(SkillsynthError):
    """Embeddings could not be produced, or would mix vectors from different embedders."""


class PrepareError(SkillsynthError):
    """A step of ``skillsynth models prepare`` failed; the message names the step or part."""


class FigureError(SkillsynthError, ValueError):
    """A measurement record is malformed: a figure without n, a bad name or date."""


class EvaluationError(SkillsynthError):
    """An evaluation cannot run as asked: no probe, a finished point, an unknown strategy."""


class WorldError(EvaluationError):
    """A tool world is unknown, its package is not installed, or it has no such task."""


class ArmSkipped(EvaluationError):
    """A control arm cannot be built for one probe (no gold actions, no other family).

    Raised by a control strategy's recall and caught by the probe's scoring, which leaves
    the probe out of the point; the reason is counted in the point's summary.
    """


class PointInvalid(EvaluationError):
    """A point's synthesis pass, verification try or live run did not run to its end for a
    model or server failure, so the point measured nothing.

    GAIA keeps its agent running when the model is down; an evaluation that did the same
    would report the outage as a finding (synthesis fired 0.00). The point writes no
    summary, so no KPI of it reaches an aggregate, report or gate, and a re-run of the sweep
    on a healthy server redoes it (its answered model calls come from the cache).

    Attributes:
        stage: where it stopped (``synthesis``, ``live``).
        cause: the model error's text.
    """

    def __init__(self, message: str, *, stage: str, cause: str):
        self.stage = stage
        self.cause = cause
        super().__init__(message)
