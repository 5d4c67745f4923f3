"""Task-duration models: how long a launched task really runs (the simulator's side only).

Schedulers see the estimate (`taskDurationSeconds`); the simulator samples the real
duration from the job's model. All randomness comes from the run's one Generator
through a `Uniforms` stream, so a seed fixes every duration.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from idlegate.sim.task_times import LiveTimes


class Uniforms:
    """Uniform [0, 1) draws for per-task sampling, rooted in the run's numpy Generator.

    A scalar draw from a numpy Generator costs about ten times a C-level call, and the
    simulator makes one or two per task, so `next` is a Mersenne Twister seeded from
    the run's Generator: the run still has a single seed, and the same seed still gives
    the same draws.
    """

    __slots__ = ("next",)

    def __init__(self, rng: np.random.Generator) -> None:
        self.next: Callable[[], float] = random.Random(int(rng.integers(2**63))).random


class DurationModel(Protocol):
    """Samples a task's duration in seconds when the task is launched."""

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        """`first`: first task of this executor on the stage; `moved`: executor new to the job."""


@dataclass(frozen=True)
class StageWaves:
    """Measured task durations of one stage in seconds, keyed by the executor count measured at.

    `first_wave` has the fresh durations already removed and empty keys filled from the
    nearest lower key, as Decima's loader does.
    """

    keys: tuple[int, ...]
    first_wave: tuple[tuple[float, ...], ...]
    rest_wave: tuple[tuple[float, ...], ...]
    fresh: tuple[tuple[float, ...], ...]
    mean: float

    @classmethod
    def from_ms(
        cls,
        first_wave: Mapping[int, Sequence[float]],
        rest_wave: Mapping[int, Sequence[float]],
        fresh: Mapping[int, Sequence[float]],
    ) -> StageWaves:
        keys = tuple(sorted(first_wave))
        cleaned: list[tuple[float, ...]] = []
        last: tuple[float, ...] = ()
        for k in keys:
            pending = list(fresh.get(k, ()))
            kept = []
            for d in first_wave[k]:
                if d in pending:
                    pending.remove(d)  # each fresh value removes one equal first-wave value
                else:
                    kept.append(d / 1000.0)
            row = tuple(kept) or last
            cleaned.append(row)
            last = row
        rest = tuple(tuple(d / 1000.0 for d in rest_wave.get(k, ())) for k in keys)
        fr = tuple(tuple(d / 1000.0 for d in fresh.get(k, ())) for k in keys)
        every = [d for rows in (cleaned, rest, fr) for row in rows for d in row]
        mean = float(np.mean(every)) if every else 0.0
        return cls(keys, tuple(cleaned), rest, fr, mean)


@dataclass(frozen=True)
class WaveDurations:
    """Decima's TPC-H duration model: measured waves, interpolated between executor counts.

    * the executor count is the job's busy executors at launch; between two measured
      counts the lower or upper one is drawn with linear-interpolation odds (Decima draws
      the same two, with the odds the other way round; we interpolate as documented);
    * an executor new to the job draws from `fresh` (JVM warm-up) or, when none were
      measured, from the first wave plus `warmup_delay`;
    * an executor continuing on its stage draws from the rest wave, any other first task
      from the first wave.
    """

    stages: tuple[StageWaves, ...]
    warmup_delay: float = 1.0
    _draws: tuple[tuple[_DrawTable, ...], ...] = field(init=False, repr=False, compare=False)
    """Per kind of task (moved, first, rest) and stage: `_interpolation` with each key
    index replaced by the row `sample` draws from there and what it adds (`_choice`);
    `sample` runs once per task, so its fallbacks are resolved here, once."""

    def __post_init__(self) -> None:
        interp = tuple(_interpolation(s.keys) for s in self.stages)
        draws = []
        for kind in _KINDS:
            per_stage = []
            for waves, table in zip(self.stages, interp, strict=True):
                choices = [
                    _choice(waves, k, kind, self.warmup_delay) for k in range(len(waves.keys))
                ]
                per_stage.append(tuple((choices[lo], choices[hi], p) for lo, hi, p in table))
            draws.append(tuple(per_stage))
        object.__setattr__(self, "_draws", tuple(draws))

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        table = self._draws[0 if moved else 1 if first else 2][stage]
        left, right, p_right = table[job_executors if job_executors < len(table) else -1]
        row, add = right if p_right and u.next() < p_right else left
        if row:
            return row[int(u.next() * len(row))] + add
        return add


_KINDS = ("moved", "first", "rest")
_Choice = tuple[tuple[float, ...], float]
_DrawTable = tuple[tuple[_Choice, _Choice, float], ...]


