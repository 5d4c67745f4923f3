"""Rigid (HPC-style) jobs: one gang stage of n tasks, a requested time and an actual run time.

A rigid job asks for `n` executors at once for `r` seconds (its *requested time*, the
user's estimate or limit) and really runs for `t` seconds. In idlegate it is a one-stage
DAG whose stage is a gang (all `n` tasks start together, `sim.cluster`), whose
`duration` is the requested time `r` (what schedulers see) and whose payload is a
:class:`RigidRun` duration model returning the actual run time `t` (what the simulator
runs). With `requested_time: run` workloads set r = t, as SchedInspector does.

The workload fidelity of a rigid workload samples durations from the payload and has no
moving delay (:data:`RIGID_FIDELITY`), so every task of a job ends exactly `t` seconds
after the job starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.durations import Uniforms
from idlegate.sim.engine import Fidelity, JobArrival, Workload
from idlegate.sim.spec import MAX_TASK_SECONDS, StageSpec, WorkflowSpec

RequestedTime = Literal["trace", "run"]
"""Where a job's requested time comes from: the trace's field (else the run time), or the run time."""

RIGID_FIDELITY = Fidelity(moving_delay=0.0, wave_durations=True)
"""Actual run times come from each job's `RigidRun`; no executor moving delay."""


@dataclass(frozen=True, slots=True)
class RigidRun:
    """The duration model of a rigid job: every task runs exactly `run_time` seconds.

    `submit_time` is the job's submit time in the trace's own clock (SWF field 2, or the
    generator's clock); priority rules that use absolute submit times (F1) read it, since
    a workload's arrival times start at 0 at its first job.
    """

    run_time: float
    submit_time: float | None = None

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        return self.run_time


@dataclass(frozen=True, slots=True)
class RigidJob:
    """One rigid job as a trace or generator gives it (times in seconds)."""

    id: int
    """The trace's job number (SWF field 1) or the generator's counter."""
    submit: float
    run_time: float
    processors: int
    requested_time: float


@lru_cache(maxsize=65536)
def rigid_dag(processors: int, requested_time: float) -> Dag:
    """The one-stage gang DAG of a rigid job (shared between jobs of the same shape)."""
    stage = StageSpec(
        name="job",
        tasks=processors,
        # the spec bounds a task at MAX_TASK_SECONDS; longer requests are clipped to it
        task_duration_seconds=min(requested_time, MAX_TASK_SECONDS),
        gang=True,
    )
    return Dag.from_spec(WorkflowSpec(stages=(stage,)))


def rigid_workload(
    name: str,
    jobs: Sequence[RigidJob],
    num_executors: int,
    requested_time: RequestedTime = "trace",
) -> Workload:
    """A workload of `jobs` (sorted by submit time), arrivals relative to the first submit.

    `requested_time="run"` makes every job's requested time its run time. Jobs wider than
    `num_executors` could never start, so they are an error here (the readers drop them).
    """
    if not jobs:
        raise IdlegateError(f"workload {name!r} has no jobs; choose a larger window or trace")
    wide = [j for j in jobs if j.processors > num_executors]
    if wide:
        raise IdlegateError(
            f"workload {name!r}: job {wide[0].id} needs {wide[0].processors} processors but the "
            f"cluster has {num_executors} executors; raise num_executors (--executors) to at "
            f"least {max(j.processors for j in wide)}"
        )
    origin = jobs[0].submit
    arrivals = []
    for j in jobs:
        requested = j.run_time if requested_time == "run" else j.requested_time
        arrivals.append(
            JobArrival(
                time=j.submit - origin,
                name=f"job-{j.id}",
                dag=rigid_dag(j.processors, float(requested)),
                durations=RigidRun(float(j.run_time), float(j.submit)),
            )
        )
    return Workload(name, tuple(arrivals), num_executors, RIGID_FIDELITY)
