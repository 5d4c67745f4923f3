"""What a comparison measured: the workload's setting, resolved from its own config.

A user gives some options (``--load 0.85``, ``--tpch-dir``) and the workload fills in the
rest (every TPC-H size folder it finds, the interarrival that the load implies). A
result is only reproducible and comparable when that resolved setting is written next
to it, so :func:`describe_setting` asks the workload's typed config the same questions
the generator asks: the mean interarrival, the offered load, the TPC-H sizes and
queries drawn from, and where the traces were read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError
from idlegate.sim.alibaba import resolve_alibaba_dir
from idlegate.sim.engine import Workload
from idlegate.sim.lublin import LublinConfig
from idlegate.sim.swf import SwfConfig
from idlegate.sim.workloads import (
    AirflowShapesConfig,
    AlibabaConfig,
    ArgoShapesConfig,
    ArrivalOptions,
    BurstyConfig,
    FileConfig,
    FollowConfig,
    K8sBatchConfig,
    MixedConfig,
    PushConfig,
    RecurringConfig,
    ShiftConfig,
    SyntheticConfig,
    TpchConfig,
    TpchLikeConfig,
    mean_job_work,
    offered_load,
    workload_config,
)
from idlegate.sim.workloads.shared import SharedConfig, heavy_from_trace
from idlegate.sim.workloads.teams import TeamsConfig

__all__ = ["Setting", "describe_setting"]


@dataclass(frozen=True)
class Setting:
    """The resolved setting of one workload (the same for every seed but the arrivals)."""

    workload: str
    num_executors: int
    """Executors of the cluster (K)."""
    jobs: int
    """Jobs in the arrival sequence of the first seed (jobs at t=0 plus streamed ones)."""
    mean_interarrival: float | None
    """Mean seconds between streamed arrivals (None: replayed at recorded times)."""
    offered_load: float | None
    """Mean job work / interarrival / K at that interarrival (None: not defined); on a
    pool of resources, that of its dominant resource (`resource_loads`)."""
    load_given: bool
    """True when the interarrival was derived from a target load (``--load``)."""
    tpch_dir: str | None
    """Absolute directory the TPC-H traces were read from (None: no traces used)."""
    tpch_sizes: tuple[str, ...] | None
    """TPC-H input sizes drawn from (every size folder found, unless ``sizes`` chose)."""
    tpch_queries: tuple[int, ...] | None
    """TPC-H query numbers drawn from."""
    source: str
    """Where the jobs came from, as one phrase (trace directory, file, or generator)."""
    resource_loads: dict[str, float] | None = None
    """On a pool of resources, the offered load of each, pods included (None: a pods-only
    pool, whose load is its pods')."""
    jobs_per_seed: tuple[int, ...] = ()
    """Jobs in the arrival sequence of each seed, in seed order (empty: only the first
    seed's, `jobs`, is known). A workload sized by time (`hours`) draws a number of its
    own on every seed."""
    hours: float | None = None
    """The hours the arrivals span, for a workload sized by them rather than by a job
    count (`shared`); None for every other."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (a pods-only pool's without `resource_loads`)."""
        out = asdict(self)
        for key in ("tpch_sizes", "tpch_queries", "jobs_per_seed"):
            if out[key] is not None:
                out[key] = list(out[key])
        if out["resource_loads"] is None:
            del out["resource_loads"]
        return out

    @property
    def dominant(self) -> str | None:
        """The resource of the highest offered load on a pool of resources (else None)."""
        if not self.resource_loads:
            return None
        return max(self.resource_loads, key=self.resource_loads.__getitem__)

    def summary(self) -> str:
        """One line: executors, jobs, the arrival rate and what chose it."""
        parts = [f"{self.num_executors} executors", self.jobs_text()]
        if self.mean_interarrival is not None:
            gap = f"mean interarrival {self.mean_interarrival:.3g} s"
            if self.offered_load is not None:
                gap += f" ({self._load()})"
            parts.append(gap)
        return ", ".join(parts)

    def jobs_text(self) -> str:
        """The jobs each seed ran: one number when every seed had as many, else their
        range and mean; with the hours the arrivals span for a workload sized by them."""
        counts = self.jobs_per_seed or (self.jobs,)
        low, high = min(counts), max(counts)
        text = f"{low} jobs per seed"
        if low != high:
            text = f"{low}–{high} jobs per seed (mean {sum(counts) / len(counts):.1f})"
        if self.hours is not None:
            text += f" arriving over {self.hours:g} h"
        return text

    def _load(self) -> str:
        """The offered load, of which resource on a pool of resources, and whether the
        interarrival was chosen for it (``--load`` sets the pods' load)."""
        how = "chosen for" if self.load_given else "i.e."
        dominant = self.dominant
        if dominant is None or self.resource_loads is None:
            return f"{how} offered load {self.offered_load:.3g}"
        of = f"{self.resource_loads[dominant]:.3g} of {dominant}, the pool's dominant resource"
        if not self.load_given or dominant == "pods":
            return f"{how} offered load {of}"
        return f"chosen for offered load {self.resource_loads['pods']:.3g} of pods: {of}"


def resource_loads(built: Workload, pods_load: float) -> dict[str, float] | None:
    """The offered load of each resource `built`'s pool counts, pods (`pods_load`)
    included: the work arriving per second, times the jobs' mean demand of the resource
    per executor-second (work-weighted, over `built`'s jobs), over the pool's capacity of
    it. None for a pods-only pool. 0.04 of 330 pods is 0.78 of 24 CPUs when a task asks
    1.4 CPUs on average."""
    capacity = built.resources
    names = [r for r in capacity or () if r != "pods"]
    if capacity is None or not names:
        return None
    work, asked = 0.0, dict.fromkeys(names, 0.0)
    for job in built.jobs:
        dag = job.dag
        for n, length, demand in zip(dag.tasks, dag.durations, dag.demands, strict=False):
            for r in names:
                asked[r] += n * length * demand[r]
        work += dag.total_work
    arriving = pods_load * built.num_executors  # executor-seconds of work per second
    loads = {"pods": pods_load}
    for r in names:
        loads[r] = arriving * asked[r] / work / capacity[r] if work > 0 else 0.0
    return loads


def _tpch_used(config: Any) -> bool:
    if isinstance(config, TpchConfig):
        return True
    return isinstance(config, MixedConfig) and config.dag_source_name() == "tpch"


def describe_setting(
    workload: str,
    options: Mapping[str, Any],
    built: Workload,
    jobs_per_seed: Sequence[int] = (),
) -> Setting:
    """The setting of `workload` with `options` (build_workload's), `built` for its first
    seed, `jobs_per_seed` the job count of each seed's arrival sequence (none given: only
    `built`'s is known)."""
    config = workload_config(workload, **options)
    k = built.num_executors
    gap = load = None
    if isinstance(config, ArrivalOptions):
        try:
            work = mean_job_work(config)
            gap = config.mean_interarrival(lambda: work, k)
            load = offered_load(work, gap, k)
        except IdlegateError:  # e.g. a history replayed at its recorded arrival times
            gap = load = None
    given = bool(isinstance(config, ArrivalOptions) and config.load is not None)
    loads = None if load is None else resource_loads(built, load)
    if loads is not None:
        load = max(loads.values())
    tpch_dir = sizes = queries = None
    if _tpch_used(config):
        source = config.tpch_source()
        tpch_dir = str(Path(source.library.directory).resolve())
        sizes, queries = tuple(source.sizes), tuple(source.queries)
    return Setting(
        workload=workload,
        num_executors=k,
        jobs=len(built.jobs),
        mean_interarrival=gap,
        offered_load=load,
        load_given=given,
        tpch_dir=tpch_dir,
        tpch_sizes=sizes,
        tpch_queries=queries,
        source=jobs_source(config),
        resource_loads=loads,
        jobs_per_seed=tuple(jobs_per_seed),
        hours=config.hours if isinstance(config, SharedConfig) else None,
    )


def _traces(config: Any) -> str:
    """The TPC-H traces a config draws from: directory, sizes, query count."""
    source = config.tpch_source()
    directory = Path(source.library.directory).resolve()
    return (
        f"TPC-H traces from {directory} (sizes {', '.join(source.sizes)}; "
        f"{len(source.queries)} queries)"
    )


GENERATED = "(generated, no trace files)"


def _mixed(c: MixedConfig) -> str:
    dags = _traces(c) if c.dag_source_name() == "tpch" else f"TPC-H-like DAGs {GENERATED}"
    return f"two-type jobs (generated) and {dags}"


def _alibaba(c: AlibabaConfig) -> str:
    source = c.source()
    return (
        f"Alibaba 2018 trace from {source.trace.directory.resolve()} ({len(source.jobs)} "
        f"jobs of {c.min_stages}+ stages; task spread {c.duration_spread})"
    )


def _shift(c: ShiftConfig) -> str:
    phases = (
        f"phase {i}, {getattr(c, which)}: {jobs_source(c.phase_config(which))}"
        for i, which in ((1, "first"), (2, "second"))
    )
    return "; ".join(phases)


def _teams(c: TeamsConfig) -> str:
    return f"{c.teams} teams' streams of {c.base}: {jobs_source(workload_config(c.base))}"


def _shared(c: SharedConfig) -> str:
    if heavy_from_trace(c):
        where = resolve_alibaba_dir(c.alibaba_dir).resolve()
        heavy = f"Alibaba 2018 trace from {where} ({c.split} split, 2+ stages)"
    else:
        heavy = f"heavy-tailed DAGs {GENERATED}"
    return f"heavy team: {heavy}; science and small teams: generated"


def _swf(c: SwfConfig) -> str:
    part = "" if c.part == "all" else f", its {c.part} part"
    return f"rigid jobs of the SWF trace {Path(c.path).expanduser().resolve()}{part}"


SOURCES: dict[type, Callable[[Any], str]] = {
    SyntheticConfig: lambda c: f"two-type jobs {GENERATED}",
    BurstyConfig: lambda c: f"two-type jobs {GENERATED}",
    TpchConfig: _traces,
    TpchLikeConfig: lambda c: f"TPC-H-like DAGs {GENERATED}",
    MixedConfig: _mixed,
    K8sBatchConfig: lambda c: f"pod pipelines {GENERATED}",
    ArgoShapesConfig: lambda c: f"workflows shaped like Argo's examples {GENERATED}",
    AirflowShapesConfig: lambda c: f"DAG runs shaped like Airflow's examples {GENERATED}",
    AlibabaConfig: _alibaba,
    FollowConfig: lambda c: f"long jobs, each followed by short ones {GENERATED}",
    PushConfig: lambda c: f"pushes of one long and a few short workflows {GENERATED}",
    RecurringConfig: lambda c: (
        f"{len(c.pipelines)} recurring pipelines and ad-hoc jobs {GENERATED}"
    ),
    ShiftConfig: _shift,
    TeamsConfig: _teams,
    SharedConfig: _shared,
    FileConfig: lambda c: f"workflows from {Path(c.path).expanduser().resolve()}",
    SwfConfig: _swf,
    LublinConfig: lambda c: f"rigid jobs of the Lublin-Feitelson model {GENERATED}",
}
"""Where each workload's jobs come from, by its config's type: every workload of the
catalogue has its phrase (a test checks), so none is said as a bare "generated"."""


def jobs_source(config: Any) -> str:
    """Where the jobs of a workload of `config` come from, as one phrase (the trace
    directory, file or generator it draws from)."""
    return SOURCES[type(config)](config)
