"""The `alibaba` workload: DAG jobs of Alibaba's 2018 production trace, Poisson arrivals.

Jobs are drawn uniformly, with replacement, from the trace's folder (`sim.alibaba`;
`alibaba_dir`, else `$IDLEGATE_ALIBABA_DIR`, else the checkout's
``../shared/data/alibaba``), optionally only those of `min_stages` stages or more. The
trace has no arrival times for them, so they arrive as a Poisson stream (`init` at t=0,
then `num_stream`), its mean gap from `load` as for every streamed workload: the mean
job work is the trace's own (about 67,000 executor-seconds over its 1,832 jobs, carried
by a few huge ones: 1 % of the jobs hold 69 % of the work). Default: 100 executors,
1 + 199 jobs at offered load 0.85, the setting in which Decima reports its Alibaba
result.

Task durations. The trace gives one figure per stage, its instances' duration in whole
seconds; schedulers see it as the estimate. A task really runs for that figure times a
log-normal factor of mean 1 and spread `duration_spread` (default 0.35), so the work,
and with it what `load` means, stays the trace's. Why 0.35: it is the measured spread
of Spark task durations inside one stage, the median over Decima's TPC-H stages
(coefficient of variation 0.37 of ``rest_wave`` at one executor count, over 5,171
stage-counts with 10 or more tasks); the trace itself keeps only the one figure. A
spread of 0 replays the figures exactly, as spark-sched-sim does.

No moving delay by default: the figures are whole instance run times measured by
Alibaba's batch scheduler, with no Spark executor to warm up or move between jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator

from idlegate.sim.alibaba import AlibabaJob, AlibabaTrace, open_alibaba_trace
from idlegate.sim.engine import Workload
from idlegate.sim.spec import MAX_STAGES
from idlegate.sim.workloads.base import (
    MAX_JOBS,
    ArrivalOptions,
    SeedLike,
    StreamOptions,
    _fidelity,
    stream_workload,
)
from idlegate.sim.workloads.k8s_batch import K8sPodDurations
from idlegate.sim.workloads.sources import DrawnJob

DURATION_SPREAD = 0.35
"""Default log-normal spread of a task's duration around its stage's figure (see above)."""


class AlibabaConfig(ArrivalOptions, StreamOptions):
    """A Poisson stream of the trace's DAG jobs on `num_executors` executors."""

    alibaba_dir: str | None = None
    """Directory holding adj_mat_N.npy and ins_durN.npy (default: $IDLEGATE_ALIBABA_DIR
    or ../shared/data/alibaba next to the repository)."""
    min_stages: int = Field(1, ge=1, le=MAX_STAGES)
    """Draw only jobs of at least this many stages (2: DAGs only, as spark-sched-sim)."""
    duration_spread: float = Field(DURATION_SPREAD, ge=0, le=3)
    """Log-normal spread (sigma) of a task's duration around its stage's figure, mean
    kept (0: exactly the figure)."""
    num_stream: int = Field(199, ge=0, le=MAX_JOBS)
    """Jobs arriving after t=0 as a Poisson stream."""
    num_executors: int = Field(100, ge=1, le=100_000)
    """Executors of the cluster."""
    moving_delay: float = Field(0.0, ge=0)
    """Seconds an executor needs to move to another job."""
    DEFAULT_LOAD: ClassVar[float | None] = 0.85

    @field_validator("alibaba_dir", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    def source(self) -> AlibabaSource:
        trace = open_alibaba_trace(self.alibaba_dir)
        return AlibabaSource(trace, trace.select(self.min_stages), self.duration_spread)

    def mean_job_work(self) -> float:
        """Mean estimated work of a drawn job (what `load` is measured against)."""
        return self.source().mean_work()


@dataclass(frozen=True)
class AlibabaSource:
    """Jobs of the trace drawn uniformly with replacement; tasks spread around the figure."""

    trace: AlibabaTrace
    jobs: tuple[AlibabaJob, ...]
    spread: float

    def draw(self, rng: np.random.Generator, n: int) -> list[DrawnJob]:
        picks = rng.integers(len(self.jobs), size=n).tolist()
        out = []
        for i in picks:
            job = self.jobs[i]
            model = K8sPodDurations(0.0, job.dag.durations, self.spread) if self.spread else None
            out.append(DrawnJob(job.name, job.dag, model))
        return out

    def mean_work(self) -> float:
        return float(np.mean([j.dag.total_work for j in self.jobs]))


def alibaba_workload(config: AlibabaConfig | None = None, seed: SeedLike = 0) -> Workload:
    """`init` + `num_stream` jobs of the trace, Poisson arrivals (see the module doc)."""
    c = config or AlibabaConfig()
    fidelity = _fidelity(c.moving_delay, c.duration_spread > 0)
    return stream_workload("alibaba", c.source(), c, fidelity, seed)
