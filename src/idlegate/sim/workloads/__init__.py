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
* `alibaba` — DAG jobs of Alibaba's 2018 production trace (`idlegate.sim.alibaba`),
  drawn uniformly, Poisson arrivals, 100 executors, task durations spread around the
  trace's figures. Needs the trace (`alibaba_dir`).
* `tpch-like` — a *synthetic* stand-in that needs no data: random DAGs shaped like
  TPC-H query plans (see `tpch_like_spec`). It is not TPC-H; it only mimics the shape.
* `mixed` — one Poisson stream where a fraction `alpha` of the jobs come from the
  synthetic two-type set and the rest from TPC-H (or the TPC-H-like generator).
* `bursty` — sessions of short jobs (an ON/OFF Markov-modulated stream, mean session size
  and burstiness configurable) merged with a Poisson stream of long jobs; the workload
  where holding a long job back before a session can pay.
* `k8s-batch` — Argo/Airflow-style pipelines of pods that run for minutes (ETL chains,
  fan-out/fan-in, train→eval), no moving delay, a start latency in every pod; cron
  bursts (every 15 min, jittered) plus ad-hoc Poisson jobs.
* `argo-shapes` — Argo Workflows in the shapes of Argo's own examples (diamonds, steps,
  loops, map-reduce, nested DAGs, CI pipelines), mapped by `idlegate.sim.argo`, pods of
  minutes as in `k8s-batch`, Poisson arrivals.
* `airflow-shapes` — Airflow DAG runs in the shapes of Airflow's own example DAGs (task
  groups, mapped tasks, fan-outs, example_complex), mapped by `idlegate.sim.airflow` with
  Airflow's priorities, pods of minutes as in `k8s-batch`, Poisson arrivals.
* `follow` — each long job (`size_ratio` × a short one) followed after a random lag by a
  session of 3–4 short jobs, plus a share of uncorrelated Poisson jobs: arrivals that
  tell what comes next.
* `push` — one trigger starts one long and several short workflows a few seconds apart.
* `recurring` — named pipelines on cron-like schedules (`PeriodicStarts`: period, phase,
  jitter), the same DAG and similar work every run, plus ad-hoc jobs.
* `shift` — a regime shift: one generated workload, then another on the same cluster
  (TPC-H-like DAGs, then minute-scale pods by default).
* `file` — workflows from a YAML/JSON file, all at t=0, as a stream, or replayed at the
  arrival times a history file records (with measured task durations, `sim.history`).

`synthetic`, `bursty` and `mixed` take `size_distribution` (two-type, pareto, lognormal):
heavy-tailed job sizes with the two-type set's mean, so `load` keeps its meaning.

Offered load = (mean job work / mean interarrival) / executors, with work measured in
estimated executor-seconds (`Dag.total_work`). Instead of an interarrival (or a rate) a
generator may be given a target `load`; the interarrival then follows from the mean job
work of the generator's distribution.

The package, by concern (everything public is re-exported here, so
`from idlegate.sim.workloads import X` is the one import to use):

