"""A change of workload seen in the workflows arriving (`ArrivalWatch`).

The rounds see a change of workload in the workflows that *finish* (`scheduler`,
`change`), and on a cluster of minute-scale pods that queue behind the old workload's
backlog the first ten of the new ones finish half an hour after the switch. The
workflows *arriving* say it at once: their DAGs (`prior.workflow_features`: the log of
their task count, stage count and mean task duration, what the prior's lookup reads) are
unlike those of the workload so far.

An arriving workflow is *foreign* when one of its features is more than `ARRIVAL_Z`
standard deviations (at least `FEATURE_FLOOR`, in logs: one-task jobs all have one task)
from that feature's mean over the workflows arrived since the last change (at least
`ARRIVAL_MIN` of them; the foreign ones are left out of those until a workflow that is
not breaks their run). `ARRIVAL_RUN` foreign workflows in a row are a change; the new
workload starts at the first of them, and its mean and spread are learned afresh from
them on. A mix of two kinds of DAGs (``mixed``) has a wide spread and stays one
workload; a run of three workflows that far out does not happen by chance within a
workload of the evaluation suite: on 1,000-workflow streams of every workload of the
suite, ten tuning seeds (2000–2009), this finds no change, and on `shift` it finds the
switch at its third pod (docs/research/brain-results.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Generic, NamedTuple, TypeVar

__all__ = ["ARRIVAL_MIN", "ARRIVAL_RUN", "ARRIVAL_Z", "FEATURE_FLOOR", "ArrivalWatch", "Seen"]

ARRIVAL_Z: Final = 4.0
"""Standard deviations from the workload's mean that make an arriving workflow foreign."""
ARRIVAL_RUN: Final = 3
"""Foreign workflows in a row that are a change of workload."""
ARRIVAL_MIN: Final = 16
"""Workflows of a workload before a change away from it can be seen."""
FEATURE_FLOOR: Final = 0.25
"""The least standard deviation of a feature (in logs) a distance is measured in."""

T = TypeVar("T")


class Seen(NamedTuple):
    """A workflow as a scheduler saw it arrive (the tag it gives `ArrivalWatch`)."""

    id: int
    """Its job's id (`Job.id`: the cluster gives each job it admits the next one)."""
    time: float
    """Its arrival."""
    order: int
    """The workflows seen arriving before it: a count, where ids may skip (a job admitted
    and gone between two decisions) or not start at 0 (a scheduler that replaces another
    on a cluster already running)."""


class ArrivalWatch(Generic[T]):
    """Watches the features of the workflows arriving, in arrival order, for a change of
    workload (module docstring). Each workflow comes with a tag (e.g. its arrival), and a
    change names the tag of the new workload's first workflow."""

    def __init__(self) -> None:
        self._count = 0
        self._sums: list[float] = []
        self._squares: list[float] = []
        self._foreign: list[tuple[T, Sequence[float]]] = []
        """The foreign arrivals of the present run, with their tags: kept out of the
        workload's mean and spread until the run breaks (they would widen the spread the
        next one is measured in), the new workload's first ones if it does not."""

    def see(self, tag: T, features: Sequence[float]) -> T | None:
        """Take the next workflow arrived; the tag of the new workload's first workflow
        when this one completes a change (the run of foreign ones), else None."""
        if not self._is_foreign(features):
            for _, f in self._foreign:  # (a run broken: outliers of the same workload)
                self._add(f)
            self._foreign.clear()
            self._add(features)
            return None
        self._foreign.append((tag, features))
        if len(self._foreign) < ARRIVAL_RUN:
            return None
        first = self._foreign[0][0]
        self._count, self._sums, self._squares = 0, [], []
        for _, f in self._foreign:
            self._add(f)
        self._foreign.clear()
        return first

    def _is_foreign(self, features: Sequence[float]) -> bool:
        n = self._count
        if n < ARRIVAL_MIN:
            return False
        for x, s, q in zip(features, self._sums, self._squares, strict=True):
            mean = s / n
            spread = max(math.sqrt(max(q / n - mean * mean, 0.0)), FEATURE_FLOOR)
            if abs(x - mean) > ARRIVAL_Z * spread:
                return True
        return False

    def _add(self, features: Sequence[float]) -> None:
        if not self._sums:
            self._sums, self._squares = [0.0] * len(features), [0.0] * len(features)
        self._count += 1
        for i, x in enumerate(features):
            self._sums[i] += x
            self._squares[i] += x * x
