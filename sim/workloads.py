"""Seeded workload generators, and the registry the CLI calls (`build_workload`).

Every generator is a pure function of (config, seed): the same seed gives the same jobs
and the same arrival times, so every scheduler compared on a seed sees the same arrival
sequence (common random numbers). Internally the seed is split into two independent
streams, one for the jobs' content and one for the arrival gaps; changing only the
arrival rate or the target load therefore rescales the very same arrival pattern of the
very same jobs.

Workloads:

* `synthetic` — the idle-slot papers' two-type set: one-stage jobs of a short (10 s) or
  a long (50 s) amount of work, Poisson arrivals.
* `tpch` — Decima's streaming TPC-H workload: `init` jobs at t=0 plus `num_stream`
  Poisson-streamed jobs, each a uniformly random query (1–22) at a uniformly random input
  size, on 50 executors with Decima's Spark effects (moving delay, measured task waves).
  Needs the traces (`tpch_dir`, see `idlegate.sim.tpch`).
* `tpch-like` — a *synthetic* stand-in that needs no data: random DAGs shaped like
  TPC-H query plans (see `tpch_like_spec`). It is not TPC-H; it only mimics the shape.
* `mixed` — one Poisson stream where a fraction `alpha` of the jobs come from the
  synthetic two-type set and the rest from TPC-H (or the TPC-H-like generator).
* `bursty` — sessions of short jobs (an ON/OFF Markov-modulated stream, mean session size
  and burstiness configurable) merged with a Poisson stream of long jobs; the workload
  where holding a long job back before a session can pay.
* `file` — workflows from a YAML/JSON file, all at t=0, as a stream, or replayed at the
  arrival times a history file records (with measured task durations, `sim.history`).

`synthetic`, `bursty` and `mixed` take `size_distribution` (two-type, pareto, lognormal):
heavy-tailed job sizes with the two-type set's mean, so `load` keeps its meaning.

Offered load = (mean job work / mean interarrival) / executors, with work measured in
estimated executor-seconds (`Dag.total_work`). Instead of an interarrival (or a rate) a
generator may be given a target `load`; the interarrival then follows from the mean job
work of the generator's distribution.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.durations import DurationModel
from idlegate.sim.engine import Fidelity, JobArrival, Workload
from idlegate.sim.history import HistoryWorkflow, load_history
from idlegate.sim.lublin import LublinConfig, lublin_workload
from idlegate.sim.spec import StageSpec, WorkflowSpec
from idlegate.sim.swf import SwfConfig, swf_workload
from idlegate.sim.tpch import (
    TPCH_QUERIES,
    TpchLibrary,
    default_tpch_dir,
    normalize_size,
    open_tpch_library,
)

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


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    EXTRA_OPTIONS: ClassVar[dict[str, str]] = {}
    """Input-only option names (translated before validation) and what they mean."""


class ArrivalOptions(_Options):
    """How the mean interarrival is chosen: at most one of interarrival, rate, load."""

    interarrival: float | None = Field(
        default=None, gt=0, description="Mean seconds between streamed arrivals."
    )
    rate: float | None = Field(
        default=None, gt=0, description="Arrivals per second (1/interarrival)."
    )
    load: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="Target offered load (mean job work / interarrival / executors); "
        "the interarrival is derived from it.",
    )
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
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{name} must be a whole number, got {value!r}")


class StreamOptions(_Options):
    """`init` jobs at t=0, then `num_stream` Poisson arrivals (or give `num_jobs` in total)."""

    init: int = Field(default=1, ge=0, le=MAX_JOBS, description="Jobs submitted at t=0.")
    num_stream: int = Field(
        default=200, ge=0, le=MAX_JOBS, description="Jobs arriving after t=0 as a Poisson stream."
    )
    num_executors: int = Field(
        default=50, ge=1, le=100_000, description="Executors of the cluster."
    )
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
        if total < init:
            raise ValueError(f"num_jobs ({total}) must be at least init ({init})")
        data["num_stream"] = total - init
        return data

    @model_validator(mode="after")
    def _some_jobs(self) -> StreamOptions:
        if self.init + self.num_stream == 0:
            raise ValueError("the workload needs at least one job (init + num_stream >= 1)")
        if self.init + self.num_stream > MAX_JOBS:
            raise ValueError(f"at most {MAX_JOBS} jobs per workload")
        return self

    @property
    def num_jobs(self) -> int:
        return self.init + self.num_stream


SizeDistribution = Literal["two-type", "pareto", "lognormal"]
JobShape = Literal["one-stage", "dag"]
DEFAULT_SIZE_SHAPE: dict[str, float] = {"pareto": 1.5, "lognormal": 1.0}
"""Shape used when `size_shape` is not given: Pareto tail index 1.5, log-normal sigma 1."""
MAX_TASK_SECONDS = 7 * 24 * 3600
"""Longest task a workflow spec allows; heavy-tailed draws are capped there."""


class TwoTypeOptions(_Options):
    """The synthetic two-type job set: one stage, short or long work.

    With `size_distribution` other than two-type, each job's work is its type's nominal
    work (`short_seconds` or `long_seconds`) times a random factor of mean 1, so the mean
    job work, and with it what `load` means, stays that of the two-type set.
    """

    short_seconds: float = Field(
        default=10.0, gt=0, description="Work of a short job (executor-s)."
    )
    long_seconds: float = Field(default=50.0, gt=0, description="Work of a long job (executor-s).")
    long_fraction: float = Field(
        default=0.5, ge=0, le=1, description="Probability that a job is long."
    )
    tasks_per_job: int = Field(
        default=1, ge=1, le=100_000, description="Tasks of a job's one stage (work split evenly)."
    )
    size_distribution: SizeDistribution = Field(
        default="two-type",
        description="Job work around its type's nominal work: two-type (exactly nominal), "
        "pareto or lognormal (nominal × a random factor of mean 1; heavy-tailed).",
    )
    size_shape: float | None = Field(
        default=None,
        gt=0,
        description="Shape of the size factor: Pareto tail index alpha > 1 (default 1.5; "
        "smaller is heavier) or log-normal sigma (default 1.0; larger is heavier).",
    )
    job_shape: JobShape = Field(
        default="one-stage",
        description="one-stage: one stage of tasks_per_job tasks; dag: a small random "
        "TPC-H-like plan (2-6 stages of at most 8 tasks) scaled to the job's work.",
    )

    @model_validator(mode="after")
    def _tasks_fit_job_shape(self) -> TwoTypeOptions:
        if self.job_shape == "dag" and self.tasks_per_job != 1:
            raise ValueError(
                "tasks_per_job shapes one-stage jobs; job_shape dag draws its own task counts"
            )
        return self

    @model_validator(mode="after")
    def _shape_fits_distribution(self) -> TwoTypeOptions:
        if self.size_shape is None:
            return self
        if self.size_distribution == "two-type":
            raise ValueError(
                "size_shape needs size_distribution pareto or lognormal (two-type sizes are fixed)"
            )
        if self.size_distribution == "pareto" and self.size_shape <= 1:
            raise ValueError(
                f"a Pareto size_shape (tail index) must be > 1 for the mean work to exist, "
                f"got {self.size_shape}"
            )
        return self

    def two_type_source(self) -> TwoTypeSource:
        shape = self.size_shape or DEFAULT_SIZE_SHAPE.get(self.size_distribution, 0.0)
        return TwoTypeSource(
            _one_stage_dag(self.short_seconds, self.tasks_per_job),
            _one_stage_dag(self.long_seconds, self.tasks_per_job),
            self.long_fraction,
            self.size_distribution,
            shape,
            self.job_shape,
        )


def size_factors(
    rng: np.random.Generator, distribution: SizeDistribution, shape: float, n: int
) -> np.ndarray:
    """`n` random job-size factors of mean 1 (all 1 for two-type).

    * pareto: x_m·U^(−1/α) with x_m = (α − 1)/α, so P(X > x) = (x_m/x)^α for x ≥ x_m and
      E[X] = 1; the variance is infinite for α ≤ 2.
    * lognormal: exp(σZ − σ²/2), so E[X] = 1 and log X has spread σ.
    """
    if distribution == "two-type":
        return np.ones(n)
    if distribution == "pareto":
        x_min = (shape - 1) / shape
        return x_min * (1.0 - rng.random(n)) ** (-1.0 / shape)  # 1 − U lies in (0, 1]
    if distribution == "lognormal":
        return np.exp(shape * rng.standard_normal(n) - shape * shape / 2)
    raise IdlegateError(
        f"unknown size distribution {distribution!r}; choose two-type, pareto or lognormal"
    )


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return value


class TpchOptions(_Options):
    """Where the TPC-H traces are and which queries and sizes to draw from."""

    tpch_dir: str | None = Field(
        default=None,
        description="Directory holding <size>/q<N>.json (default: $IDLEGATE_TPCH_DIR or "
        "../shared/data/tpch next to the repository).",
    )
    sizes: tuple[str, ...] | None = Field(
        default=None, description="Input sizes to draw from, e.g. '2g,10g' (default: all found)."
    )
    queries: tuple[int, ...] | None = Field(
        default=None, description="Query numbers to draw from, e.g. '1,3,5' (default: 1-22)."
    )
    wave_durations: bool = Field(
        default=True, description="Sample real task durations from the measured waves."
    )

    @field_validator("tpch_dir", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes(cls, value: Any) -> Any:
        value = _split_list(value)
        if value is None:
            return None
        try:
            return tuple(dict.fromkeys(normalize_size(v) for v in value))
        except IdlegateError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("queries", mode="before")
    @classmethod
    def _queries(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("queries")
    @classmethod
    def _query_range(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("select at least one query")
        bad = [q for q in value if q not in TPCH_QUERIES]
        if bad:
            raise ValueError(f"TPC-H queries are 1-22, got {bad}")
        return tuple(dict.fromkeys(value))

    def tpch_source(self) -> TpchSource:
        lib = open_tpch_library(self.tpch_dir)
        sizes = lib.select_sizes(self.sizes)
        if self.queries is not None:
            queries = self.queries
        else:  # the queries every chosen size has
            queries = tuple(
                q for q in lib.queries(sizes[0]) if all(q in lib.index[s] for s in sizes)
            )
        return TpchSource(lib, sizes, queries)


class DagShape(_Options):
    """Knobs of the built-in TPC-H-like DAG generator (see `tpch_like_spec`)."""

    min_stages: int = Field(default=2, ge=1, le=500, description="Fewest stages of a DAG.")
    max_stages: int = Field(default=18, ge=1, le=500, description="Most stages of a DAG.")
    max_tasks: int = Field(default=200, ge=1, le=100_000, description="Most tasks of a stage.")
    min_task_seconds: float = Field(default=0.2, gt=0, description="Shortest task duration.")
    max_task_seconds: float = Field(
        default=5.0, gt=0, le=7 * 24 * 3600, description="Longest task duration."
    )

    @model_validator(mode="after")
    def _ordered(self) -> DagShape:
        if self.min_stages > self.max_stages:
            raise ValueError(
                f"min_stages ({self.min_stages}) exceeds max_stages ({self.max_stages})"
            )
        if self.min_task_seconds > self.max_task_seconds:
            raise ValueError(
                f"min_task_seconds ({self.min_task_seconds}) exceeds max_task_seconds "
                f"({self.max_task_seconds})"
            )
        return self

    def shape(self) -> DagShape:
        """Just the shape knobs (configs that extend DagShape carry more fields)."""
        return DagShape(**{k: getattr(self, k) for k in DagShape.model_fields})


class SyntheticConfig(ArrivalOptions, StreamOptions, TwoTypeOptions):
    """The idle-slot papers' synthetic set: one-stage jobs of two sizes, Poisson arrivals.

    Default: 100 jobs (1 at t=0, 99 streamed), 4 executors, offered load 0.8.
    """

    num_stream: int = Field(
        default=99, ge=0, le=MAX_JOBS, description="Jobs arriving after t=0 as a Poisson stream."
    )
    num_executors: int = Field(default=4, ge=1, le=100_000, description="Executors of the cluster.")
    moving_delay: float = Field(
        default=0.0, ge=0, description="Seconds an executor needs to move to another job."
    )
    DEFAULT_LOAD: ClassVar[float | None] = 0.8


class BurstyConfig(ArrivalOptions, StreamOptions, TwoTypeOptions):
    """Sessions of short jobs (an ON/OFF Markov-modulated stream) mixed with Poisson long jobs.

    Default: 100 jobs (1 at t=0, 99 streamed), 4 executors, offered load 0.7, one job in
    five long (50 s) and the short ones (10 s) in sessions of 4 on average, arriving ten
    times faster than their mean rate. A long job that arrives just before a session is
    where holding it back can lower the average JCT.
    """

    num_stream: int = Field(
        default=99, ge=0, le=MAX_JOBS, description="Jobs arriving after t=0 (both streams)."
    )
    num_executors: int = Field(default=4, ge=1, le=100_000, description="Executors of the cluster.")
    long_fraction: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Fraction of jobs that are long; they arrive as their own Poisson stream.",
    )
    session_size: float = Field(
        default=4.0,
        ge=1,
        le=10_000,
        description="Mean short jobs per session (sessions hold a geometric number of jobs).",
    )
    burstiness: float = Field(
        default=10.0,
        ge=1,
        le=10_000,
        description="Arrival rate inside a session / the short jobs' long-run mean rate "
        "(1: plain Poisson).",
    )
    moving_delay: float = Field(
        default=0.0, ge=0, description="Seconds an executor needs to move to another job."
    )
    DEFAULT_LOAD: ClassVar[float | None] = 0.7


class TpchConfig(ArrivalOptions, StreamOptions, TpchOptions):
    """Decima's streaming TPC-H workload (Decima's defaults: 1 + 200 jobs, 25 s, 50 executors)."""

    moving_delay: float = Field(
        default=2.0, ge=0, description="Seconds an executor needs to move to another job."
    )
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = 25.0


class TpchLikeConfig(ArrivalOptions, StreamOptions, DagShape):
    """A stream of random TPC-H-like DAGs (synthetic; no data files needed)."""

    moving_delay: float = Field(
        default=0.0, ge=0, description="Seconds an executor needs to move to another job."
    )
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = 25.0


class MixedConfig(ArrivalOptions, StreamOptions, TwoTypeOptions, TpchOptions, DagShape):
    """One Poisson stream: a fraction `alpha` synthetic two-type jobs, the rest DAG jobs."""

    alpha: float = Field(
        default=0.5, ge=0, le=1, description="Probability that a job is a synthetic two-type job."
    )
    dags: Literal["auto", "tpch", "tpch-like"] = Field(
        default="auto",
        description="Where the DAG jobs come from; auto: TPC-H if its traces are found, "
        "else the TPC-H-like generator.",
    )
    moving_delay: float | None = Field(
        default=None, ge=0, description="Moving delay (default: 2 s with TPC-H, else 0)."
    )
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = 25.0

    def dag_source_name(self) -> Literal["tpch", "tpch-like"]:
        if self.dags != "auto":
            return self.dags
        found = self.tpch_dir is not None or default_tpch_dir() is not None
        return "tpch" if found else "tpch-like"


ArrivalMode = Literal["batch", "poisson", "fixed", "recorded"]


class FileConfig(ArrivalOptions):
    """Workflows from a YAML/JSON file, repeated and submitted; or a replayed history.

    The file is read by `sim.history.load_history`: any workflow file, whose workflows may
    also carry their arrival time and measured task durations (docs/workloads.md).
    """

    path: str = Field(description="The YAML or JSON file holding one or more workflows.")
    arrival: ArrivalMode | None = Field(
        default=None,
        description="batch: all at t=0; poisson: first at t=0, exponential gaps; fixed: one "
        "every interarrival seconds; recorded: the file's arrival/submitTime times, rescaled "
        "to an interarrival, rate or load if one is given (default: recorded if the "
        "workflows have arrival times, else batch, or poisson if an interarrival, rate or "
        "load is given).",
    )
    repeat: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JOBS,
        description="Submit the file's workflows this many times (default 1): in file order, "
        "or in recorded order one recorded span apart.",
    )
    num_jobs: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JOBS,
        description="Total jobs, cycling through the file's workflows (instead of repeat).",
    )
    num_executors: int = Field(
        default=10, ge=1, le=100_000, description="Executors of the cluster."
    )
    moving_delay: float = Field(
        default=0.0, ge=0, description="Seconds an executor needs to move to another job."
    )

    @field_validator("path", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    @model_validator(mode="after")
    def _arrival_needs_rate(self) -> FileConfig:
        if self.arrival == "batch" and self.arrival_given:
            raise ValueError(
                "arrival 'batch' submits every job at t=0; drop interarrival/rate/load or "
                "choose arrival 'poisson' or 'fixed'"
            )
        if self.arrival in ("poisson", "fixed") and not self.arrival_given:
            raise ValueError(f"arrival {self.arrival!r} needs one of interarrival, rate or load")
        return self

    @model_validator(mode="after")
    def _one_count(self) -> FileConfig:
        if self.repeat is not None and self.num_jobs is not None:
            raise ValueError("give repeat or num_jobs, not both")
        return self

    def job_order(self, num_workflows: int) -> list[int]:
        """Workflow index of each job: file order, cycled `repeat` times or to `num_jobs` jobs."""
        n = self.num_jobs if self.num_jobs is not None else (self.repeat or 1) * num_workflows
        return [i % num_workflows for i in range(n)]

    def arrival_mode(self, recorded: bool) -> ArrivalMode:
        """The arrival mode to use; `recorded`: the file records arrival times."""
        if self.arrival is not None:
            return self.arrival
        if recorded:
            return "recorded"
        return "poisson" if self.arrival_given else "batch"


# ---------------------------------------------------------------------------------------
# job sources: draw n jobs, and know their mean work


@dataclass(frozen=True)
class DrawnJob:
    """One job drawn from a source, before it gets an arrival time."""

    label: str
    dag: Dag
    durations: DurationModel | None = None


class JobSource(Protocol):
    """A distribution over jobs."""

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        """`n` independent jobs."""

    def mean_work(self) -> float:
        """Expected `total_work` of one job (exact or a fixed-seed estimate)."""


@lru_cache(maxsize=256)
def _one_stage_dag(work: float, tasks: int) -> Dag:
    """A one-stage job with `work` executor-seconds split evenly over `tasks` tasks."""
    stage = StageSpec(name="s0", tasks=tasks, task_duration_seconds=work / tasks)
    return Dag.from_spec(WorkflowSpec(stages=(stage,)))


@dataclass(frozen=True)
class TwoTypeSource:
    """Short or long jobs; long with probability `long_fraction`.

    Plain two-type jobs share two one-stage DAGs. With a heavy-tailed `distribution` each
    job's work is its type's nominal work times a `size_factors` draw (of shape
    `size_shape`); with `job_shape` "dag" each job is a small random TPC-H-like plan
    (`SMALL_DAG`) whose task durations are scaled so its work is that size.
    """

    short: Dag
    long: Dag
    long_fraction: float
    distribution: SizeDistribution = "two-type"
    size_shape: float = 0.0
    job_shape: JobShape = "one-stage"

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        return self.jobs(rng, (rng.random(n) < self.long_fraction).tolist())

    def jobs(self, rng: np.random.Generator, is_long: list[bool]) -> list[DrawnJob]:
        """One job per entry of `is_long`.

        Sizes and DAGs come from child streams of `rng` (spawning draws nothing from it),
        so for a seed the job types are those of the plain two-type set, and the first
        n jobs do not depend on how many are drawn.
        """
        if self.distribution == "two-type" and self.job_shape == "one-stage":
            short, long = DrawnJob("short", self.short), DrawnJob("long", self.long)
            return [long if x else short for x in is_long]
        sizes, shapes = rng.spawn(2)
        factors = size_factors(sizes, self.distribution, self.size_shape, len(is_long))
        out = []
        for x, factor in zip(is_long, factors.tolist(), strict=True):
            work = (self.long if x else self.short).total_work * factor
            if self.job_shape == "dag":
                dag = _scaled_plan(_plan(shapes, SMALL_DAG), work)
            else:
                tasks = self.short.tasks[0]
                dag = _sized_dag(min(work / tasks, MAX_TASK_SECONDS), tasks)
            out.append(DrawnJob("long" if x else "short", dag))
        return out

    def mean_work(self) -> float:
        f = self.long_fraction
        return (1 - f) * self.short.total_work + f * self.long.total_work


def _sized_dag(task_seconds: float, tasks: int) -> Dag:
    """A one-stage job of `tasks` tasks of `task_seconds` each (uncached: sizes vary)."""
    stage = StageSpec(name="s0", tasks=tasks, task_duration_seconds=task_seconds)
    return Dag.from_spec(WorkflowSpec(stages=(stage,)))


def _scaled_plan(plan: _Plan, work: float) -> Dag:
    """The DAG of `plan` with every task duration scaled so its total work is `work`."""
    scale = work / plan.work
    stages = tuple(
        StageSpec(
            name=plan.names[i],
            tasks=plan.tasks[i],
            task_duration_seconds=min(plan.durations[i] * scale, MAX_TASK_SECONDS),
            depends_on=tuple(plan.names[p] for p in plan.parents[i]),
        )
        for i in range(len(plan.names))
    )
    return Dag.from_spec(WorkflowSpec(stages=stages))


@dataclass(frozen=True)
class TpchSource:
    """A uniformly random query at a uniformly random size (Decima's stream)."""

    library: TpchLibrary
    sizes: tuple[str, ...]
    queries: tuple[int, ...]

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        si = rng.integers(len(self.sizes), size=n).tolist()
        qi = rng.integers(len(self.queries), size=n).tolist()
        out = []
        for s, q in zip(si, qi, strict=True):
            query = self.library.load(self.sizes[s], self.queries[q])  # cached: Dags are shared
            out.append(DrawnJob(query.name, query.dag, query.durations))
        return out

    def mean_work(self) -> float:
        return self.library.mean_total_work(self.sizes, self.queries)


@dataclass(frozen=True)
class TpchLikeSource:
    """Fresh random TPC-H-like DAGs from `tpch_like_spec`."""

    shape: DagShape

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        return [
            DrawnJob("tpch-like", Dag.from_spec(tpch_like_spec(rng, self.shape))) for _ in range(n)
        ]

    def mean_work(self) -> float:
        return estimate_tpch_like_work(self.shape)


@dataclass(frozen=True)
class MixSource:
    """Each job from `first` with probability `alpha`, else from `second`."""

    first: JobSource
    second: JobSource
    alpha: float

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        pick = (rng.random(n) < self.alpha).tolist()
        a = iter(self.first.draw(rng, sum(pick)))
        b = iter(self.second.draw(rng, n - sum(pick)))
        return [next(a) if p else next(b) for p in pick]

    def mean_work(self) -> float:
        a = self.first.mean_work() if self.alpha > 0 else 0.0
        b = self.second.mean_work() if self.alpha < 1 else 0.0
        return self.alpha * a + (1 - self.alpha) * b


# ---------------------------------------------------------------------------------------
# the built-in TPC-H-like DAG generator

STAGE_SKEW = 1.2
"""Stage count = min + ⌊(max − min + 1)·U^1.2⌋: slightly toward small plans (TPC-H mean ≈ 9.2)."""
MEDIAN_TASKS = {"scan": 8.0, "inner": 60.0, "sink": 2.0}
"""Median tasks by role; TPC-H scans have few tasks, shuffle stages many, final stages 1–2."""
TASKS_SIGMA = 1.2
"""Log-normal spread of tasks per stage (heavy tail, clipped to [1, max_tasks])."""
EXTRA_EDGE_PROB = 0.04
"""Chance that a non-scan stage also reads an earlier stage (TPC-H plans are near-trees)."""


def tpch_like_spec(rng: np.random.Generator, shape: DagShape | None = None) -> WorkflowSpec:
    """A random DAG shaped like a TPC-H query plan. Synthetic: it imitates, it is not TPC-H.

    Shape: `s` scan stages (no parents) are merged by `s − 1` two-input join stages, with
    single-input aggregation/exchange stages interleaved at random, down to one final
    sink stage; now and then a stage also reads an earlier stage. Stage counts fall in
    [min_stages, max_stages] (default 2–18, mean ≈ 9). Tasks per stage are log-normal
    (median 8 for scans, 60 inside, 2 for the sink; clipped to 1–max_tasks, ≈ 500 tasks
    per job on average). Task durations are log-uniform, scans in the upper half of
    [min_task_seconds, max_task_seconds] (default 1–5 s) and the rest in the lower half
    (0.2–1 s), as TPC-H scans are slow and shuffle tasks short.
    """
    plan = _plan(rng, shape or DagShape())
    stages = tuple(
        StageSpec(
            name=plan.names[i],
            tasks=plan.tasks[i],
            task_duration_seconds=plan.durations[i],
            depends_on=tuple(plan.names[p] for p in plan.parents[i]),
        )
        for i in range(len(plan.names))
    )
    return WorkflowSpec(stages=stages)


@dataclass(frozen=True)
class _Plan:
    names: list[str]
    tasks: list[int]
    durations: list[float]
    parents: list[tuple[int, ...]]

    @property
    def work(self) -> float:
        return sum(n * d for n, d in zip(self.tasks, self.durations, strict=True))


def _plan(rng: np.random.Generator, shape: DagShape) -> _Plan:
    lo, hi = shape.min_stages, shape.max_stages
    n = min(hi, lo + int((hi - lo + 1) * rng.random() ** STAGE_SKEW))
    scans = int(rng.integers(1, max(1, (n + 1) // 2) + 1))
    ops = np.array([True] * (scans - 1) + [False] * (n - 2 * scans + 1))  # True: join
    rng.shuffle(ops)
    u = iter(rng.random(3 * n).tolist())
    roots = list(range(scans))
    names = [f"scan-{i}" for i in range(scans)]
    parents: list[tuple[int, ...]] = [()] * scans
    for k, join in enumerate(ops.tolist()):
        i = scans + k
        a = roots.pop(int(next(u) * len(roots)))
        ps = [a, roots.pop(int(next(u) * len(roots)))] if join else [a]
        if next(u) < EXTRA_EDGE_PROB:
            extra = int(rng.integers(i))
            if extra not in ps:
                ps.append(extra)
        parents.append(tuple(sorted(ps)))
        names.append(f"{'join' if join else 'agg'}-{i}")
        roots.append(i)
    roles = ["scan" if i < scans else "sink" if i == n - 1 else "inner" for i in range(n)]
    median = np.array([MEDIAN_TASKS[r] for r in roles])
    tasks = np.clip(
        np.rint(median * np.exp(TASKS_SIGMA * rng.standard_normal(n))), 1, shape.max_tasks
    )
    tmin, tmax = shape.min_task_seconds, shape.max_task_seconds
    mid = math.sqrt(tmin * tmax)
    low = np.where(np.array(roles) == "scan", mid, tmin)
    high = np.where(np.array(roles) == "scan", tmax, mid)
    durations = np.maximum(np.round(low * (high / low) ** rng.random(n), 3), 0.001)
    return _Plan(names, [int(t) for t in tasks], durations.tolist(), parents)


SMALL_DAG = DagShape(min_stages=2, max_stages=6, max_tasks=8)
"""The plans of `job_shape: dag`: TPC-H-like, small enough for a 4-executor cluster."""

ESTIMATE_SAMPLES = 2000
ESTIMATE_SEED = 20190819


@lru_cache(maxsize=64)
def estimate_tpch_like_work(
    shape: DagShape | None = None, samples: int = ESTIMATE_SAMPLES
) -> float:
    """Mean total work of `tpch_like_spec` DAGs, from a fixed-seed sample (cached per shape)."""
    rng = np.random.default_rng(ESTIMATE_SEED)
    s = shape or DagShape()
    return float(np.mean([_plan(rng, s).work for _ in range(samples)]))


# ---------------------------------------------------------------------------------------
# generators


def _stream(
    name: str, source: JobSource, config: Any, fidelity: Fidelity, seed: SeedLike
) -> Workload:
    """`config.init` jobs at t=0 plus `config.num_stream` Poisson arrivals drawn from `source`.

    `config` is one of the streaming configs (ArrivalOptions and StreamOptions together).
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


def _fidelity(moving_delay: float, waves: bool) -> Fidelity:
    if moving_delay == 0 and not waves:
        return Fidelity.none()
    return Fidelity(moving_delay=moving_delay, wave_durations=waves)


def synthetic_workload(config: SyntheticConfig | None = None, seed: SeedLike = 0) -> Workload:
    """The synthetic two-type workload (one-stage short/long jobs, Poisson arrivals)."""
    c = config or SyntheticConfig()
    return _stream("synthetic", c.two_type_source(), c, _fidelity(c.moving_delay, False), seed)


def session_arrivals(
    rng: np.random.Generator, n: int, session_size: float, burstiness: float, mean_gap: float
) -> tuple[np.ndarray, np.ndarray]:
    """`n` arrival times of an ON/OFF Markov-modulated stream, and each arrival's session.

    In the ON state jobs arrive as a Poisson process of rate `burstiness / mean_gap`;
    after each arrival the source switches OFF with probability 1/`session_size`, and the
    next session opens with its first job after an exponential silence. Sessions thus
    hold a geometric number of jobs (≥ 1, mean `session_size`), and the silence's mean,
    `session_size·mean_gap − (session_size − 1)·mean_gap/burstiness`, makes the long-run
    mean gap exactly `mean_gap`. (A two-state Markovian arrival process; unlike an
    interrupted Poisson process no ON period is empty, so `session_size` is the mean size
    of the sessions one observes.) With `burstiness` 1 or `session_size` 1 the stream is
    plain Poisson. The stream starts silent: the first arrival opens a session.
    """
    in_session = mean_gap / burstiness
    silence = session_size * mean_gap - (session_size - 1) * in_session
    # one (switch, gap) pair of uniforms per arrival: the first n arrivals do not depend on n
    u = rng.random((n, 2))
    opens = u[:, 0] < 1.0 / session_size
    if n:
        opens[0] = True
    scale = np.where(opens, silence, in_session)
    times = np.cumsum(-np.log1p(-u[:, 1]) * scale)
    return times, np.cumsum(opens) - 1


def bursty_workload(config: BurstyConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Short jobs in sessions (`session_arrivals`) merged with a Poisson stream of long jobs.

    The mean interarrival of the merged stream follows from `load` (or is given); long
    jobs arrive at `long_fraction` of that rate, short ones at the rest. Job sizes follow
    `size_distribution` around 10 s and 50 s of work. `init` jobs at t=0 are long with
    probability `long_fraction`.
    """
    c = config or BurstyConfig()
    source = c.two_type_source()
    content, arrivals = split_streams(as_rng(seed))
    short_gaps, long_gaps = split_streams(arrivals)
    gap = c.mean_interarrival(source.mean_work, c.num_executors)
    n, f = c.num_stream, c.long_fraction
    # each stream gets n candidates; the merged stream's first n never need more of either
    short = (
        session_arrivals(short_gaps, n, c.session_size, c.burstiness, gap / (1 - f))[0]
        if f < 1
        else np.empty(0)
    )
    long = np.cumsum(long_gaps.standard_exponential(n)) * (gap / f) if f > 0 else np.empty(0)
    times = np.concatenate([short, long])
    is_long = np.concatenate([np.zeros(len(short), bool), np.ones(len(long), bool)])
    first = np.argsort(times, kind="stable")[:n]
    kinds = (content.random(c.init) < f).tolist() + is_long[first].tolist()
    jobs = source.jobs(content, kinds)
    all_times = [0.0] * c.init + times[first].tolist()
    arrivals_ = tuple(
        JobArrival(t, f"{j.label}-{i}", j.dag, j.durations)
        for i, (t, j) in enumerate(zip(all_times, jobs, strict=True))
    )
    return Workload("bursty", arrivals_, c.num_executors, _fidelity(c.moving_delay, False))


def tpch_workload(config: TpchConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Decima's streaming TPC-H workload (needs the traces; see `idlegate.sim.tpch`)."""
    c = config or TpchConfig()
    return _stream("tpch", c.tpch_source(), c, _fidelity(c.moving_delay, c.wave_durations), seed)


def tpch_like_workload(config: TpchLikeConfig | None = None, seed: SeedLike = 0) -> Workload:
    """A stream of synthetic TPC-H-like DAGs (no data files needed)."""
    c = config or TpchLikeConfig()
    return _stream(
        "tpch-like", TpchLikeSource(c.shape()), c, _fidelity(c.moving_delay, False), seed
    )


def mixed_workload(config: MixedConfig | None = None, seed: SeedLike = 0) -> Workload:
    """One stream mixing synthetic two-type jobs (fraction alpha) with TPC-H(-like) DAG jobs."""
    c = config or MixedConfig()
    dags = c.dag_source_name()
    if dags == "tpch":
        second: JobSource = c.tpch_source()
        fid = _fidelity(2.0 if c.moving_delay is None else c.moving_delay, c.wave_durations)
    else:
        second = TpchLikeSource(c.shape())
        fid = _fidelity(c.moving_delay or 0.0, False)
    source = MixSource(c.two_type_source(), second, c.alpha)
    return _stream(f"mixed-{dags}", source, c, fid, seed)


def file_workload(config: FileConfig, seed: SeedLike = 0) -> Workload:
    """The workflows of a YAML/JSON file, cycled, all at t=0, streamed or at recorded times.

    Stages with measured task durations run for durations drawn from the measurements
    (`sim.history.MeasuredDurations`); their estimate stays `taskDurationSeconds`.
    """
    c = config
    history = load_history(c.path)
    dags = [Dag.from_spec(h.spec) for h in history]
    models = [h.durations() for h in history]
    stem = Path(c.path).stem
    labels = [h.name or (stem if len(dags) == 1 else f"{stem}-w{i}") for i, h in enumerate(history)]
    # one recorded time makes the file a history: replaying it needs them all
    mode = c.arrival_mode(any(h.arrival is not None for h in history))
    if mode == "recorded":
        order, times = _recorded(c, history, dags)
    else:
        order = c.job_order(len(dags))
        times = _file_times(c, mode, order, dags, seed)
    arrivals = tuple(
        JobArrival(t, f"{labels[w]}-{i}", dags[w], models[w])
        for i, (t, w) in enumerate(zip(times, order, strict=True))
    )
    waves = any(m is not None for m in models)
    return Workload(f"file:{stem}", arrivals, c.num_executors, _fidelity(c.moving_delay, waves))


def _file_times(
    c: FileConfig, mode: ArrivalMode, order: list[int], dags: list[Dag], seed: SeedLike
) -> list[float]:
    n = len(order)
    if mode == "batch":
        return [0.0] * n
    gap = c.mean_interarrival(_mean_work_of(order, dags), c.num_executors)
    if mode == "fixed":
        return [i * gap for i in range(n)]
    _, gaps = split_streams(as_rng(seed))
    return poisson_times(gaps, 1, n - 1, gap)


def _mean_work_of(order: list[int], dags: list[Dag]) -> Callable[[], float]:
    return lambda: float(np.mean([dags[w].total_work for w in order]))


def _recorded(
    c: FileConfig, history: list[HistoryWorkflow], dags: list[Dag]
) -> tuple[list[int], list[float]]:
    """Jobs in the order they arrived in the history, and their times (starting at 0).

    Repeats (`repeat`, or `num_jobs` beyond the file) replay the history again, each copy
    one recorded span plus one mean recorded gap after the previous one; an interarrival,
    rate or load rescales every time so the mean gap matches it.
    """
    for h in history:
        if h.arrival is None:
            raise IdlegateError(
                f"{h.source} has no arrival (or submitTime); replaying recorded arrivals needs "
                "one on every workflow: add it in seconds, or choose arrival batch, poisson or "
                "fixed to ignore them"
            )
    k = len(history)
    start = min(h.arrival for h in history if h.arrival is not None)
    by_time = sorted(range(k), key=lambda w: history[w].arrival or 0.0)
    base = [(history[w].arrival or 0.0) - start for w in by_time]
    period = base[-1] * k / (k - 1) if k > 1 else 0.0  # the span plus one mean gap
    n = c.num_jobs if c.num_jobs is not None else (c.repeat or 1) * k
    order = [by_time[i % k] for i in range(n)]
    times = [base[i % k] + (i // k) * period for i in range(n)]
    if c.arrival_given:
        recorded_gap = period / k
        if recorded_gap == 0:
            raise IdlegateError(
                f"{c.path}: every workflow has the same arrival time, so there is no recorded "
                "gap to rescale to the interarrival, rate or load; drop that option or choose "
                "arrival poisson or fixed"
            )
        gap = c.mean_interarrival(_mean_work_of(order, dags), c.num_executors)
        times = [t * gap / recorded_gap for t in times]
    return order, times


def mean_job_work(config: BaseModel) -> float:
    """Expected estimated work of one job of the workload `config` describes."""
    if isinstance(config, SyntheticConfig | BurstyConfig):
        return config.two_type_source().mean_work()
    if isinstance(config, TpchConfig):
        return config.tpch_source().mean_work()
    if isinstance(config, TpchLikeConfig):
        return TpchLikeSource(config.shape()).mean_work()
    if isinstance(config, MixedConfig):
        second: JobSource = (
            config.tpch_source()
            if config.dag_source_name() == "tpch"
            else TpchLikeSource(config.shape())
        )
        return MixSource(config.two_type_source(), second, config.alpha).mean_work()
    if isinstance(config, FileConfig):
        dags = [Dag.from_spec(h.spec) for h in load_history(config.path)]
        return _mean_work_of(config.job_order(len(dags)), dags)()
    raise IdlegateError(f"no workload is configured by {type(config).__name__}")


# ---------------------------------------------------------------------------------------
# the registry


@dataclass(frozen=True)
class WorkloadKind:
    """A named workload: its config model and its generator."""

    name: str
    config: type[_Options]
    generate: Callable[[Any, SeedLike], Workload]
    summary: str

    def options(self) -> dict[str, str]:
        """Option name → description (what `build_workload` accepts for this workload)."""
        out = {k: f.description or "" for k, f in self.config.model_fields.items()}
        out.update(self.config.EXTRA_OPTIONS)
        return dict(sorted(out.items()))


WORKLOADS: dict[str, WorkloadKind] = {
    k.name: k
    for k in (
        WorkloadKind(
            "synthetic",
            SyntheticConfig,
            synthetic_workload,
            "one-stage jobs of 10 s or 50 s work, Poisson arrivals (idle-slot papers)",
        ),
        WorkloadKind(
            "tpch",
            TpchConfig,
            tpch_workload,
            "Decima's streaming TPC-H (needs the traces: --tpch-dir or IDLEGATE_TPCH_DIR)",
        ),
        WorkloadKind(
            "tpch-like",
            TpchLikeConfig,
            tpch_like_workload,
            "synthetic random DAGs shaped like TPC-H query plans (no data needed)",
        ),
        WorkloadKind(
            "mixed",
            MixedConfig,
            mixed_workload,
            "one stream: fraction alpha synthetic two-type jobs, the rest TPC-H(-like) DAGs",
        ),
        WorkloadKind(
            "bursty",
            BurstyConfig,
            bursty_workload,
            "sessions of ~4 short jobs (ON/OFF Markov-modulated) plus Poisson long jobs, load 0.7",
        ),
        WorkloadKind(
            "file",
            FileConfig,
            file_workload,
            "workflows from a YAML/JSON file, or a history replayed at its recorded times",
        ),
        WorkloadKind(
            "swf",
            SwfConfig,
            swf_workload,
            "rigid jobs from an SWF trace (--file), a seeded window of --jobs-count jobs",
        ),
        WorkloadKind(
            "lublin",
            LublinConfig,
            lublin_workload,
            "rigid jobs from the Lublin-Feitelson model (256 nodes, daily cycle)",
        ),
    )
}


def workload_kind(name: str) -> WorkloadKind:
    """The registry entry `name`, or an IdlegateError listing the valid names."""
    kind = WORKLOADS.get(name)
    if kind is None:
        raise IdlegateError(f"unknown workload {name!r}; choose one of: {', '.join(WORKLOADS)}")
    return kind


def workload_config(name: str, **options: Any) -> _Options:
    """Validate `options` for workload `name` into its typed config.

    Option names may use '-' or '_' ('num-executors' = 'num_executors'); options whose
    value is None are dropped (so a CLI can forward every flag it has).
    """
    kind = workload_kind(name)
    opts = {k.replace("-", "_"): v for k, v in options.items() if v is not None}
    valid = kind.options()
    unknown = sorted(set(opts) - set(valid))
    if unknown:
        raise IdlegateError(
            f"workload {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"valid options: {', '.join(valid)}"
        )
    try:
        return kind.config.model_validate(opts)
    except ValidationError as exc:
        raise IdlegateError(f"workload {name!r}: {_describe(exc)}") from None


def build_workload(name: str, seed: int = 0, **options: Any) -> Workload:
    """The workload `name` with `options` and `seed`: a pure function of the three."""
    config = workload_config(name, **options)
    rng = as_rng(seed)
    return workload_kind(name).generate(config, rng)


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"option {loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def describe_workloads() -> str:
    """One line per workload: name and summary (for CLI help)."""
    width = max(map(len, WORKLOADS))
    return "\n".join(f"{k.name:<{width}}  {k.summary}" for k in WORKLOADS.values())
