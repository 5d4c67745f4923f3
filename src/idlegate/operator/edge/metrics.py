"""Prometheus metrics of the operator, named in the style of Kueue's (``idlegate_*``).

One :class:`MetricFamilies` holds every series in its own registry (several operators may
live in one test process); :class:`idlegate.operator.edge.endpoints.Endpoints` serves it at
``/metrics``. The series of one pool's state machine (its queue, executors, decisions,
planning, policy) carry a ``pool`` label: each pool's bridge gets a :class:`Metrics`, a view
of the shared families with its pool bound, so the call sites write
``metrics.decisions.labels("launch")`` or ``metrics.busy_executors.set(n)`` whatever their
pool and one scrape serves every pool. The operator-wide series (the API's health, the
writes' counts, history, reloads, the shadow policy of the default pool) have no ``pool``
label.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from idlegate.api.status import Phase

if TYPE_CHECKING:
    from idlegate.operator.core.tracking import Workflow
    from idlegate.sim.cluster import Cluster

JCT_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400)
ADMISSION_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600)
DECISION_BUCKETS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)
DECISION_KINDS = ("launch", "idle", "wait")
PLANNING_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
POOL = "pool"
"""The label naming the pool of a per-pool series."""
DEFAULT_POOL = "default"
"""The operator's implicit pool (:data:`idlegate.api.pool_spec.DEFAULT_POOL`)."""
M = TypeVar("M", Counter, Gauge, Histogram)


