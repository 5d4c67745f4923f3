"""The operator's settings: one typed object, filled from the command line (or by tests),
and the clock it gets its time from."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    StrictInt,
    model_validator,
)

from idlegate.api.podsecurity import DEFAULT_LEVEL, Level
from idlegate.api.pool_spec import LabelSelector, no_queues, one_capacity
from idlegate.api.queueing import QueueFile, cohort_check
from idlegate.api.status import HISTORY_SAMPLES, MAX_MEASURED
from idlegate.config import Config, Flag
from idlegate.errors import IdlegateError
from idlegate.sim.forecast_arrivals import Arrivals
from idlegate.sim.protocol import Scheduler
from idlegate.sim.resources import MILLI, ResourceVector
from idlegate.sim.spec import NAME_PATTERN, PodGCStrategy

Workers = Literal["process", "thread"]
"""Where the operator's replays run, a forecast refresh's and a portfolio's round
(``--forecast-workers``; `operator.forecasting.book`'s docstring, "Where";
`operator.features.planning.ReplayWorker`)."""
WORKERS: tuple[str, ...] = get_args(Workers)
ARRIVALS_ROUND = 0.2
"""Least loop seconds between two rounds of a burst (`Bridge.round_soon`; the default of
``--round-window``): a workflow submitted alone, or a pod's end after a quiet spell, is
decided at once; a flood, which kopf hands the operator over several seconds (a turn of
its loop each), and its pods' ends, by a round every 0.2 s with all since, not by a round
each, as the simulator decides the arrivals and ends of one time in one round."""


class Clock:
    """Where the operator gets its time (epoch seconds): the real time, one second per
    second; tests inject a subclass (a fake or an accelerated clock). The status's
    timestamps are its time; timers are armed on the wall clock after `wall_delay`; the
    bridge reads it by `Bridge.now`."""

    def now(self) -> float:
        """Seconds since the epoch, in the clock's time."""
        return time.time()

    def wall_delay(self, seconds: float) -> float:
        """Wall-clock seconds that `seconds` of the clock's time take."""
        return max(0.0, seconds)

    def from_wall(self, t: float) -> float:
        """The clock's time at the wall-clock epoch time `t` (e.g. an API timestamp)."""
        return t

    def __repr__(self) -> str:
        return "Clock()"


def _namespace_names(value: tuple[str, ...]) -> tuple[str, ...]:
    """The namespaces to serve, each once and each a namespace's name (a DNS label): one
    that is not names no namespace, and the operator would serve nothing there, quietly."""
    if len(set(value)) != len(value):
        raise ValueError(f"a namespace is given twice in {list(value)}")
    for name in value:
        if not re.match(NAME_PATTERN, name) or len(name) > 63:
            raise ValueError(
                f"{name!r} is not a namespace's name: lower case letters, digits and '-', "
                "starting and ending with a letter or digit, at most 63 characters"
            )
    return value


def _selector(value: object) -> object:
    """A label selector given as kubectl's text (the flag), or as it is."""
    if not isinstance(value, str):
        return value
    try:
        return LabelSelector.parse(value)
    except IdlegateError as exc:
        raise ValueError(str(exc)) from None