* `base` — seeds, arrival arithmetic, the shared arrival and stream options, and
  `stream_workload` (a job source's jobs on a Poisson stream).
* `tpch_like` — the TPC-H-like DAG generator and its `DagShape`.
* `alibaba` — the `alibaba` workload (its config and job source).
* `sources` — job sources (two-type, TPC-H, TPC-H-like, mixes) and heavy-tailed sizes.
* `options` — the typed configs of the generated workloads.
* `generators` — the synthetic, bursty, tpch, tpch-like and mixed generators.
* `k8s_batch` — the `k8s-batch` workload (its config, pipelines and pod durations).
* `argo_shapes` — the `argo-shapes` workload (Argo example shapes as manifests).
* `airflow_shapes` — the `airflow-shapes` workload (Airflow example DAGs as exports).
* `triggered` — what `follow` and `push` share (triggers releasing long and short jobs,
  `job_class`); `follow` and `push` — their configs and generators.
* `schedule` — `PeriodicStarts`, a recurring start time (reused by cron-like resources).
* `recurring` — the `recurring` workload (`RecurringPipeline`, `RecurringConfig`).
* `shift` — the `shift` workload (two generated phases on one cluster, `ShiftConfig`).
* `file` — the `file` workload (workflow files and replayed histories).
* `kinds` — `WORKLOADS`, `workload_config`, `build_workload`, `describe_workloads`;
  `registry` — the catalogue that fills `WORKLOADS` (`CATALOGUE`).
"""

from __future__ import annotations

from idlegate.sim.workloads.airflow_shapes import AirflowShapesConfig, airflow_shapes_workload
from idlegate.sim.workloads.alibaba import (
    DURATION_SPREAD,
    AlibabaConfig,
    AlibabaSource,
    alibaba_workload,
)
from idlegate.sim.workloads.argo_shapes import (
    ArgoShapesConfig,
    argo_shapes_workload,
    mean_shape_work,
)
from idlegate.sim.workloads.base import (
    MAX_JOBS,
    ArrivalOptions,
    SeedLike,
    StreamOptions,
    as_rng,
    interarrival_for_load,
    offered_load,
    poisson_times,
    split_streams,
    stream_workload,
)
from idlegate.sim.workloads.file import (
    ArrivalMode,
    FileConfig,
    file_workload,
)
from idlegate.sim.workloads.follow import FollowConfig, follow_workload
from idlegate.sim.workloads.generators import (
    bursty_workload,
    mean_job_work,
    mixed_workload,
    session_arrivals,
    synthetic_workload,
    tpch_like_workload,
    tpch_workload,
)
from idlegate.sim.workloads.k8s_batch import (
    K8sBatchConfig,
    K8sPodDurations,
    k8s_batch_workload,
    mean_pipeline_work,
)
from idlegate.sim.workloads.kinds import (
    WORKLOADS,
    WorkloadKind,
    build_workload,
    describe_workloads,
    workload_config,
    workload_kind,
)
from idlegate.sim.workloads.options import (
    BurstyConfig,
    MixedConfig,
    SyntheticConfig,
    TpchConfig,
    TpchLikeConfig,
    TpchOptions,
    TwoTypeOptions,
)
from idlegate.sim.workloads.push import PushConfig, push_workload
from idlegate.sim.workloads.recurring import (
    DEFAULT_PIPELINES,
    RecurringConfig,
    RecurringPipeline,
    recurring_workload,
)
from idlegate.sim.workloads.registry import CATALOGUE
from idlegate.sim.workloads.schedule import PeriodicStarts
from idlegate.sim.workloads.shift import (
    PHASE_WORKLOADS,
    ShiftConfig,
    shift_phase,
    shift_workload,
    switch_time,
)
from idlegate.sim.workloads.sources import (
    DEFAULT_SIZE_SHAPE,
    MAX_TASK_SECONDS,
    DrawnJob,
    JobShape,
    JobSource,
    MixSource,
    SizeDistribution,
    TpchLikeSource,
    TpchSource,
    TwoTypeSource,
    size_factors,
)
from idlegate.sim.workloads.tpch_like import (
    ESTIMATE_SAMPLES,
    ESTIMATE_SEED,
    EXTRA_EDGE_PROB,
    MEDIAN_TASKS,
    SMALL_DAG,
    STAGE_SKEW,
    TASKS_SIGMA,
    DagShape,
    estimate_tpch_like_work,
    tpch_like_spec,
)
from idlegate.sim.workloads.triggered import LagDistribution, TriggeredOptions, job_class

__all__ = [
    "CATALOGUE",
    "DEFAULT_PIPELINES",
    "DEFAULT_SIZE_SHAPE",
    "DURATION_SPREAD",
    "ESTIMATE_SAMPLES",
    "ESTIMATE_SEED",
    "EXTRA_EDGE_PROB",
    "MAX_JOBS",
    "MAX_TASK_SECONDS",
    "MEDIAN_TASKS",
    "PHASE_WORKLOADS",
    "SMALL_DAG",
    "STAGE_SKEW",
    "TASKS_SIGMA",
    "WORKLOADS",
    "AirflowShapesConfig",
    "AlibabaConfig",
    "AlibabaSource",
    "ArgoShapesConfig",
    "ArrivalMode",
    "ArrivalOptions",
    "BurstyConfig",
    "DagShape",
    "DrawnJob",
    "FileConfig",
    "FollowConfig",
    "JobShape",
    "JobSource",
    "K8sBatchConfig",
    "K8sPodDurations",
    "LagDistribution",
    "MixSource",
    "MixedConfig",
    "PeriodicStarts",
    "PushConfig",
    "RecurringConfig",
    "RecurringPipeline",
    "SeedLike",
    "ShiftConfig",
    "SizeDistribution",
    "StreamOptions",
    "SyntheticConfig",
    "TpchConfig",
    "TpchLikeConfig",
    "TpchLikeSource",
    "TpchOptions",
    "TpchSource",
    "TriggeredOptions",
    "TwoTypeOptions",
    "TwoTypeSource",
    "WorkloadKind",
    "airflow_shapes_workload",
    "alibaba_workload",
    "argo_shapes_workload",
    "as_rng",
    "build_workload",
    "bursty_workload",
    "describe_workloads",
    "estimate_tpch_like_work",
    "file_workload",
    "follow_workload",
    "interarrival_for_load",
    "job_class",
    "k8s_batch_workload",
    "mean_job_work",
    "mean_pipeline_work",
    "mean_shape_work",
    "mixed_workload",
    "offered_load",
    "poisson_times",
    "push_workload",
    "recurring_workload",
    "session_arrivals",
    "shift_phase",
    "shift_workload",
    "size_factors",
    "split_streams",
    "stream_workload",
    "switch_time",
    "synthetic_workload",
    "tpch_like_spec",
    "tpch_like_workload",
    "tpch_workload",
    "workload_config",
    "workload_kind",
]
