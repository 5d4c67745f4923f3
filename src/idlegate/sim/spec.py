"""The workflow specification: the schema shared by the simulator and the `DagWorkflow` resource.

Field names follow Kubernetes conventions (camelCase aliases) so the very same model
describes `spec` of a `DagWorkflow` custom resource; Python code uses snake_case.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from idlegate.documents import DuplicateKey as DuplicateKey  # (re-exported)
from idlegate.documents import YamlLoader as YamlLoader
from idlegate.documents import YamlRefusal, json_document
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.graphs import find_cycle
from idlegate.sim.resources import EMPTY, ResourceVector, pod_request
from idlegate.textfiles import read_text

MAX_STAGES = 100_000
"""Most stages a workflow may have: only a guard against absurd input, since every stage is
held in memory (the simulator's `Dag`, the policy's rows). Argo and Airflow runs of any size
up to it are ordered; a DagWorkflow is bound by its object's size
(`idlegate.api.status.check_object_size`) and the CRD's `MAX_CR_STAGES`."""
MAX_TASKS_PER_STAGE = 100_000
"""Most tasks one stage may have."""
MAX_TASK_SECONDS = 7 * 24 * 3600
"""Longest task duration (`taskDurationSeconds`) a stage may have: 7 days."""
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""Stage names become parts of pod names and labels: DNS-1123 labels."""
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""RFC 1123 subdomain: the API server's rule for the names of objects (custom ones too)."""
PATTERN_MEANINGS = {
    NAME_PATTERN: "must be a DNS label (lower case letters, digits and '-', starting and "
    "ending with a letter or digit)",
    DNS_SUBDOMAIN_PATTERN: "must be a DNS subdomain name (lower case letters, digits, '-' "
    "and '.', starting and ending with a letter or digit)",
}
"""What a name pattern means, said instead of the raw regular expression."""
MAX_NAME_LENGTH = 40