class Settings(Config):
    """Everything `idlegate operator` can be told (its flags are these fields)."""

    model_config = ConfigDict(title="the operator's settings", arbitrary_types_allowed=True)

    pool_size: StrictInt = Field(ge=1)
    """Executors of the default pool: task pods that may run at once over the workflows no
    ExecutorPool takes (with no ExecutorPools: over all of them)."""

    pool_resources: ResourceVector | None = None
    """The default pool's capacity beyond its executors, e.g. cpu=24,memory=96Gi,
    nvidia.com/gpu=2 (Kubernetes quantities): a task pod is released only where its
    requests fit what is free (pods, if given, is --pool-size). Unset: --pool-size pods,
    whatever they request."""

    queues: QueueFile | None = None
    """A YAML file of the default pool's queues (a list of name, nominal, borrowingLimit,
    lendingLimit, weight, priority, waitBound, namespaces, preemption; docs/queues.md):
    teams share the pool by quotas that lend and borrow. Unset: one queue, no quotas."""

    pool_nodes: Annotated[LabelSelector | None, BeforeValidator(_selector)] = None
    """Make the default pool follow the cluster: its capacity is the allocatable of the
    Ready nodes this label selector picks (kubectl's -l syntax: pool=batch,gpu,!spot; ''
    picks every node), less the requests of the pods there idlegate did not release, and a
    task pod is released only where it fits one node's free allocatable. It counts cpu and
    memory (an ExecutorPool's nodeSelector counts its nodes' GPUs too). Not with
    --pool-resources."""

    policy: Annotated[str | None, Flag("--scheduler", "-s")] = None
    """A scheduler spec as for `simulate` (fair, analytic:fair, learned:PATH.onnx, a bare
    PATH.onnx, portfolio?...); default: the spec default, the portfolio (it follows the
    best of its candidates on replays of the pool's recent workflows, docs/brain.md), or
    fair with a warning if it cannot be built."""

    scheduler: SkipValidation[Scheduler | None] = None
    """A scheduler object to use instead of `policy` (for tests and embedding)."""

    policy_reload_interval: float = Field(5.0, ge=0)
    """Seconds between two looks at the model files the policy's spec names (and the
    shadow's): when their content changed, the new model is probed as at the start and
    used from the next decision round; a model that fails keeps the one in use. 0: never
    reloaded."""

    shadow: str | None = None
    """A scheduler spec (as `--scheduler`) answered beside the policy at every decision, off the
    decision path, only to compare (metrics idlegate_shadow_*); it gates nothing."""

    shadow_backlog: int = Field(16, ge=1)
    """Decision rounds that may wait for the shadow's worker; a round beyond is not
    compared (idlegate_shadow_skipped_rounds_total)."""

    shadow_estimate: bool = True
    """Estimate the JCT difference of shadow and policy by rollouts of both when neither is a
    lookahead planner (one plan per change of the set of workflows, in the shadow's worker)."""

    namespaces: Annotated[
        tuple[str, ...], Flag("--namespace", "-n"), AfterValidator(_namespace_names)
    ] = ()
    """Serve only this namespace (repeatable); none: all namespaces."""

    pod_security: Level = DEFAULT_LEVEL
    """Pod Security level task pod templates must meet in a namespace without the label
    pod-security.kubernetes.io/enforce (a labelled namespace's own level applies)."""

    standalone: bool = False
    """No kopf peering (kopf's own, on its KopfPeering objects, which pauses every replica but
    one); replicas that share a pool elect their writer with --leader-election instead."""

    leader_election: bool = False
    """Elect one writer among the replicas on a coordination.k8s.io/v1 Lease
    (idlegate.operator.edge.leader): only the leader writes; a standby serves the Argo
    webhook and takes over, rebuilding its state from the API, once the leader's Lease
    expires. Off: this process is the only writer."""

    lease_name: str = "idlegate-operator"
    """Name of the Lease the replicas elect their leader on."""

    lease_namespace: str | None = None
    """Namespace of the Lease; default: the operator's own (POD_NAMESPACE), else default."""

    lease_duration: StrictInt = Field(15, ge=1)
    """Seconds a standby waits, from the last renewal it saw, before it takes the Lease of a
    leader that stopped renewing (a kill -9, a lost node): the longest failover, plus its
    rebuild of the state."""

    lease_renew_deadline: float = Field(10.0, gt=0)
    """Seconds a leader may go without renewing its Lease (the API unreachable, its loop
    stuck) before it stops writing and exits, to come back as a standby; below the
    lease duration, so that it has stopped before a standby may take over."""

    lease_retry_period: float = Field(2.0, gt=0)
    """Seconds between two renewals by the leader, and two looks at the Lease by a standby."""

    # (None, given in Python only, as the tests do: the port is not served; the help, a
    # flag's text, does not say Python's None, which no flag can give)
    metrics_port: int | None = Field(9090, ge=0, le=65535)
    """Port of the Prometheus endpoint /metrics and of the readiness probe /readyz."""

    health_port: int | None = Field(8080, ge=0, le=65535)
    """Port of the health endpoint /healthz (kopf's liveness probe)."""

    listen_host: str = "0.0.0.0"
    """Address the metrics and health endpoints listen on."""

    kubeconfig: Path | None = None
    """A kubeconfig file; default: the in-cluster service account, else $KUBECONFIG or
    ~/.kube/config."""

    watch_server_timeout: int = Field(300, gt=0)
    """Seconds the API server keeps one watch request open (kopf's
    settings.watching.server_timeout); kopf then re-lists and re-watches. Whole seconds:
    kube-apiserver refuses a watch whose ``timeoutSeconds`` is not an integer (400), as
    every watch of the operator was, at 300.0, until it met a real one."""

    watch_client_timeout: float = 330.0
    """Seconds after which the operator gives up a watch request that went silent (kopf's
    settings.watching.client_timeout); above the server timeout."""

    watch_retry_cap: float = Field(1.0, gt=0)
    """Longest wait, in seconds, between two attempts of a failed request of kopf's (its
    watches and lists): they are retried for ever, 0.1 s at first, doubling up to this. An
    outage never ends the process, and the operator hears of a pod's completion within
    about this long of the API server's return."""

    api_probe_interval: float = Field(1.0, gt=0)
    """Seconds between two probes of the API server (GET /version), for the whole run: a
    probe is how an outage is seen while the operator writes nothing (kopf's watches do
    not report to it). During an outage the first answer ends it (readiness, a Warning
    Event, a resync)."""

    crd_retry_interval: float = Field(5.0, gt=0)
    """Seconds between two looks for the DagWorkflow CRD while it is not installed (the
    operator is not ready meanwhile). A missing DagCronWorkflow or ExecutorPool CRD does not
    stop it: kopf serves that kind once its CRD is installed."""

    gated_pods_per_stage: int | None = Field(None, ge=0)
    """Task pods created ahead (gated) for a runnable stage; the rest are created as the
    stage's tasks are released. Default: the pool size."""

    gated_workflows_ahead: int = Field(2, ge=0)
    """Of each queue's workflows that have not started, the first this many (the next the
    admission will start: their positions) get their gated pods created ahead; the others'
    wait until they come within reach, and a task released before its pod was made has it
    created released. A flood of workflows costs pod writes in proportion to what can run."""

    round_window: float = Field(ARRIVALS_ROUND, ge=0)
    """Least seconds between two rounds of a burst: a workflow submitted alone, or a pod's
    end after a quiet spell, is decided at once; the arrivals of a flood, and the ends
    after a round less than this long ago, by one round this long after it, with all since
    (0: each end at once, the arrivals of one turn of the loop together)."""

    api_concurrency: int = Field(8, ge=1)
    """API requests the operator runs at once (its own writes; kopf's watches aside)."""

    api_timeout: float = Field(30.0, gt=0)
    """Seconds before one API request of the operator's own is given up and retried."""

    retry_backoff_max: float = Field(1.0, gt=0)
    """Longest back-off, in seconds, between two tries of a request that got no answer or a
    5xx (the API client's retries: 0.2 s, doubling up to this, with jitter). Nothing wakes
    a sleeping retry when the API returns, so this bounds how long after an outage the
    writes resume."""

    retry_after_cap: float = Field(60.0, ge=0)
    """Longest wait, in seconds, before retrying a request the API server refused with a
    Retry-After (429, 503): a longer one is cut to this. Shorter ones are honoured."""

    shutdown_timeout: float = Field(10.0, ge=0)
    """Seconds the operator, told to stop, waits for its queued writes (the batched status
    writes included) before it exits."""

    status_interval: float = Field(1.0, ge=0)
    """Least wall-clock seconds between two status writes of an object (coalesced); changes
    of its counts are batched over half of it, a phase or idle slot is written as soon as
    that allows. 0: every change at once."""

    lag_bound: float = Field(2.0, ge=0)
    """Seconds of lag (watch, releases' and Events' writes, event-loop stalls; p90) that,
    held 30 s, say Lagging on each ExecutorPool (docs/operations.md). 0: never said."""

    max_events_per_workflow: int = Field(30, ge=1)
    """Distinct Events one workflow gets; after them, only the first Event of each new type
    and reason. An Event equal to one posted before adds to its count (a PATCH in 30 s)."""

    plan_budget_ms: float = Field(200.0, gt=0)
    """Wall milliseconds one plan of a lookahead planner (--scheduler lookahead:...) may
    take: its worker thread starts no further sampled future once they are spent (one
    future that started still runs to its end). Decisions never wait on a plan: they are
    made by the policy followed meanwhile."""

    round_budget: float = Field(10.0, gt=0)
    """CPU seconds one round of a portfolio (the default scheduler) may take where it runs
    (the replay process, --forecast-workers): a round past it is cut, the portfolio keeps
    its candidate, and a RoundCut Event and idlegate_rounds_cut_total say so. Decisions
    never wait on a round."""

    forecast_interval: float = Field(0.0, ge=0)
    """Seconds of the operator's clock between two forecasts of each pool's waiting
    workflows (and a refresh follows each arrival and end), into status.forecast and the
    visibility API (docs/forecast.md); 0: no forecasts. deploy/ sets 30."""

    forecast_arrivals: Arrivals = "none"
    """What a forecast's replays invent of the workflows not submitted yet: none; poisson,
    copies of the pool's recent workflows at its recent rate; queues, the same per queue
    (needs --queues). Measured best (docs/forecast.md, "Arrivals"): none on k8s-batch and
    alibaba, poisson on tpch, queues on teams. An ExecutorPool's forecastArrivals wins."""

    forecast_workers: Workers = "process"
    """Where the replays run, the forecasts' and a portfolio's rounds: process, one
    process of the operator's for all its pools, at a lower priority (the replays'
    objects, their collections and their share of the interpreter's lock are not the
    deciding interpreter's); thread, a thread of each pool in the operator's process. Measured
    side by side in docs/research/forecasts.md ("Cost in the operator")."""

    history_file: Path | None = None
    """A JSON Lines history file (on a volume) that gets one record per finished workflow,
    for `idlegate history export --from-sink` and replays (docs/workloads.md); unset: none
    (the records stay in the workflows' status until they are deleted)."""

    history_max_bytes: int = Field(10 * 2**20, ge=4096)
    """Size in bytes at which the history file is rotated: history.jsonl to history.1.jsonl
    (history.1.jsonl to history.2.jsonl, ...; the suffix is kept)."""

    history_backups: int = Field(5, ge=1)
    """Rotated history files kept (history.1.jsonl .. history.N.jsonl for a history.jsonl;
    the oldest is dropped)."""

    history_samples: int = Field(HISTORY_SAMPLES, ge=1, le=MAX_MEASURED)
    """Measured task run times a finished stage keeps in its status (a uniform sample)."""

    ttl_after_finished: int | None = Field(None, ge=0)
    """Seconds after which a finished (Succeeded or Failed) workflow is deleted, with its
    pods, when its spec.ttlSecondsAfterFinished is unset; unset: kept until deleted."""

    pod_gc: PodGCStrategy = PodGCStrategy.NEVER
    """When task pods are deleted for a workflow whose spec.podGC is unset: OnPodCompletion,
    OnPodSuccess, OnWorkflowCompletion, OnWorkflowSuccess or Never."""

    argo: bool = False
    """Schedule Argo Workflows' pods too (docs/argo.md; RBAC from deploy/components/argo)."""

    webhook_port: int | None = Field(None, ge=0, le=65535)
    """Port of the admission webhook that gates Argo's and Airflow's pods at creation
    (with --argo, --airflow-url); unset: no webhook."""

    webhook_certs: Path | None = None
    """Directory with the webhook's tls.crt and tls.key; unset: plain HTTP (tests only)."""

    airflow_url: str | None = None
    """Schedule the pods of Airflow's KubernetesExecutor too, reading their DAG runs from
    the API server at this URL (docs/airflow.md; deploy/components/airflow); unset: not."""

    airflow_username: str | None = None
    """The Airflow user to read DAGs and runs as (its password from --airflow-password-file);
    without it, --airflow-token-file."""

    airflow_password_file: Path | None = None
    """File holding the Airflow user's password (a Secret's key, mounted)."""

    airflow_token_file: Path | None = None
    """File holding a token for Airflow's API (a Secret's key, mounted), instead of a user."""

    airflow_queued_timeout: float = Field(600.0, gt=0)
    """Airflow's [scheduler] task_queued_timeout in seconds (set it as Airflow has it): a
    gated pod is released before it (docs/airflow.md, "The pending timeout")."""

    airflow_release_margin: float = Field(120.0, ge=0)
    """Seconds before Airflow's task_queued_timeout at which a pod still gated is released
    (for the executor's delay and the pod's start)."""

    seed: int = 0
    """Seed of the scheduler's random generator (for policies that sample)."""

    component: str = "idlegate-operator"
    """The Events' source and reporting component."""

    clock: Clock = Field(default_factory=Clock)
    """Where time comes from (tests pass an accelerated or fake clock)."""

    @model_validator(mode="after")
    def _watch_timeouts(self) -> Settings:
        if not self.watch_server_timeout < self.watch_client_timeout:
            raise ValueError(
                f"the watch client timeout ({self.watch_client_timeout:g} s) must exceed the "
                f"server timeout ({self.watch_server_timeout:g} s)"
            )
        return self

    @model_validator(mode="after")
    def _pool_pods(self) -> Settings:
        if self.pool_nodes is not None and self.pool_resources is not None:
            raise ValueError(one_capacity("--pool-resources", "--pool-nodes"))
        pods = self.pool_resources["pods"] if self.pool_resources is not None else 0
        if pods and pods != self.pool_size * MILLI:
            raise ValueError(
                f"--pool-resources says pods={pods // MILLI} but --pool-size is "
                f"{self.pool_size}; give the pods once"
            )
        if self.queues is not None and self.pool_nodes is None:
            try:
                cohort_check(self.queues.specs, self.pool_size, self.pool_resources)
            except IdlegateError as exc:
                raise ValueError(f"--queues: {exc}") from None
        return self

    @model_validator(mode="after")
    def _forecast_arrivals(self) -> Settings:
        if self.forecast_arrivals == "queues" and self.queues is None:
            raise ValueError(
                no_queues("--forecast-arrivals queues", "the default pool", "--queues")
            )
        return self

    @model_validator(mode="after")
    def _lease_times(self) -> Settings:
        if not self.lease_retry_period < self.lease_renew_deadline < self.lease_duration:
            raise ValueError(
                f"the lease times must grow: retry period ({self.lease_retry_period:g} s) < "
                f"renew deadline ({self.lease_renew_deadline:g} s) < lease duration "
                f"({self.lease_duration} s), so that a leader renews several times before its "
                "deadline and stops writing before a standby may take over; change "
                "--lease-retry-period, --lease-renew-deadline or --lease-duration"
            )
        return self

    @property
    def window(self) -> int:
        """Gated pods created ahead per runnable stage."""
        return self.pool_size if self.gated_pods_per_stage is None else self.gated_pods_per_stage

    def webhook_certs_problem(self) -> str | None:
        """Why the webhook's TLS files cannot be read (a sentence), or None: kopf reads them
        only when its server starts, after the API answers, and a wrong --webhook-certs
        then fails in the background rather than as one line of the CLI."""
        certs, gating = self.webhook_certs, self.argo or self.airflow_url
        if certs is None or self.webhook_port is None or not gating:
            return None
        missing = [name for name in ("tls.crt", "tls.key") if not (certs / name).is_file()]
        if not missing:
            return None
        return (
            f"--webhook-certs {certs} holds no {' and no '.join(missing)}; give the directory "
            "where the webhook's TLS Secret is mounted (its tls.crt and tls.key)"
        )
