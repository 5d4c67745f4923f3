"""The `k8s-batch` workload: Argo/Airflow-style pipelines of pods that run for minutes.

The operator's world is not Spark: a task is a pod that runs for minutes, an executor
(a slot of the pool) does not move between jobs at a cost (no moving delay), and work
arrives in two ways:

* *cron bursts*: every `period` seconds (15 min by default) a burst of scheduled
  pipelines starts together, each a little late (uniform in [0, `jitter`) seconds, as
  controllers do not start CronJobs on the second);
* *ad-hoc jobs*: a Poisson stream, a fraction `adhoc_fraction` of all jobs.

Pipelines (`PIPELINES`, drawn with `SHAPE_WEIGHTS`):

* ``etl``: 1–3 parallel extracts (1 pod each) → a chain of 1–3 transforms (1–8 pods)
  → load (1 pod): a chain, with a fan-in at its head;
* ``fanout``: split (1 pod) → map (4–32 pods) → merge (1 pod): fan-out/fan-in;
* ``train-eval``: prepare (1–4 pods) → train (1 long pod) → eval (1–4 pods) →
  register (1 pod).

A stage's pods share a run time drawn log-normally around the stage kind's median
(minutes; times `duration_scale`). Each pod also pays `start_latency` seconds (scheduling,
image pull, container start) inside its duration, as the simulator has no per-task
overhead of its own; the stage's estimate (`taskDurationSeconds`, what schedulers see) is
start latency + run time. A pod's real run time varies around the estimate's log-normally
(spread `task_sigma`, mean 1: the estimate is the mean), drawn by the run's one generator
(`K8sPodDurations`).

Load. Instead of a `burst_size` (mean pipelines per burst) an arrival knob of
`ArrivalOptions` may be given (`load`, default 0.7; `interarrival`; `rate`): it fixes the
merged stream's mean gap g, and the bursts hold (1 − adhoc_fraction)·period/g pipelines on
average (stochastic rounding: ⌊m⌋ or ⌈m⌉), the ad-hoc jobs arriving at rate
adhoc_fraction/g.

Requests (`requests`, off by default). Each stage's pods request what pods of its kind
do (`_REQUESTS`, drawn by `idlegate.sim.workloads.requests`): CPU from 0.1 to 8 by kind,
memory to match, and one `nvidia.com/gpu` for half the `train` stages. A pool with
`--resources` counts them; a pods-only pool does not. They come from a stream of their
own, so the jobs, run times and arrivals are the same with and without them.

Seeds. One seed gives the same jobs and times: the content, burst counts, jitters and
ad-hoc gaps come from independent child streams (`base.split_streams`), each drawn in
order, so the first n jobs do not depend on how many are drawn.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import ClassVar

import numpy as np
from pydantic import Field, model_validator

from idlegate.sim.dag import Dag
from idlegate.sim.durations import Uniforms
from idlegate.sim.engine import Fidelity, JobArrival, Workload
from idlegate.sim.spec import MAX_TASK_SECONDS, StageSpec, WorkflowSpec
from idlegate.sim.workloads.base import MAX_JOBS, ArrivalOptions, SeedLike, as_rng, split_streams
from idlegate.sim.workloads.requests import PodSize, draw_requests, requests_stream

MINUTE = 60.0

# (kind, median run time in seconds, log-normal spread of a stage's run time)
_STAGE_KINDS: dict[str, tuple[float, float]] = {
    "extract": (2 * MINUTE, 0.6),
    "transform": (3 * MINUTE, 0.7),
    "load": (1 * MINUTE, 0.5),
    "split": (0.5 * MINUTE, 0.4),
    "map": (3 * MINUTE, 0.6),
    "merge": (1.5 * MINUTE, 0.5),
    "prepare": (2 * MINUTE, 0.6),
    "train": (15 * MINUTE, 0.5),
    "eval": (3 * MINUTE, 0.5),
    "register": (0.3 * MINUTE, 0.3),
}
"""Stage kinds of the pipelines: median pod run time (before `duration_scale`) and the
log-normal spread of a stage's run time around it."""