Quantity = Annotated[
    int | float | str,
    WithJsonSchema(
        {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    ),
]
"""A Kubernetes quantity as a manifest writes it: ``2``, ``"500m"``, ``4Gi``
(`idlegate.sim.resources.parse_quantity` reads it)."""


def stage_label(text: str, taken: set[str], key: str | None = None) -> str:
    """A stage name (a DNS label) for a node of another system's workflow (an Argo node,
    an Airflow task): `text` in lower case with runs of other characters as '-', and a hash
    of `key` (default: `text`) appended when that name is in `taken` or too long. The name
    returned is added to `taken`."""
    plain = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "main"
    if len(plain) > MAX_NAME_LENGTH or plain in taken:
        digest = hashlib.sha256((text if key is None else key).encode()).hexdigest()[:6]
        plain = f"{plain[: MAX_NAME_LENGTH - 7].rstrip('-')}-{digest}"
    taken.add(plain)
    return plain


class StageSpec(BaseModel):
    """One stage: `tasks` identical, independent tasks that run after all of `dependsOn` finish."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str = Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=NAME_PATTERN,
        description="Stage name, unique in the workflow (lowercase letters, digits and '-').",
    )
    tasks: int = Field(
        ge=1, le=MAX_TASKS_PER_STAGE, strict=True, description="Number of parallel tasks (>= 1)."
    )
    task_duration_seconds: float = Field(
        alias="taskDurationSeconds",
        gt=0,
        le=MAX_TASK_SECONDS,
        description="Estimated duration of one task in seconds (> 0); what schedulers see.",
    )
    depends_on: tuple[str, ...] = Field(
        default=(),
        alias="dependsOn",
        description="Names of the stages that must finish before this one starts.",
    )
    gang: bool = Field(
        default=False, strict=True, description="Start all tasks together (rigid, HPC-style)."
    )
    backoff_limit: int = Field(
        default=0,
        alias="backoffLimit",
        ge=0,
        le=100,
        strict=True,
        description="Retries of a failed task pod before the workflow fails (operator only).",
    )
    checkpointed: bool = Field(
        default=False,
        strict=True,
        description="A stopped task resumes where it was (it saves its progress and reads "
        "it back when run again): stopping it to give quota back loses no work, so it is "
        "stopped first (docs/queues.md, Preemption, being built). Unset: false, a stopped "
        "task starts over.",
    )
    template: dict[str, Any] | None = Field(
        default=None,
        description="Pod template for the stage's task pods (operator only; the "
        "simulator reads only its pod's resource requests, the stage's demand).",
    )
    resources: dict[str, Quantity] | None = Field(
        default=None,
        description="What one task requests, as a ResourceList (cpu: 500m, memory: 1Gi, "
        "nvidia.com/gpu: 1), for a stage without a template (the task container's "
        "requests). With a template: its pod's effective request, as the kube-scheduler "
        "computes it, and not this too. A pool counts only the resources it names.",
    )

    @field_validator("resources", mode="before")
    @classmethod
    def _quantities(cls, value: object) -> object:
        ResourceVector.validated(value)
        return value

    @model_validator(mode="after")
    def _template_requests(self) -> StageSpec:
        if self.resources is not None and self.template is not None:
            raise ValueError(
                "give what a task requests once: in its template's containers "
                "(resources.requests), or as resources without a template; with both, the "
                "pool would count one and the kube-scheduler place the pod by the other"
            )
        if self.template is not None:
            try:
                self.demand  # noqa: B018 (a bad quantity in the template: said here)
            except IdlegateError as exc:
                raise ValueError(str(exc)) from None
        return self

    @property
    def demand(self) -> ResourceVector:
        """What one task requests beyond its pod: `resources`, else the template's pod's
        effective request (`idlegate.sim.resources.pod_request`)."""
        if self.resources is not None:
            return ResourceVector.of(self.resources, "")
        pod = None if self.template is None else self.template.get("spec")
        return pod_request(pod, "template.spec") if isinstance(pod, dict) else EMPTY

    @field_validator("task_duration_seconds", mode="before")
    @classmethod
    def _numeric_duration(cls, value: object) -> object:
        # pydantic would accept "10" silently; a string here is almost always a typo
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number of seconds, e.g. 12.5")
        if not math.isfinite(value):  # else NaN is reported as out of bounds
            raise ValueError("must be a finite number of seconds, e.g. 12.5")
        return value

    @property
    def work(self) -> float:
        """Total executor-seconds of the stage (tasks × task duration)."""
        return self.tasks * self.task_duration_seconds


class PodGCStrategy(StrEnum):
    """When the operator deletes a workflow's task pods (Argo Workflows' podGC strategies)."""

    ON_POD_COMPLETION = "OnPodCompletion"
    ON_POD_SUCCESS = "OnPodSuccess"
    ON_WORKFLOW_COMPLETION = "OnWorkflowCompletion"
    ON_WORKFLOW_SUCCESS = "OnWorkflowSuccess"
    NEVER = "Never"


class PodGC(BaseModel):
    """Deletion of the workflow's task pods (operator only), in Argo Workflows' shape."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    strategy: PodGCStrategy = Field(
        description="OnPodCompletion (each pod once it ended), OnPodSuccess (each pod once "
        "it succeeded), OnWorkflowCompletion (all pods once the workflow ended), "
        "OnWorkflowSuccess (all pods once it succeeded) or Never. A pod is deleted only "
        "after the status that counts its outcome is written, and the workflow-level "
        "strategies wait for the workflow's history record."
    )


