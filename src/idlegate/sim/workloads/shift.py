"""The `shift` workload: one stream whose character changes mid-stream (a regime shift).

A cluster's work changes: a team moves its TPC-H-like analytics elsewhere and the pool
starts running minute-scale pod pipelines. A scheduler tuned on the first regime must
notice the change and adapt. `shift` joins two generated workloads on one cluster:

* the first phase: `first_jobs` jobs of the workload `first` (with `first_options`);
* the switch at time S: the first phase's last arrival, or `switch_at` if given (the
  first phase's arrivals at or after it are then dropped);
* the second phase: `second_jobs` jobs of `second` (with `second_options`), every
  arrival time shifted by S, so its first job arrives at S plus its own first gap (a
  stream with a job at t = 0 starts exactly at S).

Both phases run on the same `num_executors` (given to each phase, so a phase's `load`
means that load on this cluster). Jobs keep their phase's names behind a prefix,
``1:`` for the first phase and ``2:`` for the second (`shift_phase` reads it back).

Fidelity. The cluster has one moving delay, `moving_delay` (default: the first phase's);
task durations are drawn from each job's own model where its phase draws them (measured
waves, pod durations), and a job of a phase that does not (e.g. `tpch-like`) runs at its
estimates, as it would in its own workload.

Seeds. The seed is split into one independent stream per phase (`base.split_streams`):
the same seed gives the same jobs and times, and each phase is the pure function of its
options and its stream that its own generator is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from pydantic import Field, field_validator, model_validator

from idlegate.config import Config
from idlegate.errors import IdlegateError
from idlegate.sim.engine import Fidelity, JobArrival, Workload
from idlegate.sim.workloads.base import MAX_JOBS, SeedLike, _Options, as_rng, split_streams
from idlegate.sim.workloads.kinds import workload_config, workload_kind

PHASE_WORKLOADS: Final = (
    "synthetic",
    "bursty",
    "tpch",
    "tpch-like",
    "mixed",
    "k8s-batch",
    "follow",
    "push",
    "recurring",
)
"""The generated workloads a phase may be (files and rigid traces are not streams)."""

OWN_OPTIONS: Final = ("num_executors", "num_jobs", "num_stream")
"""Options a phase may not set: the shift gives them (`num_executors`, `*_jobs`)."""


def parse_phase_options(value: Any) -> Any:
    """Phase options as a dict: a dict as it is, or ``KEY=VALUE&KEY=VALUE`` text."""
    if not isinstance(value, str):
        return value
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in value.split("&"))):
        key, sep, val = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"phase options are KEY=VALUE&KEY=VALUE, got {part!r}")
        out[key.strip()] = val.strip()
    return out


class ShiftConfig(_Options):
    """Two generated workloads one after the other on one cluster (module docs).

    Default: 500 TPC-H-like DAGs at offered load 0.85 (the demo's), then 500 k8s-batch
    pod pipelines at load 0.7, on 50 executors.
    """

    first: str = "tpch-like"
    """The workload of the first phase (a generated one: synthetic, bursty, tpch,
    tpch-like, mixed, k8s-batch, follow, push, recurring)."""
    second: str = "k8s-batch"
    """The workload of the second phase (the same choices)."""
    first_jobs: int = Field(500, ge=1, le=MAX_JOBS)
    """Jobs of the first phase (fewer if `switch_at` comes first)."""
    second_jobs: int = Field(500, ge=1, le=MAX_JOBS)
    """Jobs of the second phase."""
    first_options: dict[str, Any] = Field(default_factory=lambda: {"load": 0.85})
    """Options of the first phase, a mapping or KEY=VALUE&KEY=VALUE (default load=0.85;
    given options replace the default)."""
    second_options: dict[str, Any] = Field(default_factory=lambda: {"load": 0.7})
    """Options of the second phase, as `first_options` (default load=0.7)."""
    num_executors: int = Field(50, ge=1, le=100_000)
    """Executors of the cluster, for both phases."""
    switch_at: float | None = Field(None, gt=0)
    """Seconds at which the second phase starts (default: the first phase's last
    arrival); first-phase arrivals from then on are dropped."""
    moving_delay: float | None = Field(None, ge=0)
    """Seconds an executor needs to move to another job (default: the first phase's)."""

    @field_validator("first_options", "second_options", mode="before")
    @classmethod
    def _options_text(cls, value: Any) -> Any:
        return parse_phase_options(value)

    @field_validator("first", "second")
    @classmethod
    def _generated(cls, name: str) -> str:
        if name not in PHASE_WORKLOADS:
            raise ValueError(f"a phase is one of {', '.join(PHASE_WORKLOADS)}; got {name!r}")
        return name

    @model_validator(mode="after")
    def _phases_valid(self) -> ShiftConfig:
        for which in ("first", "second"):
            self.phase_config(which)  # raises ValueError naming the phase
        return self

    def phase_config(self, which: str) -> Config:
        """The typed config of phase `which` ("first" or "second"); ValueError if invalid."""
        options: dict[str, Any] = getattr(self, f"{which}_options")
        own = sorted(set(options) & set(OWN_OPTIONS))
        if own:
            raise ValueError(
                f"{which}_options may not set {own[0]}: give num_executors and "
                f"{which}_jobs on the shift itself"
            )
        jobs = getattr(self, f"{which}_jobs")
        try:
            return workload_config(
                getattr(self, which), num_executors=self.num_executors, num_jobs=jobs, **options
            )
        except IdlegateError as exc:
            raise ValueError(f"{which} phase: {exc}") from None


def shift_phase(name: str) -> int:
    """The phase (1 or 2) of a `shift` job from its name (``2:cron-etl-7`` → 2)."""
    head, sep, _ = name.partition(":")
    if not sep or head not in ("1", "2"):
        raise IdlegateError(f"{name!r} is not the name of a shift workload's job")
    return int(head)


def _phase(which: str, c: ShiftConfig, rng: Any) -> Workload:
    kind = workload_kind(getattr(c, which))
    return kind.generate(c.phase_config(which), rng)


def _jobs(w: Workload, prefix: str, offset: float) -> list[JobArrival]:
    """`w`'s jobs renamed with `prefix` and delayed by `offset`; duration models kept
    only where `w` draws from them."""
    keep = w.fidelity.wave_durations
    return [
        replace(
            j,
            time=j.time + offset,
            name=f"{prefix}{j.name}",
            durations=j.durations if keep else None,
        )
        for j in w.jobs
    ]


def shift_workload(config: ShiftConfig | None = None, seed: SeedLike = 0) -> Workload:
    """The first phase's jobs, then the second phase's from the switch on (module docs)."""
    c = config or ShiftConfig()
    one, two = split_streams(as_rng(seed))
    first, second = _phase("first", c, one), _phase("second", c, two)
    head = _jobs(first, "1:", 0.0)
    if c.switch_at is not None:
        head = [j for j in head if j.time < c.switch_at]
    switch = c.switch_at if c.switch_at is not None else first.jobs[-1].time
    delay = first.fidelity.moving_delay if c.moving_delay is None else c.moving_delay
    waves = first.fidelity.wave_durations or second.fidelity.wave_durations
    jobs = tuple(head + _jobs(second, "2:", switch))
    return Workload("shift", jobs, c.num_executors, Fidelity(delay, waves))


def switch_time(config: ShiftConfig, seed: int) -> float:
    """The time S at which the second phase of `shift` starts for `seed` (an int: the
    generator `shift_workload` draws from)."""
    if config.switch_at is not None:
        return config.switch_at
    one, _ = split_streams(as_rng(seed))
    return _phase("first", config, one).jobs[-1].time
