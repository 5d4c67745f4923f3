"""The `airflow` baseline: the order Airflow's scheduler queues task instances in.

Airflow's scheduler fills its open slots with the schedulable task instances (their
upstream tasks done) of every DAG run, highest ``priority_weight`` first, ties going to
the older DAG run (its logical date or run_after) and then the lower map index; a DAG
runs at most ``max_active_tasks`` task instances at once. Under the default weight rule
``downstream`` a task's priority is its own weight plus every downstream task's, so the
first tasks of a new run outrank the last tasks of an old one. That is what this
scheduler does:

* the launchable stage of highest priority goes first: the `AirflowSpec.priorities` its
  DAG was mapped with (Airflow's own, weight rules and weights), else the downstream rule
  with every weight 1 (one plus the stage's descendants), as for a DAG Airflow would run
  with its defaults; ties: the earlier job, then the lower stage index;
* a job runs at most its `max_active_tasks` tasks at once: its `AirflowSpec`'s, else
  this scheduler's `max_active_tasks` option, else no cap (Airflow's cap is per DAG,
  over all its runs; here it is per run);
* never an idle slot.

With the KubernetesExecutor this order holds where Airflow's own slots (``parallelism``,
pools) are what is scarce; where the cluster is, pending pods of equal priority bind in
creation order, which is the order Airflow queued them in.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from idlegate.policy.caps import checked_cap, spec_cap
from idlegate.policy.heuristics import _Baseline, launch_decision
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Stage


def stage_priorities(dag: Dag) -> tuple[float, ...]:
    """Airflow's priority of each stage of `dag` (see the module docstring)."""
    own = getattr(dag.spec, "priorities", None)
    if own:
        return tuple(float(p) for p in own)
    graph = dag.graph
    return tuple(1.0 + len(nx.descendants(graph, i)) for i in range(dag.num_stages))


def job_cap(job: Job, default: int | None = None) -> int | None:
    """The job's `max_active_tasks` (its spec's, if mapped from Airflow), else `default`."""
    return spec_cap(job, "max_active_tasks", default)


class AirflowScheduler(_Baseline):
    """Highest Airflow priority first, then FIFO by run (module docstring)."""

    name = "airflow"

    def __init__(self, *, max_active_tasks: int | None = None) -> None:
        self.max_active_tasks = checked_cap("max_active_tasks", max_active_tasks, "tasks")
        self._priorities: dict[int, tuple[float, ...]] = {}

    def _params(self) -> dict[str, Any]:
        return {"max_active_tasks": self.max_active_tasks}

    def reset(self, rng: Any) -> None:
        """Forget the priorities of the previous run's jobs."""
        self._priorities.clear()

    def priority(self, stage: Stage) -> float:
        """The stage's Airflow priority (computed once per job)."""
        job = stage.job
        found = self._priorities.get(job.id)
        if found is None:
            found = self._priorities[job.id] = stage_priorities(job.dag)
        return found[stage.index]

    def decide(self, view: ClusterView) -> Action:
        free = view.free_executors
        if free <= 0:
            return WAIT
        chosen: Stage | None = None
        chosen_key: tuple[float, float, int, int] | None = None
        chosen_cap = 0
        runnable = view.runnable
        for job in view.jobs:
            if not (stages := runnable(job)):
                continue
            cap = min(view.num_executors, job_cap(job, self.max_active_tasks) or view.num_executors)
            if job.held >= cap:
                continue
            for stage in stages:
                if stage.gang and stage.tasks > free:
                    continue
                key = (-self.priority(stage), job.arrival, job.id, stage.index)
                if chosen_key is None or key < chosen_key:
                    chosen, chosen_key, chosen_cap = stage, key, cap
        return WAIT if chosen is None else launch_decision(chosen, chosen_cap)