class MetricFamilies:
    """Every series of the operator, in one registry; those of one pool carry a `pool`
    label (a :class:`Metrics` view binds it). The names are the contract (see
    deploy/README.md)."""

    # long: one declaration per series, in the order of the exposition; split up, the
    # contract would be harder to read as one list
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.completion_time = Histogram(
            "idlegate_workflow_completion_time_seconds",
            "Job completion time of finished workflows: completion minus creation (arrival).",
            [POOL, "result"],
            buckets=JCT_BUCKETS,
            registry=r,
        )
        self.admission_lag = Histogram(
            "idlegate_admission_lag_seconds",
            "Time from a workflow's creation (metadata.creationTimestamp) to its admission by "
            "the operator; part of its completion time.",
            buckets=ADMISSION_BUCKETS,
            labelnames=[POOL],
            registry=r,
        )
        self.pending_workflows = Gauge(
            "idlegate_pending_workflows",
            "Workflows admitted whose first task has not been released yet (the queue).",
            labelnames=[POOL],
            registry=r,
        )
        self.active_workflows = Gauge(
            "idlegate_active_workflows",
            "Workflows in the system: admitted, not finished.",
            labelnames=[POOL],
            registry=r,
        )
        self.runnable_stages = Gauge(
            "idlegate_runnable_stages",
            "Stages that could take executors now (parents done, tasks left, not idling).",
            labelnames=[POOL],
            registry=r,
        )
        self.busy_executors = Gauge(
            "idlegate_busy_executors",
            "Executors of the pool running a task pod.",
            labelnames=[POOL],
            registry=r,
        )
        self.pool_size = Gauge(
            "idlegate_executors",
            "Size of the executor pool (--pool-size).",
            labelnames=[POOL],
            registry=r,
        )
        self.idle_slots = Gauge(
            "idlegate_idle_slots",
            "Stages inside a deliberate idle slot now.",
            labelnames=[POOL],
            registry=r,
        )
        self.idle_inserted = Counter(
            "idlegate_idle_inserted_seconds",
            "Deliberate idle time the policy inserted before stages.",
            labelnames=[POOL],
            registry=r,
        )
        self.holds = Counter(
            "idlegate_holds",
            "Stages a planner held back for arrivals it expects (an idle slot, or waits "
            "while the stage could start), once per hold.",
            labelnames=[POOL],
            registry=r,
        )
        self.decisions = Counter(
            "idlegate_decisions",
            "Scheduler decisions by kind: launch a stage, idle it, or wait.",
            [POOL, "kind"],
            registry=r,
        )
        self.decision_duration = Histogram(
            "idlegate_decision_duration_seconds",
            "Time the scheduler takes for one decision.",
            buckets=DECISION_BUCKETS,
            labelnames=[POOL],
            registry=r,
        )
        self.gate_removals = Counter(
            "idlegate_gate_removals",
            "Task pods released by removing the idlegate.io/release scheduling gate.",
            registry=r,
        )
        self.foreign_releases = Counter(
            "idlegate_foreign_gate_removals",
            "Task pods whose idlegate.io/release gate was removed by someone other than the "
            "operator (by hand, another controller); each counts against the pool.",
            labelnames=[POOL],
            registry=r,
        )
        self.pods_created = Counter(
            "idlegate_pods_created", "Task pods created (gated or not).", registry=r
        )
        self.task_failures = Counter(
            "idlegate_task_failures", "Failed task pod attempts.", labelnames=[POOL], registry=r
        )
        self.workflows_finished = Counter(
            "idlegate_workflows_finished",
            "Workflows that left the system, by result.",
            [POOL, "result"],
            registry=r,
        )
        self.invalid_workflows = Counter(
            "idlegate_invalid_workflows",
            "Workflows rejected as invalid.",
            labelnames=[POOL],
            registry=r,
        )
        self.api_errors = Counter(
            "idlegate_api_errors",
            "API requests of the operator that failed, by HTTP status (0: no response).",
            ["status"],
            registry=r,
        )
        self.api_throttled = Counter(
            "idlegate_api_throttled_requests",
            "API requests of the operator answered 429 Too Many Requests (retried after the "
            "server's Retry-After, with jitter).",
            registry=r,
        )
        self.api_up = Gauge(
            "idlegate_api_up",
            "1 while the API server answers the operator, 0 during an outage: then the "
            "gauges above keep their last values and are stale.",
            registry=r,
        )
        self.api_up.set(1)
        self.api_unreachable = Counter(
            "idlegate_api_unreachable_seconds",
            "Time the API server did not answer the operator (outages, added when they end).",
            registry=r,
        )
        self.watch_restarts = Counter(
            "idlegate_watch_restarts",
            "Requests of kopf's (its watches, lists and patches) that failed and were retried.",
            registry=r,
        )
        self.crd_missing = Gauge(
            "idlegate_crd_missing",
            "1 while the operator waits for the DagWorkflow CRD to be installed.",
            registry=r,
        )
        self.policy_errors = Counter(
            "idlegate_policy_errors",
            "Decisions for which the policy raised; each was made by the fallback rule.",
            [POOL, "policy"],
            registry=r,
        )
        self.policy_switches = Counter(
            "idlegate_policy_switches",
            "Times the lookahead planner switched the policy it follows, by the policy "
            "followed from then on.",
            [POOL, "to"],
            registry=r,
        )
        self.planning_duration = Histogram(
            "idlegate_planning_duration_seconds",
            "Wall time of one plan of the lookahead planner's worker (decisions never wait "
            "on it; --plan-budget-ms bounds it).",
            buckets=PLANNING_BUCKETS,
            labelnames=[POOL],
            registry=r,
        )
        self.plans_dropped = Counter(
            "idlegate_plans_dropped",
            "Plans dropped as stale: the set of workflows changed while they were made "
            "(the worker plans again at once).",
            labelnames=[POOL],
            registry=r,
        )
        self.following = Gauge(
            "idlegate_policy_following",
            "The policy the operator's policy follows now (value 1; for a lookahead "
            "planner the policy of its last plan, else the policy itself).",
            [POOL, "policy"],
            registry=r,
        )
        self.policy_reloads = Counter(
            "idlegate_policy_reloads",
            "Reloads of a policy after its model file changed, by role (active, shadow) and "
            "result (ok; failed: the new model was refused and the policy in use kept).",
            ["role", "result"],
            registry=r,
        )
        for role in ("active", "shadow"):
            for result in ("ok", "failed"):
                self.policy_reloads.labels(role, result)
        self.shadow_decisions = Counter(
            "idlegate_shadow_decisions",
            "Decisions the shadow policy (--shadow) was compared at, by whether it would have "
            "done the same now (the same stage, executors started and idle delay; or wait).",
            ["agree"],
            registry=r,
        )
        for agree in ("true", "false"):
            self.shadow_decisions.labels(agree)
        self.shadow_agreement = Gauge(
            "idlegate_shadow_agreement_ratio",
            "Decisions where the shadow agreed, over those compared, since the start (NaN "
            "before the first).",
            registry=r,
        )
        self.shadow_agreement.set(float("nan"))
        self.shadow_errors = Counter(
            "idlegate_shadow_errors",
            "Decisions at which the shadow policy raised or answered illegally (not compared; "
            "the active policy is never affected).",
            registry=r,
        )
        self.shadow_skipped = Counter(
            "idlegate_shadow_skipped_rounds",
            "Scheduling rounds not compared because the shadow's worker had "
            "--shadow-backlog rounds waiting already.",
            registry=r,
        )
        self.shadow_expected_change = Gauge(
            "idlegate_shadow_expected_change",
            "C(shadow) / C(active) - 1: the relative change of job-seconds over a planner's "
            "horizon if the shadow policy were followed instead (negative: fewer), from the "
            "latest plan that simulated both (NaN: none yet).",
            registry=r,
        )
        self.shadow_expected_change.set(float("nan"))
        self.history_records = Counter(
            "idlegate_history_records",
            "Records of finished workflows written to the history file (--history-file).",
            registry=r,
        )
        self.history_errors = Counter(
            "idlegate_history_errors",
            "Records the history file failed to take (each a Warning Event; the workflow "
            "is not affected).",
            registry=r,
        )
        self.info = Gauge(
            "idlegate_operator_info",
            "The operator's policy (value 1).",
            [POOL, "policy"],
            registry=r,
        )


