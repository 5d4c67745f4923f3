"""Seeds, arrival arithmetic, and the option models every workload shares.

`as_rng`/`split_streams` turn a seed into the two independent streams (job content,
arrival gaps) that keep comparisons on common random numbers; `ArrivalOptions` picks the
mean interarrival (given, as a rate, or from a target load) and `StreamOptions` counts the
jobs of a stream (`init` at t=0 plus `num_stream` Poisson arrivals).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import Field, model_validator

from idlegate.errors import IdlegateError
from idlegate.sim.engine import Fidelity, JobArrival, Workload
from idlegate.sim.workloads.knobs import _Options as _Options

if TYPE_CHECKING:
    from idlegate.sim.workloads.sources import JobSource

SeedLike = int | np.random.Generator
"""A seed (int >= 0) or a numpy Generator to draw from."""

MAX_JOBS = 1_000_000


# ---------------------------------------------------------------------------------------
# randomness and arrival arithmetic


def as_rng(seed: SeedLike) -> np.random.Generator:
    """A Generator from a seed (or the Generator itself)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise IdlegateError(f"a seed must be a whole number >= 0, got {seed!r}")
    return np.random.default_rng(int(seed))


def split_streams(rng: np.random.Generator) -> tuple[np.random.Generator, np.random.Generator]:
    """Two independent Generators derived from `rng`: (job content, arrival gaps)."""
    a, b = rng.integers(2**63, size=2)
    return np.random.default_rng(int(a)), np.random.default_rng(int(b))


def poisson_times(
    rng: np.random.Generator, init: int, num_stream: int, interarrival: float
) -> list[float]:
    """`init` zeros, then `num_stream` arrivals of a Poisson process with the given mean gap.

    The gaps are unit exponentials scaled by `interarrival`, so for a fixed `rng` state a
    different mean gap stretches the same pattern.
    """
    gaps = rng.standard_exponential(num_stream) * interarrival
    return [0.0] * init + np.cumsum(gaps).tolist()


def interarrival_for_load(mean_work: float, load: float, num_executors: int) -> float:
    """The mean interarrival giving offered load `load`: mean_work / (load × executors)."""
    if not (load > 0 and mean_work > 0 and num_executors > 0):
        raise IdlegateError(
            f"cannot derive an interarrival from load {load}, mean job work {mean_work} and "
            f"{num_executors} executors; all three must be > 0"
        )
    return mean_work / (load * num_executors)


def offered_load(mean_work: float, interarrival: float, num_executors: int) -> float:
    """(mean job work / mean interarrival) / executors: the fraction of the cluster jobs ask for."""
    return mean_work / interarrival / num_executors


# ---------------------------------------------------------------------------------------
# option models (typed configs)


