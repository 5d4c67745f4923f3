"""What an Argo Workflow maps to: `ArgoJob` (stages, edges, where each estimate came from).

An `ArgoJob` is the job model of one Argo Workflow at one moment: its `stages`, each a
set of identical pods that run after their `depends_on` stages finish, the workflow's
`parallelism`, and what the mapping had to leave open (fan-outs whose size is known only
as the workflow runs, conditions not decided yet). `ArgoJob.spec()` is the same job as a
`WorkflowSpec` (an `ArgoSpec`, which also carries `parallelism`) that the simulator, the
schedulers and the cluster state machine run on; stages that `status.nodes` shows as
skipped are left out of it, their dependents wired to what they depended on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import Field

from idlegate.errors import SpecError
from idlegate.sim import staged
from idlegate.sim.external import DurationSource
from idlegate.sim.resources import EMPTY, ResourceVector
from idlegate.sim.spec import WorkflowSpec


class ArgoRefusalReason(StrEnum):
    """Why a manifest does not map to a job (`ArgoRefusal.reason`)."""

    NOT_A_WORKFLOW = "not-a-workflow"
    NO_ENTRYPOINT = "no-entrypoint"
    MISSING_TEMPLATE = "missing-template"
    MISSING_WORKFLOW_TEMPLATE = "missing-workflow-template"
    RECURSION = "recursion"
    DAEMON = "daemon"
    NO_PODS = "no-pods"
    TOO_MANY_STAGES = "too-many-stages"
    BAD_DAG = "bad-dag"
    INVALID = "invalid"


class ArgoRefusal(SpecError):
    """A manifest that does not map to a job; `reason` says which rule refused it and the
    message says why in a sentence."""

    def __init__(self, reason: ArgoRefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ArgoCondition(StrEnum):
    """Why a stage may not run at all (`ArgoStage.condition`)."""

    WHEN = "when"
    """It (or a template it is nested in) has a `when` expression."""
    DEPENDS = "depends"
    """Its `depends` expression can be true without every dependency succeeding (it names
    `.Failed`, `.Errored`, `.Skipped`, `.Omitted`, `.AnyFailed` or `||`/`!`)."""
    HOOK = "hook"
    """It is a lifecycle hook or an exit handler of a failure."""


@dataclass(frozen=True)
class ArgoStage:
    """One stage: the pods of one Argo node that runs a pod template, fan-out included."""

    name: str
    """Stage name in the job (a DNS label derived from `path`)."""
    path: str
    """Argo's node name of the node, relative to the workflow's (e.g. ``.A``,
    ``[0].hello1``, ``.B(1).C``: fan-out copy 1 of B's nested template, task C)."""
    template: str
    """The Argo template whose pods these are."""
    tasks: int
    """Pods of the stage (the fan-out's items, else 1)."""
    tasks_known: bool
    """False while the fan-out's size depends on what the workflow computes
    (`withParam` over an output): `tasks` is then 1 until `status.nodes` shows it."""
    duration: float
    """Estimated seconds per pod."""
    duration_source: DurationSource
    depends_on: tuple[str, ...]
    """Stages (by name) that must finish first."""
    retries: int = 0
    """The template's `retryStrategy.limit` (capped at 100), 0 without one."""
    demand: ResourceVector = EMPTY
    """What one of its pods requests (`idlegate.sim.argo.requests`; empty: nothing)."""
    condition: ArgoCondition | None = None
    """Why the stage may be skipped, if it may."""
    skipped: bool = False
    """`status.nodes` shows it skipped or omitted: it will not run."""

    @property
    def where(self) -> str:
        """Where it is in the Workflow, as messages say it."""
        return f"Argo's node {self.path or 'at the entrypoint'}, template {self.template!r}"


class ArgoSpec(WorkflowSpec):
    """A `WorkflowSpec` mapped from an Argo Workflow: also Argo's `parallelism`."""

    parallelism: int | None = Field(
        default=None,
        ge=1,
        description="Argo's spec.parallelism: most pods of the workflow running at once.",
    )


@dataclass(frozen=True)
class ArgoJob:
    """One Argo Workflow as a job (see the module docstring)."""

    name: str
    """The workflow's name (``metadata.name``, else its generateName's stem)."""
    kind: str
    """Workflow, WorkflowTemplate, ClusterWorkflowTemplate or CronWorkflow."""
    template_key: str
    """What a history is looked up by: the WorkflowTemplate it runs (workflowTemplateRef,
    or the label ``workflows.argoproj.io/workflow-template``), else its generateName
    without the trailing '-' (the same for every run), else its name."""
    stages: tuple[ArgoStage, ...]
    parallelism: int | None = None
    """Argo's ``spec.parallelism`` (None: unlimited)."""
    notes: tuple[str, ...] = field(default=())
    """What the mapping approximated, one sentence each (e.g. a suspend step passed
    through)."""

    @property
    def live_stages(self) -> tuple[ArgoStage, ...]:
        """The stages that may still run (not shown skipped)."""
        return staged.live(self.stages)

    @property
    def stage_keys(self) -> dict[str, str]:
        """Live stage name -> its path, by which its pods name it (`ArgoPod.stage_key`)."""
        return {s.name: s.path for s in self.live_stages}

    def stage(self, name: str) -> ArgoStage:
        """The stage called `name`; KeyError if there is none."""
        return staged.find(self.stages, name)

    @property
    def counts(self) -> dict[str, int]:
        """Stages, edges and pods of the job (skipped stages left out)."""
        return staged.counts(self.spec())

    @property
    def open_questions(self) -> dict[str, int]:
        """How many live stages have an unknown fan-out, and how many may be skipped."""
        live = self.live_stages
        return {
            "unknown_fanout": sum(not s.tasks_known for s in live),
            "conditional": sum(s.condition is not None for s in live),
        }

    def spec(self) -> ArgoSpec:
        """The job as a WorkflowSpec; skipped stages left out, dependencies passed through."""
        stages = staged.live_specs(self.stages)
        if not stages:
            raise ArgoRefusal(
                ArgoRefusalReason.NO_PODS,
                f"{self.kind} {self.name}: every stage is skipped, so no pod is left to schedule",
            )
        return ArgoSpec(stages=stages, parallelism=self.parallelism)
