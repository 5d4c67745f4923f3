"""The `argo` baseline: the order Argo Workflows' pods run in without idlegate.

Argo's controller creates a node's pod as soon as the node is ready (its dependencies
done), and Kubernetes' scheduler binds pending pods of equal priority in the order they
were created; the only brake is the workflow's `parallelism` (most pods of the workflow
running at once). So on a full pool, the pod that became ready first runs first, whatever
its workflow: FIFO by node readiness. That is what this scheduler does:

* the launchable stage that became runnable earliest goes first (ties: the earlier job,
  then the lower stage index, i.e. creation order); a stage with no parents became
  runnable when its job arrived, any other when the cluster first asked about it, which
  is the moment its last parent finished (that frees an executor, so the cluster asks);
* a job runs at most its `parallelism` tasks at once: the `ArgoSpec.parallelism` its
  DAG was mapped with, else this scheduler's `parallelism` option, else no cap; a job at
  its cap is passed over;
* never an idle slot.
"""

from __future__ import annotations

from typing import Any

from idlegate.policy.caps import checked_cap, spec_cap
from idlegate.policy.heuristics import _Baseline, launch_decision
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Stage


def job_parallelism(job: Job, default: int | None = None) -> int | None:
    """The job's Argo `parallelism` (its spec's, if mapped from Argo), else `default`."""
    return spec_cap(job, "parallelism", default)


class ArgoScheduler(_Baseline):
    """FIFO by node readiness with Argo's per-workflow parallelism (module docstring)."""

    name = "argo"

    def __init__(self, *, parallelism: int | None = None) -> None:
        self.parallelism = checked_cap("parallelism", parallelism, "pods")
        self._ready: dict[tuple[int, int], float] = {}

    def _params(self) -> dict[str, Any]:
        return {"parallelism": self.parallelism}

    def reset(self, rng: Any) -> None:
        """Forget the readiness times of the previous run."""
        self._ready.clear()

    def ready_time(self, stage: Stage, now: float) -> float:
        """When `stage` became runnable (see the module docstring)."""
        key = stage.key
        found = self._ready.get(key)
        if found is None:
            job = stage.job
            found = job.arrival if not job.dag.parents[stage.index] else now
            self._ready[key] = found
        return found

    def decide(self, view: ClusterView) -> Action:
        free = view.free_executors
        if free <= 0:
            return WAIT
        chosen: Stage | None = None
        chosen_key: tuple[float, int, int] | None = None
        chosen_cap = 0
        runnable = view.runnable
        for job in view.jobs:
            if not (stages := runnable(job)):
                continue
            cap = min(
                view.num_executors, job_parallelism(job, self.parallelism) or view.num_executors
            )
            for stage in stages:
                key = (self.ready_time(stage, view.now), job.id, stage.index)
                if job.held >= cap or (stage.gang and stage.tasks > free):
                    continue
                if chosen_key is None or key < chosen_key:
                    chosen, chosen_key, chosen_cap = stage, key, cap
        return WAIT if chosen is None else launch_decision(chosen, chosen_cap)