class WorkflowSpec(BaseModel):
    """A DAG workflow: stages and their dependencies. Validated on construction.

    The workflow-level fields after `stages` (TTL, pod GC, deadline, suspend, pool) are the
    operator's only; the simulator ignores them."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    stages: tuple[StageSpec, ...] = Field(
        min_length=1, max_length=MAX_STAGES, description="The stages of the workflow."
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        alias="ttlSecondsAfterFinished",
        ge=0,
        strict=True,
        description="Delete the workflow (and with it its pods) this many seconds after it "
        "succeeded or failed (operator only; an Invalid one is kept for a fix). Unset: the "
        "operator's --ttl-after-finished, else kept.",
    )
    pod_gc: PodGC | None = Field(
        default=None,
        alias="podGC",
        description="When to delete the task pods (operator only). Unset: the operator's "
        "--pod-gc (default Never).",
    )
    active_deadline_seconds: int | None = Field(
        default=None,
        alias="activeDeadlineSeconds",
        ge=1,
        strict=True,
        description="Fail the workflow (reason DeadlineExceeded: its pods deleted, its "
        "executors freed) once this many seconds have passed since the operator admitted "
        "it (status.startTime), time suspended included (operator only).",
    )
    suspend: bool = Field(
        default=False,
        strict=True,
        description="Keep the workflow out of the pool while true: no task is released "
        "and the policy does not see it. Set on a running workflow, its running task pods "
        "are deleted (evicted, as Kueue does) and run again after it is set back to false "
        "(operator only).",
    )
    pool: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="The ExecutorPool to run in, by name (operator only). Unset: the pool "
        "whose namespaceSelector selects the workflow's namespace, else the operator's "
        "default pool (--pool-size). A named pool that does not exist makes the workflow "
        "wait (condition PoolReady=False) until it does.",
    )
    queue_name: str | None = Field(
        default=None,
        alias="queueName",
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="The queue of its pool to wait in (docs/queues.md). Unset: the label "
        "idlegate.io/queue, else the queue whose namespaces include the workflow's, else "
        "the pool's default queue. A queue that does not exist makes the workflow wait "
        "(reason QueueNotFound).",
    )
    priority_class_name: str | None = Field(
        default=None,
        alias="priorityClassName",
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="A PriorityClass whose value orders the workflow within its queue "
        "(higher first), as a pod's does. One that does not exist: a Warning, priority 0.",
    )

    def model_post_init(self, __context: Any) -> None:
        check_dag(self.stages)

    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]


def check_dag(stages: tuple[StageSpec, ...]) -> None:
    """Raise SpecError for duplicate names, unknown dependencies and cycles: every one of
    them, joined by ``"; "`` (lint says each at its stage: `api.lint_fields`), the cycle
    only when nothing else is wrong."""
    problems: list[str] = []
    names = [s.name for s in stages]
    seen = set(names)
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        problems.append(f"stage name {name!r} appears twice; stage names must be unique")
    for stage in stages:
        for dep in dict.fromkeys(stage.depends_on):
            if dep not in seen:
                problems.append(
                    f"stage {stage.name!r} depends on {dep!r}, which is not a stage of this "
                    f"workflow (stages: {', '.join(sorted(seen))})"
                )
            elif dep == stage.name:
                problems.append(f"stage {stage.name!r} depends on itself; remove it from dependsOn")
        if len(set(stage.depends_on)) != len(stage.depends_on):
            problems.append(f"stage {stage.name!r} lists the same dependency twice in dependsOn")
    if problems:
        raise SpecError("; ".join(problems))
    dependents: dict[str, list[str]] = {}  # (edges dependency -> dependent, as drawn)
    for stage in stages:
        for dep in stage.depends_on:
            dependents.setdefault(dep, []).append(stage.name)
            dependents.setdefault(stage.name, [])
    cycle = find_cycle(dependents)
    if cycle is None:
        return
    # edges run dependency -> dependent; show them as "x depends on y", from the smallest name
    names = [edge[1] for edge in reversed(cycle)]
    start = names.index(min(names))
    names = names[start:] + names[:start]
    path = " -> ".join([*names, names[0]])
    raise SpecError(
        f"the dependencies form a cycle: {path} (each depends on the next); "
        "a workflow must be acyclic"
    )


_KINDS = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list"}


def describe(value: Any) -> str:
    """What a parsed YAML/JSON value is, for a message: "a string", "a list", "null"..."""
    if value is None:
        return "null"
    return "a mapping" if isinstance(value, dict) else _KINDS.get(type(value), type(value).__name__)


def parse_workflow(data: Any, source: str = "workflow") -> WorkflowSpec:
    """Validate plain data (e.g. parsed YAML, or a DagWorkflow's `spec`) into a WorkflowSpec."""
    if data is None:
        raise SpecError(f"{source}: is missing or empty; give a mapping with a 'stages' list")
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping with a 'stages' list, got {describe(data)}")
    if "stages" in data and isinstance(data["stages"], list) and not data["stages"]:
        raise SpecError(f"{source}: the workflow has no stages; add at least one")
    try:
        return WorkflowSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{source}: {describe_validation_error(exc, WorkflowSpec)}") from None
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None


def describe_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One readable sentence per pydantic error, with the path into the document, joined by
    ``"; "`` (the first five, then how many more); see :func:`validation_problems`."""
    problems = validation_problems(exc, model)
    parts = [f"{loc}: {msg}" if loc else msg for loc, msg in problems[:5]]
    if len(problems) > 5:
        parts.append(f"and {len(problems) - 5} more problem(s)")
    return "; ".join(parts)


def validation_problems(
    exc: ValidationError, model: type[BaseModel] | None = None
) -> list[tuple[str, str]]:
    """(path into the document, sentence) of each pydantic error, e.g.
    ``("stages[1].tasks", "must be an integer, not the string '3' (remove the quotes)")``;
    the path is empty for the document itself. `model` (the model validated) lets an
    unknown field be answered with the field it most likely meant."""
    errors = exc.errors()
    # a bad stage also makes pydantic report the stage list as too short: noise
    nested = any(len(e["loc"]) > 1 for e in errors)
    errors = [e for e in errors if not (nested and e["type"] == "too_short")]
    out = []
    for err in errors:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        out.append((loc.lstrip("."), _sentence(err, model)))
    return out


_TYPE_NAMES = {"int_type": "an integer", "bool_type": "true or false", "float_type": "a number"}


def not_a_string(value: float) -> str:
    """What to say of a number or boolean where a string belongs: YAML reads ``5`` and
    ``true`` unquoted as a number and a boolean, so the fix is quotes."""
    text = json.dumps(value)
    return f"must be a string, not {text}: quote it ('{text}')"


def not_a_field(key: object, fields: typing.Sequence[str]) -> str:
    """What to say of an unknown `key` where `fields` are taken (empty: not known), after
    its place: the one wording of an unknown field of a manifest and of a queues file."""
    if fields:
        close = difflib.get_close_matches(str(key), fields, n=1)
        if close:
            return f"is not a field here; did you mean {close[0]}?"
        return f"is not a field here; the fields are {', '.join(fields)}"
    return "is not a field here; remove it"


def _sentence(err: Any, model: type[BaseModel] | None) -> str:
    """Pydantic's message for one error, said in the manifest's terms where it is unclear."""
    kind, value, loc = err["type"], err.get("input"), err["loc"]
    if kind == "extra_forbidden" and loc:
        return not_a_field(loc[-1], _fields_at(model, loc[:-1]))
    if kind in _TYPE_NAMES and isinstance(value, str):
        return f"must be {_TYPE_NAMES[kind]}, not the string {value!r} (write it without quotes)"
    if kind in _TYPE_NAMES and isinstance(value, int | float):
        return f"must be {_TYPE_NAMES[kind]}, not {json.dumps(value)}"
    if kind == "string_type" and isinstance(value, int | float):  # e.g. a label `a: 1`
        return not_a_string(value)
    if kind in ("model_type", "model_attributes_type", "dict_type") and isinstance(value, str):
        fields = _fields_at(model, loc)
        if fields and loc and len(fields) == 1:
            return f"is an object, not a string: write {loc[-1]}: {{{fields[0]}: {value}}}"
        if fields:
            return f"is an object (a mapping with {', '.join(fields)}), not a string"
    if kind in ("model_type", "model_attributes_type", "dict_type"):  # (pydantic names a class)
        fields = _fields_at(model, loc)
        of = f" (of {', '.join(fields)})" if fields else ""
        return f"must be a mapping{of}, not {describe(value)}"
    if kind in ("tuple_type", "list_type"):
        return f"must be a list, not {describe(value)}"
    if kind == "string_pattern_mismatch":
        meaning = PATTERN_MEANINGS.get(str((err.get("ctx") or {}).get("pattern")))
        if meaning:
            return f"{value!r} {meaning}" if isinstance(value, str) else meaning
    return str(err["msg"]).removeprefix("Value error, ")


def _fields_at(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> list[str]:
    """The field names (their aliases, as written in a manifest) of the model found at
    `loc` under `model`; empty if there is none there."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):  # an item of a list: the model of the list's items
            continue
        field = next(
            (f for n, f in model.model_fields.items() if part in (n, f.alias)),
            None,
        )
        model = _model_in(field.annotation) if field is not None else None
    if model is None:
        return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field's type holds (``PodGC | None``, ``tuple[StageSpec, ...]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class WorkflowItem:
    """One workflow document of a file, before validation."""

    source: str
    """Where it is, for error messages, e.g. "runs.yaml (workflow #2)"."""
    spec: Any
    """The workflow mapping (a DagWorkflow's `spec`), as parsed."""
    raw: Any
    """The whole item as parsed (the DagWorkflow resource itself, or the same as `spec`)."""
    name: str | None
    """A DagWorkflow's `metadata.name`, else None."""


def json_lines(text: str, path: Path) -> list[Any]:
    """The objects of a JSON Lines file's `text`; SpecError naming the line that is not
    JSON (a sink cut short when its writer stopped: its last line), not "line 1" of the
    line alone with advice to give YAML."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json_document(line))
        except json.JSONDecodeError as exc:
            raise SpecError(
                f"{path} line {n}, column {exc.colno}: {exc.msg}; each line of a .jsonl file is "
                "one JSON object: remove or complete that line (one cut short when its "
                "writer stopped)"
            ) from None
    return out


def read_workflow_items(path: str | Path) -> list[WorkflowItem]:
    """The workflow documents of a YAML or JSON file, unvalidated (see `load_workflow_file`)."""
    p = Path(path)
    text = read_text(
        p,
        "workflow file",
        "give a workflow or history file in YAML or JSON (docs/workloads.md)",
        SpecError,
    )
    try:
        if p.suffix == ".json":
            docs = [json_document(text)]
        elif p.suffix == ".jsonl":  # JSON Lines, e.g. the operator's history sink
            docs = json_lines(text, p)
        else:
            docs = [d for d in yaml.load_all(text, Loader=YamlLoader) if d is not None]
    except YamlRefusal as exc:
        raise SpecError(exc.at(str(p))) from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if p.suffix in (".json", ".jsonl") else "YAML"
        raise SpecError(
            f"{p} is not valid {kind} ({exc}); give a workflow or history file in YAML, or in "
            "JSON named .json (docs/workloads.md)"
        ) from None
    items: list[Any] = []
    for doc in docs:
        items.extend(doc if isinstance(doc, list) else [doc])
    if not items:
        raise SpecError(
            f"{p} holds no workflow; give a workflow (a mapping with a 'stages' list), a "
            "list of them, or a history file (a list of workflows with their submitTime, "
            "as idlegate history export writes; docs/workloads.md)"
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("kind") == "DagWorkflow":
            name = str((item.get("metadata") or {}).get("name", f"#{i}"))
            out.append(WorkflowItem(f"{p} (DagWorkflow {name})", item.get("spec"), item, name))
        else:
            out.append(WorkflowItem(f"{p} (workflow #{i})", item, item, None))
    return out


MUTABLE = ("suspend", "active_deadline_seconds", "ttl_seconds_after_finished", "pod_gc")
"""Spec fields an admitted workflow may change (the rest of its spec is fixed: the
operator's `operator.core.lifecycle`; deploy/README.md, "Cleanup, deadlines and suspend")."""


def only_mutable_changed(old: WorkflowSpec, new: WorkflowSpec) -> bool:
    """`new` differs from `old` in `MUTABLE` fields only."""
    return new.model_copy(update={f: getattr(old, f) for f in MUTABLE}) == old