class ArrivalOptions(_Options):
    """How the mean interarrival is chosen: at most one of interarrival, rate, load."""

    interarrival: float | None = Field(None, gt=0)
    """Mean seconds between streamed arrivals."""
    rate: float | None = Field(None, gt=0)
    """Arrivals per second (1/interarrival)."""
    load: float | None = Field(None, gt=0, le=100)
    """Target offered load (mean job work / interarrival / executors); the interarrival is
    derived from it."""
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = None
    DEFAULT_LOAD: ClassVar[float | None] = None

    @model_validator(mode="after")
    def _one_arrival_knob(self) -> ArrivalOptions:
        given = [k for k in ("interarrival", "rate", "load") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(
                f"give at most one of interarrival, rate and load (got {', '.join(given)})"
            )
        return self

    @property
    def arrival_given(self) -> bool:
        return any(v is not None for v in (self.interarrival, self.rate, self.load))

    def mean_interarrival(self, mean_work: Callable[[], float], num_executors: int) -> float:
        """The mean gap: given directly, as 1/rate, or from a load (calls `mean_work` only then)."""
        if self.interarrival is not None:
            return self.interarrival
        if self.rate is not None:
            return 1.0 / self.rate
        load = self.load if self.load is not None else self.DEFAULT_LOAD
        if load is not None:
            return interarrival_for_load(mean_work(), load, num_executors)
        if self.DEFAULT_INTERARRIVAL is not None:
            return self.DEFAULT_INTERARRIVAL
        raise IdlegateError("give one of the options interarrival, rate or load")


def _whole(value: Any, name: str) -> int:
    """Lenient int for input-only options (CLI strings like '100' are fine)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):  # (a sign too: -5 is a whole number its bound refuses)
        with contextlib.suppress(ValueError):
            return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{name} must be a whole number, got {value!r}")


class StreamOptions(_Options):
    """`init` jobs at t=0, then `num_stream` Poisson arrivals (or give `num_jobs` in total)."""

    init: int = Field(1, ge=0, le=MAX_JOBS)
    """Jobs submitted at t=0."""
    num_stream: int = Field(200, ge=0, le=MAX_JOBS)
    """Jobs arriving after t=0 as a Poisson stream."""
    num_executors: int = Field(50, ge=1, le=100_000)
    """Executors of the cluster."""
    EXTRA_OPTIONS: ClassVar[dict[str, str]] = {
        "num_jobs": "Total jobs (init + num_stream); an alternative to num_stream."
    }

    @model_validator(mode="before")
    @classmethod
    def _total_jobs(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "num_jobs" not in data:
            return data
        data = dict(data)
        total = _whole(data.pop("num_jobs"), "num_jobs")
        if "num_stream" in data:
            raise ValueError("give num_jobs or num_stream, not both")
        init = _whole(data.get("init", cls.model_fields["init"].default), "init")
        if total < 1:
            raise ValueError(f"num_jobs ({total}) must be at least 1: a workload needs a job")
        if total > MAX_JOBS:
            raise ValueError(f"num_jobs ({total}) must be at most {MAX_JOBS}; give fewer jobs")
        if total < init:
            raise ValueError(
                f"num_jobs ({total}) counts the {init} job(s) present at the start (the "
                f"workload option init), so it must be at least {init}; give more jobs, or "
                "fewer at the start (init=0: every job arrives in the stream)"
            )
        data["num_stream"] = total - init
        return data

    @model_validator(mode="after")
    def _some_jobs(self) -> StreamOptions:
        if self.init + self.num_stream == 0:
            raise ValueError(
                "the workload has no job: the jobs at the start (the workload option init) "
                "and those arriving after them (num_stream) are both 0; give at least one"
            )
        if self.init + self.num_stream > MAX_JOBS:
            raise ValueError(f"at most {MAX_JOBS} jobs per workload")
        return self

    @property
    def num_jobs(self) -> int:
        return self.init + self.num_stream


def _fidelity(moving_delay: float, waves: bool) -> Fidelity:
    if moving_delay == 0 and not waves:
        return Fidelity.none()
    return Fidelity(moving_delay=moving_delay, wave_durations=waves)


def stream_workload(
    name: str, source: JobSource, config: Any, fidelity: Fidelity, seed: SeedLike
) -> Workload:
    """`config.init` jobs at t=0 plus `config.num_stream` Poisson arrivals drawn from `source`.

    `config` is one of the streaming configs (ArrivalOptions and StreamOptions together).
    The jobs come from one stream of the seed, the gaps from the other (`split_streams`).
    """
    init, num_stream, num_executors = config.init, config.num_stream, config.num_executors
    content, gaps = split_streams(as_rng(seed))
    jobs = source.draw(content, init + num_stream)
    mean_gap = config.mean_interarrival(source.mean_work, num_executors)
    times = poisson_times(gaps, init, num_stream, mean_gap)
    arrivals = tuple(
        JobArrival(t, f"{j.label}-{i}", j.dag, j.durations)
        for i, (t, j) in enumerate(zip(times, jobs, strict=True))
    )
    return Workload(name, arrivals, num_executors, fidelity)