_REQUESTS: dict[str, PodSize] = {
    "extract": PodSize(0.25, 1.0),
    "transform": PodSize(1.0, 4.0),
    "load": PodSize(0.25, 1.0),
    "split": PodSize(0.1, 0.5),
    "map": PodSize(0.5, 2.0),
    "merge": PodSize(0.5, 2.0),
    "prepare": PodSize(1.0, 4.0),
    "train": PodSize(2.0, 8.0, gpu_share=0.5),
    "eval": PodSize(0.5, 2.0),
    "register": PodSize(0.1, 0.25),
}
"""What a pod of each stage kind requests (`idlegate.sim.workloads.requests`): a GPU on
half the `train` stages."""

PIPELINES = ("etl", "fanout", "train-eval")
SHAPE_WEIGHTS = (0.4, 0.35, 0.25)
"""How often each pipeline shape is drawn (ETL chains are the most common DAGs)."""
ESTIMATE_SAMPLES = 4000
ESTIMATE_SEED = 20240601


class K8sBatchConfig(ArrivalOptions):
    """Minute-scale pipelines of pods: cron bursts plus ad-hoc Poisson jobs (module docs).

    Default: 100 jobs on 40 executors, offered load 0.7, bursts every 15 min, 30 % ad hoc.
    """

    num_jobs: int = Field(100, ge=1, le=MAX_JOBS)
    """Jobs (pipelines) in total, cron and ad hoc."""
    num_executors: int = Field(40, ge=1, le=100_000)
    """Executors (pod slots) of the pool."""
    period: float = Field(15 * MINUTE, gt=0)
    """Seconds between cron bursts (900: every 15 min; 3600: hourly)."""
    burst_size: float | None = Field(None, gt=0, le=MAX_JOBS)
    """Mean pipelines per burst; instead of load, interarrival or rate (default: from
    load 0.7)."""
    jitter: float = Field(MINUTE, ge=0)
    """A cron pipeline starts uniformly within this many seconds after its burst's time."""
    adhoc_fraction: float = Field(0.3, ge=0, le=1)
    """Fraction of the jobs that are ad hoc (a Poisson stream between the bursts)."""
    duration_scale: float = Field(1.0, gt=0)
    """Factor on every pod's run time (not on its start latency)."""
    task_sigma: float = Field(0.3, ge=0, le=3)
    """Log-normal spread of a pod's real run time around its stage's estimate (0: exact)."""
    start_latency: float = Field(15.0, ge=0, le=3600)
    """Seconds every pod needs to start (scheduling, image pull), part of its duration."""
    requests: bool = False
    """Give each stage's pods requests (CPU 0.1-8 by stage kind, memory to match, a GPU
    on half the train stages), counted by a pool with --resources (module docs). Off:
    no requests, the workload as it always was."""
    DEFAULT_LOAD: ClassVar[float | None] = 0.7

    @model_validator(mode="after")
    def _one_size_knob(self) -> K8sBatchConfig:
        if self.burst_size is not None and self.arrival_given:
            raise ValueError("give burst_size or one of interarrival, rate and load, not both")
        if self.burst_size is not None and self.adhoc_fraction == 1:
            raise ValueError("burst_size needs cron jobs: adhoc_fraction must be below 1")
        if self.jitter >= self.period:
            raise ValueError(
                f"jitter ({self.jitter:g} s) must be shorter than the period ({self.period:g} s):"
                " a burst starts before the next one"
            )
        return self

    def mean_interarrival(self, mean_work: Callable[[], float], num_executors: int) -> float:
        """The merged stream's mean gap: from `burst_size`, else `ArrivalOptions`'."""
        if self.burst_size is not None:
            return (1 - self.adhoc_fraction) * self.period / self.burst_size
        return super().mean_interarrival(mean_work, num_executors)

    def mean_gap(self) -> float:
        """The merged stream's mean gap between jobs (seconds)."""
        return self.mean_interarrival(lambda: mean_pipeline_work(self), self.num_executors)


