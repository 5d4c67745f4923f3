"""The typed configs of the generated workloads (synthetic, bursty, tpch, tpch-like, mixed).

Each config is the union of option groups (`ArrivalOptions`, `StreamOptions`, the job
options below, `DagShape`) plus its own defaults; `sim.workloads.kinds` validates a
CLI's options into them. The job-option groups also build their job source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from idlegate.errors import IdlegateError
from idlegate.sim.tpch import TPCH_QUERIES, default_tpch_dir, normalize_size, open_tpch_library
from idlegate.sim.workloads.base import MAX_JOBS, ArrivalOptions, StreamOptions, _Options
from idlegate.sim.workloads.sources import (
    DEFAULT_SIZE_SHAPE,
    JobShape,
    JobSource,
    SizeDistribution,
    TpchLikeSource,
    TpchSource,
    TwoTypeSource,
    _one_stage_dag,
)
from idlegate.sim.workloads.tpch_like import DagShape


class TwoTypeOptions(_Options):
    """The synthetic two-type job set: one stage, short or long work.

    With `size_distribution` other than two-type, each job's work is its type's nominal
    work (`short_seconds` or `long_seconds`) times a random factor of mean 1, so the mean
    job work, and with it what `load` means, stays that of the two-type set.
    """

    short_seconds: float = Field(10.0, gt=0)
    """Work of a short job (executor-s)."""
    long_seconds: float = Field(50.0, gt=0)
    """Work of a long job (executor-s)."""
    long_fraction: float = Field(0.5, ge=0, le=1)
    """Probability that a job is long."""
    tasks_per_job: int = Field(1, ge=1, le=100_000)
    """Tasks of a job's one stage (work split evenly)."""
    size_distribution: SizeDistribution = "two-type"
    """Job work around its type's nominal work: two-type (exactly nominal), pareto or
    lognormal (nominal × a random factor of mean 1; heavy-tailed)."""
    size_shape: float | None = Field(None, gt=0)
    """Shape of the size factor: Pareto tail index alpha > 1 (default 1.5; smaller is
    heavier) or log-normal sigma (default 1.0; larger is heavier)."""
    job_shape: JobShape = "one-stage"
    """one-stage: one stage of tasks_per_job tasks; dag: a small random TPC-H-like plan
    (2-6 stages of at most 8 tasks) scaled to the job's work."""

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


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return value


class TpchOptions(_Options):
    """Where the TPC-H traces are and which queries and sizes to draw from."""

    tpch_dir: str | None = None
    """Directory holding <size>/q<N>.json (default: $IDLEGATE_TPCH_DIR or
    ../shared/data/tpch next to the repository)."""
    sizes: tuple[str, ...] | None = None
    """Input sizes to draw from, e.g. '2g,10g' (default: all found)."""
    queries: tuple[int, ...] | None = None
    """Query numbers to draw from, e.g. '1,3,5' (default: 1-22)."""
    wave_durations: bool = True
    """Sample real task durations from the measured waves."""

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


class SyntheticConfig(ArrivalOptions, StreamOptions, TwoTypeOptions):
    """The idle-slot papers' synthetic set: one-stage jobs of two sizes, Poisson arrivals.

    Default: 100 jobs (1 at t=0, 99 streamed), 4 executors, offered load 0.8.
    """

    num_stream: int = Field(99, ge=0, le=MAX_JOBS)
    """Jobs arriving after t=0 as a Poisson stream."""
    num_executors: int = Field(4, ge=1, le=100_000)
    """Executors of the cluster."""
    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""
    DEFAULT_LOAD: ClassVar[float | None] = 0.8


class BurstyConfig(ArrivalOptions, StreamOptions, TwoTypeOptions):
    """Sessions of short jobs (an ON/OFF Markov-modulated stream) mixed with Poisson long jobs.

    Default: 100 jobs (1 at t=0, 99 streamed), 4 executors, offered load 0.7, one job in
    five long (50 s) and the short ones (10 s) in sessions of 4 on average, arriving ten
    times faster than their mean rate. A long job that arrives just before a session is
    where holding it back can lower the average JCT.
    """

    num_stream: int = Field(99, ge=0, le=MAX_JOBS)
    """Jobs arriving after t=0 (both streams)."""
    num_executors: int = Field(4, ge=1, le=100_000)
    """Executors of the cluster."""
    long_fraction: float = Field(0.2, ge=0, le=1)
    """Fraction of jobs that are long; they arrive as their own Poisson stream."""
    session_size: float = Field(4.0, ge=1, le=10_000)
    """Mean short jobs per session (sessions hold a geometric number of jobs)."""
    burstiness: float = Field(10.0, ge=1, le=10_000)
    """Arrival rate inside a session / the short jobs' long-run mean rate (1: plain
    Poisson)."""
    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""
    DEFAULT_LOAD: ClassVar[float | None] = 0.7


class TpchConfig(ArrivalOptions, StreamOptions, TpchOptions):
    """Decima's streaming TPC-H workload (Decima's defaults: 1 + 200 jobs, 25 s, 50 executors)."""

    moving_delay: float = Field(2.0, ge=0)
    """Seconds an executor needs to move to another job."""
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = 25.0


class TpchLikeConfig(ArrivalOptions, StreamOptions, DagShape):
    """A stream of random TPC-H-like DAGs (synthetic; no data files needed)."""

    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = 25.0


class MixedConfig(ArrivalOptions, StreamOptions, TwoTypeOptions, TpchOptions, DagShape):
    """One Poisson stream: a fraction `alpha` synthetic two-type jobs, the rest DAG jobs."""

    alpha: float = Field(0.5, ge=0, le=1)
    """Probability that a job is a synthetic two-type job."""
    dags: Literal["auto", "tpch", "tpch-like"] = "auto"
    """Where the DAG jobs come from; auto: TPC-H if its traces are found, else the
    TPC-H-like generator."""
    moving_delay: float | None = Field(None, ge=0)
    """Moving delay (default: 2 s with TPC-H, else 0)."""
    DEFAULT_INTERARRIVAL: ClassVar[float | None] = 25.0

    def dag_source_name(self) -> Literal["tpch", "tpch-like"]:
        if self.dags != "auto":
            return self.dags
        found = self.tpch_dir is not None or default_tpch_dir() is not None
        return "tpch" if found else "tpch-like"

    def dag_source(self) -> JobSource:
        """The source of the DAG jobs (`dag_source_name`)."""
        if self.dag_source_name() == "tpch":
            return self.tpch_source()
        return TpchLikeSource(self.shape())
