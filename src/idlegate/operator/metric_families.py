"""The operator's Prometheus series, named in the style of Kueue's (``idlegate_*``).

Their names, help texts and labels are a contract users read (deploy/README.md, the
dashboards and alerts of deploy/monitoring): declared here, beside the other texts users
read, in one :class:`MetricFamilies` that holds every series in its own registry (several
operators may live in one test process), served at ``/metrics``. The series of one pool's
state machine (its queue, executors, decisions, planning, policy) carry a ``pool`` label,
bound by the pool's `idlegate.operator.metrics.Metrics` view, so the call sites write
``metrics.decisions.labels("launch")`` whatever their pool. The operator-wide series (the
API's health, the writes' counts, history, reloads, the shadow policy) have no ``pool``
label.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from idlegate.operator.lag.lag import Lag

JCT_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400)
ADMISSION_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600)
DECISION_BUCKETS = (
    1e-5, 3e-5, 1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 7e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0,
)  # fmt: skip
"""0.1 ms apart up to 0.5 ms, where a decision's p99 of CPU lies: within one bucket of
0.3 to 1 ms it was read by interpolation, which moved with the count near 0.3 ms."""
DECISION_KINDS = ("launch", "idle", "wait")
PLANNING_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
POOL = "pool"
"""The label naming the pool of a per-pool series."""
M = TypeVar("M", Counter, Gauge, Histogram)


class MetricFamilies:
    """Every series of the operator, in one registry. The names are the contract (see
    deploy/README.md)."""

    # long: one declaration per series, the pools' then the operator's; split up, the
    # contract would be harder to read as one list
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.pooled: dict[Any, bool] = {}
        """Each per-pool family -> whether it has labels besides the pool."""
        counter, gauge, histogram = self._kinds(pool=True)  # the pools' series
        self.completion_time = histogram(
            "idlegate_workflow_completion_time_seconds",
            "Job completion time of finished workflows: completion minus creation (arrival).",
            "result",
            buckets=JCT_BUCKETS,
        )
        self.admission_lag = histogram(
            "idlegate_admission_lag_seconds",
            "Time from a workflow's creation (metadata.creationTimestamp) to its admission by "
            "the operator; part of its completion time.",
            buckets=ADMISSION_BUCKETS,
        )
        self.pending_workflows = gauge(
            "idlegate_pending_workflows",
            "Workflows admitted whose first task has not been released yet (the queue).",
        )
        self.active_workflows = gauge(
            "idlegate_active_workflows", "Workflows in the system: admitted, not finished."
        )
        self.runnable_stages = gauge(
            "idlegate_runnable_stages",
            "Stages that could take executors now (parents done, tasks left, not idling).",
        )
        self.busy_executors = gauge(
            "idlegate_busy_executors", "Executors of the pool running a task pod."
        )
        self.pool_size = gauge("idlegate_executors", "Size of the executor pool (--pool-size).")
        self.resource_capacity = gauge(
            "idlegate_pool_resource_capacity",
            "The pool's capacity of each resource it counts beyond pods (cpu in cores, "
            "memory in bytes, others in units).",
            "resource",
        )
        self.resource_used = gauge(
            "idlegate_pool_resource_used",
            "What the pool's running task pods request of each resource it counts.",
            "resource",
        )
        self.without_nodes = gauge(
            "idlegate_pool_without_nodes",
            "1 while a pool on nodes (nodeSelector, --pool-nodes), its nodes read, has no "
            "Ready schedulable node selected or nothing left of their allocatable (NoNodes).",
        )
        self.idle_slots = gauge("idlegate_idle_slots", "Stages inside a deliberate idle slot now.")
        self.idle_inserted = counter(
            "idlegate_idle_inserted_seconds",
            "Deliberate idle time the policy inserted before stages.",
        )
        self.holds = counter(
            "idlegate_holds",
            "Stages a planner held back for arrivals it expects (an idle slot, or waits "
            "while the stage could start), once per hold.",
        )
        self.queue_usage = gauge(
            "idlegate_queue_resource_usage",
            "What a queue's running task pods use of each resource its pool counts (pods "
            "included; cpu in cores, memory in bytes), as Kueue's cluster_queue_resource_usage.",
            "queue",
            "resource",
        )
        self.queue_share = gauge(
            "idlegate_queue_share", "A queue's weighted dominant share of its cohort.", "queue"
        )
        self.queue_pending = gauge(
            "idlegate_queue_pending_workflows",
            "A queue's workflows with ready tasks not started, as Kueue's pending_workloads.",
            "queue",
        )
        self.queue_wait = histogram(
            "idlegate_queue_wait_time_seconds",
            "How long each started task of a queue waited once ready, as Kueue's "
            "admission_wait_time_seconds.",
            "queue",
            buckets=ADMISSION_BUCKETS,
        )
        self.queue_bound_hits = counter(
            "idlegate_queue_wait_bound_hits",
            "Tasks of a queue started past its wait bound (started first, room reserved).",
            "queue",
        )
        self.decisions = counter(
            "idlegate_decisions",
            "Scheduler decisions by kind: launch a stage, idle it, or wait.",
            "kind",
        )
        self.decision_duration = histogram(
            "idlegate_decision_duration_seconds",
            "Time the scheduler takes for one decision.",
            buckets=DECISION_BUCKETS,
        )
        self.decision_cpu = histogram(
            "idlegate_decision_cpu_seconds",
            "CPU time of the deciding thread for one decision: its duration less the time "
            "the thread waited (for a core, or for the interpreter's lock).",
            buckets=DECISION_BUCKETS,
        )
        self.foreign_releases = counter(
            "idlegate_foreign_gate_removals",
            "Task pods whose idlegate.io/release gate was removed by someone other than the "
            "operator (by hand, another controller); each counts against the pool.",
        )
        self.task_failures = counter("idlegate_task_failures", "Failed task pod attempts.")
        self.preempted_tasks = counter(
            "idlegate_preempted_tasks",
            "Tasks stopped (their pods evicted) to give quota back, by the queue that "
            "reclaimed and why; each runs again, counted as no failure.",
            "queue",
            "reason",
        )
        self.preemption_fallbacks = counter(
            "idlegate_preemption_fallbacks",
            "Stops of a decide: Forecast queue carried out as the rules chose them because no "
            "verdict came: the judge failed, or gave none in time (why: failed, late).",
            "queue",
            "why",
        )
        self.preemption_refusals = counter(
            "idlegate_preemption_refusals",
            "Stops asked to give quota back whose eviction was refused (a "
            "PodDisruptionBudget's no, status 429; other refusals), by the queue they were "
            "for; the pod runs on.",
            "queue",
            "status",
        )
        self.reclaim_verdicts = counter(
            "idlegate_reclaim_verdicts",
            "Verdicts on a decide: Forecast queue's stops, by queue and case (declined: "
            "nothing stopped; bound, pays, cut: the stops go ahead).",
            "queue",
            "case",
        )
        self.preempted_work = counter(
            "idlegate_preempted_work_seconds",
            "Executor-seconds of work the stopped tasks lost (none for checkpointed stages).",
        )
        self.workflows_finished = counter(
            "idlegate_workflows_finished", "Workflows that left the system, by result.", "result"
        )
        self.invalid_workflows = counter(
            "idlegate_invalid_workflows", "Workflows rejected as invalid."
        )
        self.policy_errors = counter(
            "idlegate_policy_errors",
            "Decisions for which the policy raised; each was made by the fallback rule.",
            "policy",
        )
        self.policy_switches = counter(
            "idlegate_policy_switches",
            "Times the lookahead planner switched the policy it follows, by the policy "
            "followed from then on.",
            "to",
        )
        self.planning_duration = histogram(
            "idlegate_planning_duration_seconds",
            "Wall time of one plan of the lookahead planner's worker (decisions never wait "
            "on it; --plan-budget-ms bounds it).",
            buckets=PLANNING_BUCKETS,
        )
        self.forecast_error = histogram(
            "idlegate_forecast_error_seconds",
            "Absolute error of a workflow's first forecast made while it waited, once it "
            "started (which=start) and finished (which=finish).",
            "queue",
            "which",
            buckets=JCT_BUCKETS,
        )
        self.forecast_refresh_seconds = histogram(
            "idlegate_forecast_refresh_seconds",
            "CPU seconds of one forecast refresh's replays, in the operator's replay process "
            "or its worker thread (--forecast-workers; decisions never wait on it).",
            buckets=PLANNING_BUCKETS,
        )
        self.forecast_refresh_errors = counter(
            "idlegate_forecast_refresh_errors",
            "Forecast refreshes that failed as a whole (logged as a Warning); the pool's "
            "workflows keep their last forecast.",
        )
        self.forecast_calibration_errors = counter(
            "idlegate_forecast_calibration_errors",
            "Forecast calibrations a restarted pool could not resume from the history sink "
            "(unreadable, or a record's stored interval inconsistent; each logged as a "
            "Warning): its intervals start cold (an unreadable sink: its recent arrivals too).",
        )
        self.forecast_arrivals_fallback = gauge(
            "idlegate_forecast_arrivals_fallback",
            "1 while a pool's forecasts invent other arrivals than the --forecast-arrivals it "
            "inherits: queues, on an ExecutorPool without queues, invented as poisson (a "
            "Warning in the log and on the pool, its condition ForecastArrivalsFallback).",
        )
        self.plans_dropped = counter(
            "idlegate_plans_dropped",
            "Plans dropped as stale: the set of workflows changed while they were made "
            "(the worker plans again at once).",
        )
        self.rounds_cut = counter(
            "idlegate_rounds_cut",
            "A portfolio's rounds cut at their CPU budget in the replay process "
            "(--round-budget; the portfolio keeps its candidate, a RoundCut Event says so).",
        )
        self.round_cpu = histogram(
            "idlegate_round_cpu_seconds",
            "CPU seconds of one portfolio round in the replay process (decisions never wait "
            "on it; --round-budget cuts it).",
            buckets=PLANNING_BUCKETS,
        )
        self.following = gauge(
            "idlegate_policy_following",
            "The policy the operator's policy follows now (value 1; for a lookahead "
            "planner the policy of its last plan, for a portfolio its candidate, else the "
            "policy itself; the fallback rule while it answers for a failing policy).",
            "policy",
        )
        self.info = gauge("idlegate_operator_info", "The operator's policy (value 1).", "policy")

        counter, gauge, histogram = self._kinds(pool=False)  # the operator's
        self.gate_removals = counter(
            "idlegate_gate_removals",
            "Task pods released by removing the idlegate.io/release scheduling gate.",
        )
        self.pods_created = counter("idlegate_pods_created", "Task pods created (gated or not).")
        self.argo_released = counter(
            "idlegate_argo_pods_released",
            "Pods of Argo workflows released by idlegate (scheduled: by the policy; "
            "unscheduled: of a workflow or stage idlegate cannot schedule).",
            "how",
        )
        self.airflow_released = counter(
            "idlegate_airflow_pods_released",
            "Worker pods of Airflow's DAG runs released by idlegate (as Argo's).",
            "how",
        )
        self.too_large = counter(
            "idlegate_workflows_too_large",
            "Argo Workflows and Airflow DAG runs not scheduled because a stage's pod asks "
            "more than the default pool's resources hold: their pods are left to their "
            "controller's order (Event NotScheduled).",
            "kind",
        )
        self.active_by_kind = gauge(
            "idlegate_active_workflows_by_kind",
            "Workflows in the pools, by kind (dagworkflow, argo, airflow).",
            "kind",
        )
        self.api_errors = counter(
            "idlegate_api_errors",
            "API requests of the operator that failed, by HTTP status (0: no response).",
            "status",
        )
        self.api_throttled = counter(
            "idlegate_api_throttled_requests",
            "API requests of the operator answered 429 Too Many Requests (retried after the "
            "server's Retry-After, with jitter).",
        )
        self.api_up = gauge(
            "idlegate_api_up",
            "1 while the API server answers the operator, 0 during an outage: then the "
            "gauges above keep their last values and are stale.",
        )
        self.api_up.set(1)
        self.api_unreachable = counter(
            "idlegate_api_unreachable_seconds",
            "Time the API server did not answer the operator (outages, added when they end).",
        )
        self.events_dropped = counter(
            "idlegate_events_dropped",
            "Events not written because the Events' queue was full, the API slow to take "
            "them (logged at WARNING; edge/applier.py EVENTS_QUEUED).",
        )
        self.released_pending = counter(
            "idlegate_released_pods_pending",
            "Pods idlegate released that the kube-scheduler found no node with room for "
            "(condition PodScheduled=False, Unschedulable), each counted once.",
        )
        self.watch_restarts = counter(
            "idlegate_watch_restarts",
            "Requests of kopf's (its watches, lists and patches) that failed and were retried.",
        )
        self.leader = gauge(
            "idlegate_leader",
            "1 while this replica is the leader (the one that writes; always, without "
            "--leader-election), 0 while it stands by (no workflows: its pool gauges read 0).",
        )
        self.crd_missing = gauge(
            "idlegate_crd_missing",
            "1 while the operator waits for the DagWorkflow CRD to be installed.",
        )
        self.policy_reloads = counter(
            "idlegate_policy_reloads",
            "Reloads of a policy after its model file changed, by role (active, shadow) and "
            "result (ok; failed: the new model was refused and the policy in use kept).",
            "role",
            "result",
        )
        for role in ("active", "shadow"):
            for result in ("ok", "failed"):
                self.policy_reloads.labels(role, result)
        self.shadow_decisions = counter(
            "idlegate_shadow_decisions",
            "Decisions the shadow policy (--shadow) was compared at, by whether it would have "
            "done the same now (the same stage, executors started and idle delay; or wait).",
            "agree",
        )
        for agree in ("true", "false"):
            self.shadow_decisions.labels(agree)
        self.shadow_agreement = gauge(
            "idlegate_shadow_agreement_ratio",
            "Decisions where the shadow agreed, over those compared, since the start (NaN "
            "before the first).",
        )
        self.shadow_agreement.set(float("nan"))
        self.shadow_errors = counter(
            "idlegate_shadow_errors",
            "Decisions at which the shadow policy raised or answered illegally (not compared; "
            "the active policy is never affected).",
        )
        self.shadow_skipped = counter(
            "idlegate_shadow_skipped_rounds",
            "Scheduling rounds not compared because the shadow's worker had "
            "--shadow-backlog rounds waiting already.",
        )
        self.shadow_expected_change = gauge(
            "idlegate_shadow_expected_change",
            "C(shadow) / C(active) - 1: the relative change of job-seconds over a planner's "
            "horizon if the shadow policy were followed instead (negative: fewer), from the "
            "latest plan that simulated both (NaN: none yet).",
        )
        self.shadow_expected_change.set(float("nan"))
        self.history_records = counter(
            "idlegate_history_records",
            "Records of finished workflows written to the history file (--history-file).",
        )
        self.history_errors = counter(
            "idlegate_history_errors",
            "Records the history file failed to take (each a Warning Event; the workflow "
            "is not affected).",
        )
        self.history_skipped = counter(
            "idlegate_history_skipped_lines",
            "Lines of the history file left out when a pool's portfolio started from it, by "
            "reason (unreadable, malformed, no arrival; each kind logged once).",
            "reason",
        )
        self.lag = Lag(self.registry)  # (the lags' series and bound: idlegate.operator.lag.lag)

    def _series(
        self, kind: type[M], name: str, doc: str, *labels: str, pool: bool, **options: Any
    ) -> M:
        """A family in the registry: a per-pool one (`pool`) has the ``pool`` label first."""
        family = kind(
            name, doc, (POOL, *labels) if pool else labels, registry=self.registry, **options
        )
        if pool:
            self.pooled[family] = bool(labels)
        return family

    def _kinds(
        self, *, pool: bool
    ) -> tuple[Callable[..., Counter], Callable[..., Gauge], Callable[..., Histogram]]:
        """How to declare a counter, a gauge and a histogram: per pool or operator-wide."""
        s = self._series
        return (
            partial(s, Counter, pool=pool),
            partial(s, Gauge, pool=pool),
            partial(s, Histogram, pool=pool),
        )