@dataclass(frozen=True, slots=True)
class K8sPodDurations:
    """Real pod durations: start latency + the stage's run time × a log-normal factor of
    mean 1 (spread `sigma`), one draw per pod from the run's `Uniforms`."""

    latency: float
    runs: tuple[float, ...]
    """Each stage's run time estimate (seconds, without the start latency)."""
    sigma: float

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        # once per task of a replay: written out (the clamps as tests, the quantile
        # without NormalDist.inv_cdf's checks), at less than half the cost of the
        # plain formula; the same operations, so the same value to the last bit
        # (tests/test_durations.py)
        sigma = self.sigma
        if sigma == 0:
            return self.latency + self.runs[stage]
        p = u.next()
        if p < 1e-12:
            p = 1e-12
        elif p > 1 - 1e-12:
            p = 1 - 1e-12
        run = self.runs[stage] * _exp(sigma * _quantile(p, 0.0, 1.0) - sigma * sigma / 2)
        return self.latency + (run if run <= MAX_TASK_SECONDS else MAX_TASK_SECONDS)


def _normal_quantile(p: float, mu: float, sigma: float) -> float:
    return NormalDist(mu, sigma).inv_cdf(p)


_quantile: Callable[[float, float, float], float] = getattr(
    statistics, "_normal_dist_inv_cdf", _normal_quantile
)
"""The normal quantile NormalDist.inv_cdf computes (after its checks), at p, mu, sigma."""
_exp = math.exp


@dataclass(frozen=True)
class _Pipeline:
    label: str
    stages: list[tuple[str, str, int, tuple[str, ...]]]
    """(name, kind, pods, parents)."""


def _draw_shape(rng: np.random.Generator) -> _Pipeline:
    """One pipeline's DAG (names, kinds, pods, parents), without run times."""
    shape = PIPELINES[int(rng.choice(len(PIPELINES), p=SHAPE_WEIGHTS))]

    def pods(lo: int, hi: int) -> int:
        return int(rng.integers(lo, hi + 1))

    stages: list[tuple[str, str, int, tuple[str, ...]]]
    if shape == "etl":
        extracts = [f"extract-{i}" for i in range(pods(1, 3))]
        stages = [(e, "extract", 1, ()) for e in extracts]
        parents: tuple[str, ...] = tuple(extracts)
        for i in range(pods(1, 3)):
            stages.append((f"transform-{i}", "transform", pods(1, 8), parents))
            parents = (f"transform-{i}",)
        stages.append(("load", "load", 1, parents))
    elif shape == "fanout":
        stages = [
            ("split", "split", 1, ()),
            ("map", "map", pods(4, 32), ("split",)),
            ("merge", "merge", 1, ("map",)),
        ]
    else:
        stages = [
            ("prepare", "prepare", pods(1, 4), ()),
            ("train", "train", 1, ("prepare",)),
            ("eval", "eval", pods(1, 4), ("train",)),
            ("register", "register", 1, ("eval",)),
        ]
    return _Pipeline(shape, stages)


def _run_times(rng: np.random.Generator, plan: _Pipeline, c: K8sBatchConfig) -> list[float]:
    """Each stage's pod run time (seconds, without the start latency)."""
    runs = []
    for _, kind, _, _ in plan.stages:
        median, sigma = _STAGE_KINDS[kind]
        run = round(median * c.duration_scale * math.exp(sigma * rng.standard_normal()), 1)
        runs.append(min(max(run, 1.0), MAX_TASK_SECONDS - c.start_latency))
    return runs


def _draw_pipeline(
    rng: np.random.Generator, c: K8sBatchConfig, requests: np.random.Generator | None = None
) -> tuple[str, Dag, tuple[float, ...]]:
    """One pipeline: its label, its DAG (estimates include the start latency) and its
    stages' run times without the latency; with a `requests` stream, its pods' requests."""
    plan = _draw_shape(rng)
    runs = _run_times(rng, plan, c)
    specs = tuple(
        StageSpec(
            name=name,
            tasks=pods,
            task_duration_seconds=c.start_latency + run,
            depends_on=parents,
            resources=None if requests is None else draw_requests(requests, _REQUESTS[kind]),
        )
        for (name, kind, pods, parents), run in zip(plan.stages, runs, strict=True)
    )
    return plan.label, Dag.from_spec(WorkflowSpec(stages=specs)), tuple(runs)


