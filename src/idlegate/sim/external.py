"""What the mappings of other systems' workflows share (Argo's `idlegate.sim.argo`,
Airflow's `idlegate.sim.airflow`): the duration rule that estimates a stage's tasks (a
history lookup, else the system's own estimate, else a prior), where an estimate came
from, and the job model's bound on retries. Pure, as the mappings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Protocol

from idlegate.sim.spec import WorkflowSpec

DEFAULT_PRIOR = 60.0
"""Estimate of a pod without history or annotation: a minute."""

MAX_RETRIES = 100
"""The job model's most retries of a task (`StageSpec.backoff_limit`)."""

DurationLookup = Callable[[str, str], float | None]
"""(template key, stage name) -> seconds per pod from a history, or None."""


class DurationSource(StrEnum):
    """Where a stage's task-duration estimate came from (for Events and lint)."""

    HISTORY = "history"
    """The history lookup (by workflow template and task)."""
    ANNOTATION = "annotation"
    """The template's annotation ``idlegate.io/task-duration-seconds``."""
    PRIOR = "prior"
    """Neither: the mapping's prior."""


class DurationHistory:
    """The history lookup of the duration rule, by (template key, stage): the mean of the
    most recent measured pod run times (at most `keep` per stage), None where nothing was
    measured. Call it as a `DurationLookup`; `add` what a finished run measured."""

    def __init__(self, keep: int = 50) -> None:
        self.keep = keep
        self._seen: dict[tuple[str, str], deque[float]] = {}

    def add(
        self,
        template: str,
        stages: Iterable[str],
        measured: Iterable[tuple[float, ...] | None],
    ) -> None:
        """One run of `template`: per stage (by name), its measured pod run times."""
        for stage, values in zip(stages, measured, strict=True):
            if values:
                kept = self._seen.setdefault((template, stage), deque(maxlen=self.keep))
                kept.extend(v for v in values if v > 0)

    def __call__(self, template: str, stage: str) -> float | None:
        kept = self._seen.get((template, stage))
        return sum(kept) / len(kept) if kept else None

    def __len__(self) -> int:
        return len(self._seen)


class Mapped(Protocol):
    """A kind's mapping of one workflow as it stands (Argo's `ArgoJob`): its job to
    schedule (`spec`: the stages that may still run), and each stage's key by name, as
    its pods name it (`stage_keys`, `ExternalPod.stage_key`)."""

    @property
    def stage_keys(self) -> Mapping[str, str]: ...
    def spec(self) -> WorkflowSpec: ...
