"""What an Airflow DAG run maps to: `AirflowJob` (stages, edges, priorities, what is left out).

An `AirflowJob` is the job model of one DAG (or one run of it): its `stages`, each the task
instances of one Airflow task (one for a plain task, N for a mapped one) that run after
their `depends_on` stages finish, the DAG's `max_active_tasks`, and the tasks left to
Airflow (`left`: sensors, deferrable tasks and tasks that run no pod), each with its
reason. `AirflowJob.spec()` is the same job as an `AirflowSpec`, a `WorkflowSpec` that also
carries each stage's Airflow priority (`priority_weight` under its weight rule) for the
`airflow` baseline scheduler; stages the run skipped are left out of it, their dependents
wired to what they depended on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import Field, model_validator

from idlegate.errors import SpecError
from idlegate.sim import staged
from idlegate.sim.external import DurationSource
from idlegate.sim.resources import EMPTY, ResourceVector
from idlegate.sim.spec import WorkflowSpec


class AirflowRefusalReason(StrEnum):
    """Why a DAG does not map to a job (`AirflowRefusal.reason`)."""

    NOT_A_DAG = "not-a-dag"
    """The document is no Airflow DAG export (no `dag` with a `dag_id`, no `tasks`)."""
    INVALID = "invalid"
    """A field does not have the shape Airflow's REST API gives it."""
    BAD_DAG = "bad-dag"
    """A downstream task that does not exist, or a cycle."""
    NO_TASKS = "no-tasks"
    """Every task is left to Airflow (or the DAG has none): nothing to schedule."""
    TOO_MANY_STAGES = "too-many-stages"
    """More tasks, or a wider mapped task, than a job may have."""
    CHANGED = "changed"
    """A run's task instances do not fit the DAG's tasks: the DAG changed since."""


LEFT_TO_AIRFLOW = frozenset({AirflowRefusalReason.NO_TASKS, AirflowRefusalReason.TOO_MANY_STAGES})
"""Refusals of a DAG that is valid for Airflow and simply left to it (lint's note, a
history file's DAG skipped with a warning), not of a broken export (an error)."""


class AirflowRefusal(SpecError):
    """A DAG (or run) that does not map to a job; `reason` says which rule refused it and
    the message says why in a sentence, after `where` the DAG is (a file's item) if given."""

    def __init__(
        self, reason: AirflowRefusalReason, message: str, *, where: str | None = None
    ) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.reason, self.why, self.where = reason, message, where

    @property
    def left_to_airflow(self) -> bool:
        """The DAG is valid for Airflow and left to it (`LEFT_TO_AIRFLOW`)."""
        return self.reason in LEFT_TO_AIRFLOW

    def note(self) -> str:
        """The refusal as lint notes it, the reason before the sentence (a history file's
        warning says the same)."""
        place = f"{self.where}: " if self.where else ""
        return f"{place}not scheduled by idlegate ({self.reason}): {self.why}"


class LeftReason(StrEnum):
    """Why a task is left to Airflow rather than scheduled (`LeftTask.reason`)."""

    SENSOR = "sensor"
    """A sensor waits for something outside the DAG for as long as it takes: no estimate
    of its run time means anything, and in reschedule mode it is many short pods."""
    DEFERRABLE = "deferrable"
    """A deferrable task hands its wait to Airflow's triggerer and comes back as a new
    pod: its run is not one pod of a known length."""
    NO_POD = "no-pod"
    """Airflow marks it done without running it (an EmptyOperator)."""


class AirflowCondition(StrEnum):
    """Why a stage may not run at all (`AirflowStage.condition`)."""

    BRANCH = "branch"
    """It is downstream of a branching task (a branch or short-circuit operator), which
    may skip it."""
    TRIGGER_RULE = "trigger-rule"
    """Its trigger rule is not `all_success`, `all_done` or `always`: it runs or is
    skipped by how its upstream tasks end."""


@dataclass(frozen=True)
class LeftTask:
    """A task of the DAG that idlegate leaves to Airflow (its pods run as Airflow starts
    them), its dependents waiting for what it waited for."""

    task_id: str
    reason: LeftReason
    message: str
    """Why, in a sentence."""