def _choice(waves: StageWaves, k: int, kind: str, warmup_delay: float) -> _Choice:
    """(row, added seconds) a task of `kind` draws from at key index `k` (an empty row: it
    takes the added seconds, the stage's mean, without a draw).

    A moved executor draws a fresh duration, else a first-wave one plus `warmup_delay`; a
    continuing one draws from the rest wave; otherwise, and when those were not measured,
    the first row measured of first wave, fresh, rest wave.
    """
    if kind == "moved":
        if waves.fresh[k]:
            return waves.fresh[k], 0.0
        if waves.first_wave[k]:
            return waves.first_wave[k], warmup_delay
    elif kind == "rest" and waves.rest_wave[k]:
        return waves.rest_wave[k], 0.0
    for row in (waves.first_wave[k], waves.fresh[k], waves.rest_wave[k]):
        if row:
            return row, 0.0
    return (), waves.mean


def _interpolation(keys: Sequence[int]) -> tuple[tuple[int, int, float], ...]:
    """Per executor count n (0..largest key): (lower key index, upper key index, P(upper)).

    Below the smallest key the smallest is used, above the largest the largest; between
    two measured counts the upper one is drawn with probability (n - lo) / (hi - lo).
    """
    table = []
    for n in range(keys[-1] + 1):
        right = bisect_left(keys, n)
        if right == 0 or keys[right] == n:
            table.append((right, right, 0.0))
        else:
            lo, hi = keys[right - 1], keys[right]
            table.append((right - 1, right, (n - lo) / (hi - lo)))
    return tuple(table)


class MeasuredDurations:
    """The duration model of a job whose driver measures its tasks instead of sampling them.

    The operator cannot sample a pod's duration; it watches pods run. A simulation of its
    workflow (a planner's rollout) draws each task uniformly from the durations measured
    so far on that stage, and takes the stage's estimate (`taskDurationSeconds`) until
    one was measured; a forecast's replays, given the pool's own task times (`times`,
    `sim.task_times.LiveTimes`), draw such a task as one of the pool's tasks took its
    declared duration instead. Measurements include whatever the driver saw (start latency
    included); the simulator still adds its own `moving_delay`.

    `record` only appends, on the driver's thread; a planner in another thread samples
    a `frozen` copy (`duration_model` makes one).
    """

    __slots__ = ("estimates", "measured", "times")

    def __init__(
        self,
        estimates: Sequence[float],
        measured: Sequence[Sequence[float]] | None = None,
        times: LiveTimes | None = None,
    ) -> None:
        self.estimates = tuple(estimates)
        self.measured: list[Sequence[float]] = (
            [list(row) for row in measured] if measured is not None else [[] for _ in estimates]
        )
        self.times = times
        """The pool's own task times a stage with nothing measured draws from (None: its
        estimate)."""

    def record(self, stage: int, seconds: float) -> None:
        """A task of stage `stage` ran for `seconds`."""
        self.measured[stage].append(seconds)  # type: ignore[attr-defined]  # (a list: `frozen`'s tuples record nothing)

    def frozen(self, times: LiveTimes | None = None) -> MeasuredDurations:
        """A copy that later `record`s do not change (for a planner's thread), drawing
        from the pool's `times` (None: as this one does)."""
        twin = object.__new__(MeasuredDurations)
        twin.estimates = self.estimates
        twin.measured = [tuple(row) for row in self.measured]
        twin.times = self.times if times is None else times
        return twin

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        row, times = self.measured[stage], self.times
        if row:  # (with the pool's times, a stage's start adds their dispatch delay too)
            ran = row[int(u.next() * len(row))]
            return ran + times.delay(u.next) if first and times is not None else ran
        if times is not None and times.usable:
            return times.draw(self.estimates[stage], u.next, first)
        return self.estimates[stage]


def duration_model(payload: object) -> DurationModel | None:
    """The duration model that simulates a job with driver data `payload` (None: estimates).

    In the simulator the payload is the model itself (or None). Any other driver keeps its
    own object there (the operator's Workflow); it offers a model as its ``durations``
    attribute (a `MeasuredDurations`, copied with `frozen`), or nothing, and then a
    simulation takes every task's estimate.
    """
    if payload is None or callable(getattr(payload, "sample", None)):
        return payload  # type: ignore[return-value]  # (duck-typed: it has `sample`)
    model = getattr(payload, "durations", None)
    if isinstance(model, MeasuredDurations):
        return model.frozen()
    return model if callable(getattr(model, "sample", None)) else None
