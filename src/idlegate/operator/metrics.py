"""Prometheus metrics of the operator as one pool sees them (:class:`Metrics`).

The series themselves, their names, help texts and labels (the contract deploy/README.md
documents), are declared in `idlegate.operator.metric_families`; here a pool binds them to its
``pool`` label and reads its state into the gauges when a scrape asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram

from idlegate.api.pool_spec import DEFAULT_POOL
from idlegate.api.status import Phase
from idlegate.operator.metric_families import DECISION_KINDS, POOL, MetricFamilies
from idlegate.sim.resources import MILLI

if TYPE_CHECKING:
    from idlegate.operator.core.tracking import Workflow
    from idlegate.sim.admission import Admission
    from idlegate.sim.cluster import Cluster

__all__ = ["Metrics"]

if TYPE_CHECKING:  # each family's attribute, bound to a pool as `Metrics` does at run time
    _Families = MetricFamilies
else:
    _Families = object


class Metrics(_Families):
    """The series as one pool's bridge sees them, each an attribute named as in
    :class:`MetricFamilies`: a per-pool one bound to `pool` (its child, or, when it has
    further labels, an object whose ``labels(*values)`` is the child with the pool first),
    an operator-wide one as it is. A pool beside the default one shares its families:
    ``Metrics(size, policy, pool=NAME, beside=default_metrics)``."""

    def __init__(
        self,
        pool_size: int,
        policy: str,
        *,
        pool: str = DEFAULT_POOL,
        beside: Metrics | None = None,
    ) -> None:
        f = beside.families if beside is not None else MetricFamilies()
        self.families: MetricFamilies = f
        self.registry = f.registry
        self.pool = pool
        for attr, family in vars(f).items():
            if not isinstance(family, Counter | Gauge | Histogram):
                continue
            if family not in f.pooled:
                setattr(self, attr, family)
            elif f.pooled[family]:  # (its labels(*values) puts the pool first)
                setattr(self, attr, SimpleNamespace(labels=partial(family.labels, pool)))
            else:  # (its child, made now, so a scrape shows it)
                setattr(self, attr, family.labels(pool))
        # what a scrape shows of the pool before anything happened in it
        for result in ("succeeded", "failed"):
            self.completion_time.labels(result)
        for kind in DECISION_KINDS:
            self.decisions.labels(kind)
        for result in ("succeeded", "failed", "deleted"):
            self.workflows_finished.labels(result)
        self.pool_size.set(pool_size)
        self.policy_errors.labels(policy)
        self._followed: set[str] = set()
        self.followed = ""
        """The policy the gauge shows followed now."""
        self.follow(policy)
        self.info.labels(policy).set(1)

    def remove(self) -> None:
        """Remove the pool's series from the registry (its ExecutorPool is gone or rebuilt:
        a scrape no longer shows it)."""
        for family in self.families.pooled:
            family.remove_by_labels({POOL: self.pool})

    def follow(self, policy: str) -> None:
        """`policy` is followed from now on (the gauge of the others drops to 0)."""
        if policy == self.followed:
            return
        self.followed = policy
        for other in self._followed:
            self.following.labels(other).set(0)
        self._followed.add(policy)
        self.following.labels(policy).set(1)

    def watch(
        self, workflows: Mapping[Any, Workflow], cluster: Cluster, held: Mapping[str, Mapping]
    ) -> None:
        """The gauges of the pool's state, read from `workflows` (the DagWorkflows), `held`
        (every kind's) and `cluster` when a scrape asks (nothing to do at each round)."""
        jobs = cluster.jobs
        self.busy_executors.set_function(lambda: cluster.busy)
        self.active_workflows.set_function(lambda: sum(map(len, list(held.values()))))
        pending = Phase.PENDING
        self.pending_workflows.set_function(
            lambda: sum(wf.phase is pending for wf in list(workflows.values()))
        )
        self.runnable_stages.set_function(lambda: sum(len(j.runnable) for j in list(jobs)))
        for name in cluster.resource_names:
            capacity = partial(lambda n: float(cluster.capacity.units(n)), name)
            self.resource_capacity.labels(name).set_function(capacity)
            used = partial(lambda n: float(cluster.used_resources.units(n)), name)
            self.resource_used.labels(name).set_function(used)
        self.idle_slots.set_function(
            lambda: sum(s.idle_until is not None for j in list(jobs) for s in j.stages)
        )

    def watch_queues(self, admission: Admission, cluster: Cluster) -> None:
        """The gauges of the pool's queues (read when a scrape asks)."""
        jobs = cluster.jobs
        self._seen = [0] * len(admission.queues), 0
        """Of the admission's ledger: the waits per queue and the overdue starts observed."""
        for q, spec in enumerate(admission.queues):
            for i, name in enumerate(admission.dims):
                used = partial(lambda q, i: admission.used[q][i] / MILLI, q, i)
                self.queue_usage.labels(spec.name, name).set_function(used)
            self.queue_share.labels(spec.name).set_function(partial(admission.share, q))
            pending = partial(lambda q: sum(j.queue == q and bool(j.runnable) for j in jobs), q)
            self.queue_pending.labels(spec.name).set_function(pending)
            self.queue_bound_hits.labels(spec.name)

    def note_queues(self, admission: Admission) -> list[tuple[int, float, float]]:
        """Observe the waits and bound hits the admission's ledger gained since the last
        call; returns those bound hits (the ledger's `overdue` entries)."""
        ledger, (waits, overdue) = admission.ledger, self._seen
        for q, spec in enumerate(admission.queues):
            for wait in ledger.waits[q][waits[q] :]:
                self.queue_wait.labels(spec.name).observe(wait)
            waits[q] = len(ledger.waits[q])
        for q, _bound, _start in ledger.overdue[overdue:]:
            self.queue_bound_hits.labels(admission.queues[q].name).inc()
        self._seen = waits, len(ledger.overdue)
        return ledger.overdue[overdue:]

    def value(self, name: str, **labels: str) -> float:
        """The current value of one sample (tests and the probe), of this pool if the series
        has a pool label: 0.0 if absent."""
        found = self.registry.get_sample_value(name, {POOL: self.pool, **labels})
        if found is None:
            found = self.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else float(found)

    def decision_count(self) -> float:
        """Decisions so far, of every kind."""
        return sum(self.value("idlegate_decisions_total", kind=kind) for kind in DECISION_KINDS)