@lru_cache(maxsize=64)
def _mean_work(duration_scale: float, start_latency: float) -> float:
    """The mean of `Dag.total_work` over a fixed-seed sample, without building the DAGs."""
    rng = np.random.default_rng(ESTIMATE_SEED)
    c = K8sBatchConfig(duration_scale=duration_scale, start_latency=start_latency)
    total = 0.0
    for _ in range(ESTIMATE_SAMPLES):
        plan = _draw_shape(rng)
        runs = _run_times(rng, plan, c)
        total += sum(s[2] * (start_latency + r) for s, r in zip(plan.stages, runs, strict=True))
    return total / ESTIMATE_SAMPLES


def mean_pipeline_work(config: K8sBatchConfig) -> float:
    """Mean estimated work of one pipeline (executor-seconds; a fixed-seed sample, cached)."""
    return _mean_work(config.duration_scale, config.start_latency)


def _cron_times(rng: np.random.Generator, c: K8sBatchConfig, n: int, mean: float) -> np.ndarray:
    """The first `n` cron start times: bursts of ⌊mean⌋ or ⌈mean⌉ pipelines every period,
    each late by a uniform jitter. Prefix-stable: the counts and the jitters each come
    from a stream read from its start, and a burst starts before the next (jitter < period).
    """
    counts_seed, jitter_seed = (int(x) for x in rng.integers(2**63, size=2))
    whole, frac = math.floor(mean), mean - math.floor(mean)
    bursts = math.ceil(n / mean) + 1
    while True:
        counts = whole + (np.random.default_rng(counts_seed).random(bursts) < frac)
        if counts.sum() >= n:
            break
        bursts *= 2
    starts = np.repeat(np.arange(bursts) * c.period, counts)
    late = np.random.default_rng(jitter_seed).random(len(starts)) * c.jitter
    return np.sort(starts + late, kind="stable")[:n]


def k8s_batch_workload(config: K8sBatchConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Cron bursts and ad-hoc Poisson jobs of Argo/Airflow-style pipelines (module docs)."""
    c = config or K8sBatchConfig()
    n, share = c.num_jobs, c.adhoc_fraction
    root = as_rng(seed)
    content, arrivals = split_streams(root)
    requests = requests_stream(root, c.requests)
    cron_rng, adhoc_rng = split_streams(arrivals)
    gap = c.mean_gap()
    cron = _cron_times(cron_rng, c, n, (1 - share) * c.period / gap) if share < 1 else np.empty(0)
    adhoc = (
        np.cumsum(adhoc_rng.standard_exponential(n)) * (gap / share) if share > 0 else np.empty(0)
    )
    times = np.concatenate([cron, adhoc])
    is_adhoc = np.concatenate([np.zeros(len(cron), bool), np.ones(len(adhoc), bool)])
    first = np.argsort(times, kind="stable")[:n]
    jobs = []
    for i, (t, ad_hoc) in enumerate(
        zip(times[first].tolist(), is_adhoc[first].tolist(), strict=True)
    ):
        label, dag, runs = _draw_pipeline(content, c, requests)
        model = K8sPodDurations(c.start_latency, runs, c.task_sigma)
        name = f"{'adhoc' if ad_hoc else 'cron'}-{label}-{i}"
        jobs.append(JobArrival(t, name, dag, model, scheduled=not ad_hoc))
    return Workload("k8s-batch", tuple(jobs), c.num_executors, K8S_FIDELITY)


K8S_FIDELITY = Fidelity(moving_delay=0.0, wave_durations=True)
"""No moving delay (a pod slot serves any workflow); durations from `K8sPodDurations`."""