class PoolFamily(Generic[M]):
    """A labelled per-pool family seen from one pool: ``labels(*values)`` is the family's
    child with the pool first. It remembers the children it made (:meth:`remove_all`)."""

    def __init__(self, family: M, pool: str) -> None:
        self._family, self._pool = family, pool
        self._made: set[tuple[str, ...]] = set()

    def labels(self, *values: str) -> M:
        self._made.add(values)
        return self._family.labels(self._pool, *values)

    def remove_all(self) -> None:
        for values in self._made:
            self._family.remove(self._pool, *values)
        self._made.clear()


class Metrics:
    """The series as one pool's bridge sees them: its own (`pool` bound) and the operator's.

    ``Metrics(size, policy)`` has families of its own (an operator, a test); a pool beside
    the default one is ``Metrics(size, policy, pool=NAME, beside=default_metrics)``.
    """

    # long: one binding per series, as declared in MetricFamilies
    def __init__(
        self,
        pool_size: int,
        policy: str,
        *,
        pool: str = DEFAULT_POOL,
        beside: Metrics | None = None,
    ) -> None:
        self.families = f = beside.families if beside is not None else MetricFamilies()
        self.registry = f.registry
        self.pool = pool
        self._bound: list[PoolFamily[Any]] = []
        self._children: list[Any] = []
        # the pool's series
        self.completion_time = self._family(f.completion_time)
        self.admission_lag = self._child(f.admission_lag)
        self.pending_workflows = self._child(f.pending_workflows)
        self.active_workflows = self._child(f.active_workflows)
        self.runnable_stages = self._child(f.runnable_stages)
        self.busy_executors = self._child(f.busy_executors)
        self.pool_size = self._child(f.pool_size)
        self.idle_slots = self._child(f.idle_slots)
        self.idle_inserted = self._child(f.idle_inserted)
        self.holds = self._child(f.holds)
        self.decisions = self._family(f.decisions)
        self.decision_duration = self._child(f.decision_duration)
        self.foreign_releases = self._child(f.foreign_releases)
        self.task_failures = self._child(f.task_failures)
        self.workflows_finished = self._family(f.workflows_finished)
        self.invalid_workflows = self._child(f.invalid_workflows)
        self.policy_errors = self._family(f.policy_errors)
        self.policy_switches = self._family(f.policy_switches)
        self.planning_duration = self._child(f.planning_duration)
        self.plans_dropped = self._child(f.plans_dropped)
        self.following = self._family(f.following)
        self.info = self._family(f.info)
        # the operator's
        self.gate_removals, self.pods_created = f.gate_removals, f.pods_created
        self.api_errors, self.api_throttled = f.api_errors, f.api_throttled
        self.api_up, self.api_unreachable = f.api_up, f.api_unreachable
        self.watch_restarts, self.crd_missing = f.watch_restarts, f.crd_missing
        self.policy_reloads = f.policy_reloads
        self.shadow_decisions, self.shadow_agreement = f.shadow_decisions, f.shadow_agreement
        self.shadow_errors, self.shadow_skipped = f.shadow_errors, f.shadow_skipped
        self.shadow_expected_change = f.shadow_expected_change
        self.history_records, self.history_errors = f.history_records, f.history_errors
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
        self.follow(policy)
        self.info.labels(policy).set(1)

    def _child(self, family: M) -> M:
        child = family.labels(self.pool)
        self._children.append(family)
        return child

    def _family(self, family: M) -> PoolFamily[M]:
        bound = PoolFamily(family, self.pool)
        self._bound.append(bound)
        return bound

    def remove(self) -> None:
        """Remove the pool's series from the registry (its ExecutorPool is gone or rebuilt:
        a scrape no longer shows it)."""
        for family in self._children:
            family.remove(self.pool)
        for bound in self._bound:
            bound.remove_all()

    def follow(self, policy: str) -> None:
        """`policy` is followed from now on (the gauge of the others drops to 0)."""
        for other in self._followed:
            self.following.labels(other).set(0)
        self._followed.add(policy)
        self.following.labels(policy).set(1)

    def set_gauges(self, busy: int, workflows: Collection[Workflow], cluster: Cluster) -> None:
        """The gauges of the operator's state, after each scheduling round."""
        self.busy_executors.set(busy)
        self.active_workflows.set(len(workflows))
        self.pending_workflows.set(sum(wf.phase is Phase.PENDING for wf in workflows))
        self.runnable_stages.set(sum(len(j.runnable) for j in cluster.jobs))
        self.idle_slots.set(sum(s.idle_until is not None for j in cluster.jobs for s in j.stages))

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
