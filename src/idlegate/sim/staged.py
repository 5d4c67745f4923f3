"""What a mapped job's stages mean once some of them are skipped: shared by the Argo and
Airflow job models.

An `ArgoJob` and an `AirflowJob` both hold stages that a run may show skipped. A skipped
stage never runs, so it is left out of the job's `WorkflowSpec`, and its dependents wait
for what it waited for instead (passed through, transitively). These functions do that
for any stage with the fields of `MappedStage`, so both models keep one behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import StageSpec, WorkflowSpec


class MappedStage(Protocol):
    """The fields of a mapped stage these functions read."""

    @property
    def name(self) -> str: ...
    @property
    def tasks(self) -> int: ...
    @property
    def duration(self) -> float: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def retries(self) -> int: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def demand(self) -> ResourceVector: ...


S = TypeVar("S", bound=MappedStage)


def live(stages: Iterable[S]) -> tuple[S, ...]:
    """The stages that may still run (not shown skipped)."""
    return tuple(s for s in stages if not s.skipped)


def find(stages: Iterable[S], name: str) -> S:
    """The stage called `name`; KeyError if there is none."""
    for s in stages:
        if s.name == name:
            return s
    raise KeyError(name)


def counts(spec: WorkflowSpec) -> dict[str, int]:
    """Stages, edges and tasks of `spec`."""
    return {
        "stages": len(spec.stages),
        "edges": sum(len(s.depends_on) for s in spec.stages),
        "tasks": sum(s.tasks for s in spec.stages),
    }


def live_specs(stages: Sequence[MappedStage]) -> tuple[StageSpec, ...]:
    """The live stages as StageSpecs, a skipped stage's dependencies passed through to its
    dependents (empty if every stage is skipped)."""
    by_name = {s.name: s for s in stages}
    resolved: dict[str, tuple[str, ...]] = {}

    def through(name: str) -> tuple[str, ...]:
        # what a stage's dependents wait for: itself, or (skipped) its own dependencies
        if name not in resolved:
            stage = by_name[name]
            resolved[name] = (
                (name,)
                if not stage.skipped
                else _unique(d for p in stage.depends_on for d in through(p))
            )
        return resolved[name]

    return tuple(
        StageSpec(
            name=s.name,
            tasks=s.tasks,
            task_duration_seconds=s.duration,
            depends_on=_unique(d for p in s.depends_on for d in through(p)),
            backoff_limit=s.retries,
            resources=s.demand.to_list() or None,
        )
        for s in live(stages)
    )


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
