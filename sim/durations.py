"""Task-duration models: how long a launched task really runs (the simulator's side only).

Schedulers see the estimate (`taskDurationSeconds`); the simulator samples the real
duration from the job's model. All randomness comes from the run's one Generator
through a `Uniforms` stream, so a seed fixes every duration.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class Uniforms:
    """Uniform [0, 1) numbers drawn from a numpy Generator in blocks (one Python float each)."""

    __slots__ = ("_buf", "_i", "_rng", "block")

    def __init__(self, rng: np.random.Generator, block: int = 4096) -> None:
        self._rng = rng
        self.block = block
        self._buf: list[float] = []
        self._i = 0

    def next(self) -> float:
        i = self._i
        if i == len(self._buf):
            self._buf = self._rng.random(self.block).tolist()
            i = 0
        self._i = i + 1
        return self._buf[i]


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


def _pick(values: tuple[float, ...], u: Uniforms) -> float:
    return values[int(u.next() * len(values))]


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
    _keys: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keys", tuple(s.keys for s in self.stages))

    def key_index(self, stage: int, executors: int, u: Uniforms) -> int:
        keys = self._keys[stage]
        if executors <= keys[0]:
            return 0
        if executors >= keys[-1]:
            return len(keys) - 1
        right = bisect_left(keys, executors)
        if keys[right] == executors:
            return right
        left = right - 1
        lo, hi = keys[left], keys[right]
        return right if u.next() * (hi - lo) < executors - lo else left

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        waves = self.stages[stage]
        k = self.key_index(stage, job_executors, u)
        if moved:
            if waves.fresh[k]:
                return _pick(waves.fresh[k], u)
            if waves.first_wave[k]:
                return _pick(waves.first_wave[k], u) + self.warmup_delay
        elif not first and waves.rest_wave[k]:
            return _pick(waves.rest_wave[k], u)
        for row in (waves.first_wave[k], waves.fresh[k], waves.rest_wave[k]):
            if row:
                return _pick(row, u)
        return waves.mean