@dataclass(frozen=True)
class AirflowStage:
    """One stage: the task instances of one Airflow task (a mapped task's every index)."""

    name: str
    """Stage name in the job (a DNS label derived from `task_id`)."""
    task_id: str
    """Airflow's task id (a task group's prefix included, e.g. ``section_1.task_2``)."""
    operator: str
    """The task's operator class (``class_ref.class_name``, else ``operator_name``)."""
    tasks: int
    """Task instances of the stage: a mapped task's map indexes, else 1."""
    tasks_known: bool
    """False for a mapped task whose size only the run shows (`tasks` is 1 until then)."""
    duration: float
    """Estimated seconds per task instance."""
    duration_source: DurationSource
    depends_on: tuple[str, ...]
    """Stages (by name) that must finish first."""
    priority: float
    """Airflow's priority of its task instances: `priority_weight` under the task's weight
    rule (downstream: its own plus every downstream task's)."""
    retries: int = 0
    """The task's `retries` (capped at 100)."""
    demand: ResourceVector = EMPTY
    """What one of its task instances' pods requests (empty: nothing known)."""
    condition: AirflowCondition | None = None
    """Why the stage may be skipped, if it may."""
    skipped: bool = False
    """The run shows it skipped (or removed): it will not run."""

    @property
    def where(self) -> str:
        """Where it is in the DAG, as messages say it."""
        return f"Airflow task {self.task_id!r}"


class AirflowSpec(WorkflowSpec):
    """A `WorkflowSpec` mapped from an Airflow DAG: also each stage's priority and the
    DAG's `max_active_tasks`."""

    priorities: tuple[float, ...] = Field(
        default=(),
        description="Airflow's priority of each stage's task instances, in stage order.",
    )
    max_active_tasks: int | None = Field(
        default=None,
        ge=1,
        description="Airflow's max_active_tasks: most task instances of the DAG at once.",
    )

    @model_validator(mode="after")
    def _one_priority_per_stage(self) -> AirflowSpec:
        if self.priorities and len(self.priorities) != len(self.stages):
            raise SpecError(
                f"priorities gives {len(self.priorities)} values for {len(self.stages)} stages; "
                "give one per stage, in stage order"
            )
        return self


@dataclass(frozen=True)
class AirflowJob:
    """One Airflow DAG (or one run of it) as a job (see the module docstring)."""

    dag_id: str
    stages: tuple[AirflowStage, ...]
    left: tuple[LeftTask, ...] = ()
    """The tasks left to Airflow, in the DAG's order."""
    max_active_tasks: int | None = None
    """The DAG's `max_active_tasks` (None: not given)."""
    run_id: str | None = None
    """The DAG run whose task instances settled it (None: the DAG alone)."""
    notes: tuple[str, ...] = field(default=())
    """What the mapping approximated, one sentence each."""

    @property
    def template_key(self) -> str:
        """What a history is looked up by: ``airflow:`` and the DAG id (every run of a DAG
        shares it; the prefix keeps it apart from Argo's template names)."""
        return f"airflow:{self.dag_id}"

    @property
    def stage_keys(self) -> dict[str, str]:
        """Stage name of `spec` -> its task id (what the task's worker pods name it by)."""
        return {s.name: s.task_id for s in self.live_stages}

    @property
    def live_stages(self) -> tuple[AirflowStage, ...]:
        """The stages that may still run (not shown skipped)."""
        return staged.live(self.stages)

    def stage(self, name: str) -> AirflowStage:
        """The stage called `name`; KeyError if there is none."""
        return staged.find(self.stages, name)

    @property
    def counts(self) -> dict[str, int]:
        """Stages, edges and task instances of the job (skipped stages left out)."""
        return staged.counts(self.spec())

    def spec(self) -> AirflowSpec:
        """The job as a WorkflowSpec; skipped stages left out, dependencies passed through."""
        live = self.live_stages
        if not live:
            raise AirflowRefusal(
                AirflowRefusalReason.NO_TASKS,
                f"DAG {self.dag_id}: every task was skipped or left to Airflow, so no task "
                "is left to schedule",
            )
        stages = staged.live_specs(self.stages)
        return AirflowSpec(
            stages=stages,
            priorities=tuple(s.priority for s in live),
            max_active_tasks=self.max_active_tasks,
        )
