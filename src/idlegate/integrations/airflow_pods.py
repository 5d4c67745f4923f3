"""Airflow's worker pods as idlegate sees them: whose task try each one runs, whether it is
gated, and how long it may stay gated before Airflow gives up on it.

Airflow's KubernetesExecutor (apache-airflow-providers-cncf-kubernetes) creates one pod per
task try, labelled ``airflow-worker`` (the scheduler job's id), ``kubernetes_executor:
"True"``, ``dag_id``, ``task_id``, ``run_id``, ``try_number`` and, for a mapped task,
``map_index``. Label values are *sanitised* (``make_safe_label_value``: a run id such as
``manual__2026-11-25T00:41:16+00:00`` loses its colons and plus and gains a hash), so the
same keys are also set unsanitised as annotations, which are what is read here (a label
cannot be told from a sanitised one, so none stands in for a missing annotation).

* `is_worker_pod` tells the executor's worker pods from any other (the KubernetesPodOperator's
  pods carry ``dag_id`` too, but no ``airflow-worker``): only worker pods are gated.
* `gates_with_ours` is what the admission webhook does to a worker pod at creation.
* `AirflowPod.of` reads a worker pod: its task try (`TaskTry`), gate, phase, executor slot,
  creation time, its own run time; its stage and task keys are its task id and task
  instance, as the operator's external-pod pairing names them; `AirflowPod.problem` says, in a sentence, why a pod that carries Airflow's
  labels names no DAG run idlegate can look up (it is released to Airflow, saying so).
* `QueuedTimeout` is Airflow's pending timeout as it applies to a gated pod (docs/airflow.md,
  "The pending timeout"): the moment by which a gated pod must be released so that its
  task is running before Airflow's ``[scheduler] task_queued_timeout`` catches it.

Pure: pod dicts in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.external_pods import run_seconds, with_our_gate
from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE
from idlegate.errors import IdlegateError
from idlegate.sim.timestamps import parse_time

WORKER = "airflow-worker"
"""Label of the KubernetesExecutor's worker pods: the id of the scheduler job that made it."""
EXECUTOR_LABEL = "kubernetes_executor"
"""Label ``"True"`` on every pod the KubernetesExecutor creates."""
DAG_ID, TASK_ID, RUN_ID, TRY_NUMBER, MAP_INDEX = (
    "dag_id",
    "task_id",
    "run_id",
    "try_number",
    "map_index",
)
"""The keys Airflow sets both as labels (sanitised) and as annotations (as they are)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(pod.get("metadata"))


def is_worker_pod(pod: Mapping[str, Any]) -> bool:
    """True for a worker pod of Airflow's KubernetesExecutor (labels ``airflow-worker`` and
    ``kubernetes_executor: "True"``)."""
    labels = _mapping(_meta(pod).get("labels"))
    return WORKER in labels and labels.get(EXECUTOR_LABEL) == "True"


def gates_with_ours(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """`with_our_gate` for a worker pod; None for any other pod."""
    return with_our_gate(pod) if is_worker_pod(pod) else None


def _whole(value: Any) -> int | None:
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    return int(text) if text.lstrip("-").isdigit() else None


@dataclass(frozen=True, order=True)
class TaskTry:
    """The task try a worker pod runs: Airflow's task instance key."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    """-1 for a task that is not mapped (Airflow's own convention)."""
    try_number: int

    def __str__(self) -> str:
        index = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}/{self.run_id}/{self.task_id}{index} try {self.try_number}"


@dataclass(frozen=True)
class AirflowPod:
    """A worker pod of Airflow's KubernetesExecutor, as read from the pod."""

    namespace: str
    name: str
    uid: str
    dag_id: str | None
    run_id: str | None
    task_id: str | None
    map_index: int
    try_number: int | None
    gated: bool
    """idlegate's gate is still on it (not released yet)."""
    phase: str
    """The pod's status.phase (Pending if none yet)."""
    created: float | None
    """Epoch seconds of its creation (``metadata.creationTimestamp``), None if not set."""
    executor: int | None = None
    """The executor slot idlegate released it on (``idlegate.io/executor``), if it did."""
    ran: float | None = None
    """A succeeded pod's own run time in seconds (its ``base`` container's start to
    finish, `run_seconds`), None if its status does not tell it. Not the task instance's
    ``duration``'s wait: Airflow counts from the task's start, after the gate, but the
    pod's own time is what the operator measures for every kind alike."""

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> AirflowPod | None:
        """The pod as a worker pod of Airflow, or None if it is not one (`is_worker_pod`)."""
        if not is_worker_pod(pod):
            return None
        meta = _meta(pod)
        notes = _mapping(meta.get("annotations"))

        def value(key: str) -> str | None:
            found = notes.get(key)
            return found if isinstance(found, str) and found else None

        index = _whole(value(MAP_INDEX))
        tried = _whole(value(TRY_NUMBER))
        gates = _mapping(pod.get("spec")).get("schedulingGates") or []
        status = _mapping(pod.get("status"))
        executor = notes.get(ANNOTATION_EXECUTOR)
        phase = str(status.get("phase") or "Pending")
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            dag_id=value(DAG_ID),
            run_id=value(RUN_ID),
            task_id=value(TASK_ID),
            map_index=index if index is not None and index >= 0 else -1,
            try_number=tried if tried is not None and tried >= 0 else None,
            gated=any(isinstance(g, Mapping) and g.get("name") == GATE for g in gates),
            phase=phase,
            created=parse_time(meta.get("creationTimestamp")),
            executor=int(executor) if isinstance(executor, str) and executor.isdigit() else None,
            ran=run_seconds(pod) if phase == "Succeeded" else None,
        )

    @property
    def problem(self) -> str | None:
        """Why the pod names no task try of a DAG run (a sentence), None if it names one."""
        missing = [
            key
            for key, found in (
                (DAG_ID, self.dag_id),
                (RUN_ID, self.run_id),
                (TASK_ID, self.task_id),
                (TRY_NUMBER, self.try_number),
            )
            if found is None
        ]
        if not missing:
            return None
        return (
            f"pod {self.namespace}/{self.name} carries Airflow's worker labels but no "
            f"{', '.join(missing)} annotation (Airflow sets them unsanitised beside its "
            "labels), so it names no DAG run to schedule it in; it is left to Airflow"
        )

    @property
    def task_try(self) -> TaskTry:
        """Its task try; IdlegateError when `problem` says it has none."""
        dag, run, task, tried = self.dag_id, self.run_id, self.task_id, self.try_number
        if dag is None or run is None or task is None or tried is None:
            raise IdlegateError(self.problem or "")
        return TaskTry(dag, run, task, self.map_index, tried)

    @property
    def dag_run(self) -> tuple[str, str] | None:
        """(dag_id, run_id) of its DAG run, None if it names none."""
        return None if self.dag_id is None or self.run_id is None else (self.dag_id, self.run_id)

    @property
    def stage_key(self) -> str | None:
        """Its stage's key (`AirflowJob.stage_keys`): its task id."""
        return self.task_id

    @property
    def task_key(self) -> str | None:
        """Its task instance, tries folded: the task id, with ``[i]`` for a mapped task's
        index i."""
        if self.task_id is None:
            return None
        return f"{self.task_id}[{self.map_index}]" if self.map_index >= 0 else self.task_id

    @property
    def run_key(self) -> str:
        """What its run time is recorded under: its task instance (`task_key`)."""
        return self.task_key or self.name

    @property
    def terminal(self) -> bool:
        """It has ended (Succeeded or Failed)."""
        return self.phase in ("Succeeded", "Failed")


def run_name(dag_id: str, run_id: str) -> str:
    """A DAG run as a Kubernetes name (of the object its Events name: the operator's
    ``DagRun`` ``<dag_id>.<run_id>``, lower case, each run of other characters one ``-``)."""
    return re.sub(r"[^a-z0-9.-]+", "-", f"{dag_id}.{run_id}".lower()).strip("-.")[:200]


AIRFLOW_QUEUED_TIMEOUT = 600.0
"""Airflow's default ``[scheduler] task_queued_timeout`` (seconds)."""
AIRFLOW_CHECK_INTERVAL = 120.0
"""Airflow's default ``[scheduler] task_queued_timeout_check_interval`` (seconds)."""
DEFAULT_MARGIN = 120.0
"""Seconds kept between a forced release and Airflow's timeout by default: the
executor's delay between queueing a task and creating its pod, plus the pod's start (its
image, its interpreter) before the task tells Airflow it runs."""
SETTING = "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT"
"""The environment variable that sets Airflow's pending timeout."""


class TimeoutSettingError(IdlegateError):
    """The pending timeout and the margin given to the operator contradict each other."""


@dataclass(frozen=True)
class QueuedTimeout:
    """Airflow's pending timeout as it applies to a pod held at idlegate's gate.

    Airflow 3's scheduler (``_handle_tasks_stuck_in_queued``, every
    ``task_queued_timeout_check_interval``) finds task instances *queued* for longer than
    ``task_queued_timeout``; with the KubernetesExecutor a task stays queued until its pod
    runs and the task reports to the execution API, so a gated pod counts. Each one found
    has its pod deleted (``revoke_task``) and goes back to scheduled, which creates a
    second pod of the same try; the third time it is failed. The KubernetesExecutor's own
    ``worker_pods_pending_timeout`` is gone since Airflow 2.6 (renamed to it).

    The clock starts when the task is queued, a little before its pod is created, so a
    pod must be released `margin` seconds before ``created + timeout``: its `deadline`."""

    timeout: float = AIRFLOW_QUEUED_TIMEOUT
    """Airflow's ``[scheduler] task_queued_timeout`` as set for the Airflow whose pods are
    gated (seconds)."""
    margin: float = DEFAULT_MARGIN
    """Seconds kept before the timeout (`DEFAULT_MARGIN`)."""

    def __post_init__(self) -> None:
        if not self.timeout > 0 or self.margin < 0:
            raise TimeoutSettingError(
                f"--airflow-queued-timeout must be above 0 and --airflow-release-margin at "
                f"least 0 (got {self.timeout:g} and {self.margin:g}); give Airflow's "
                f"[scheduler] task_queued_timeout ({SETTING}) and a margin for its pods' start"
            )
        if self.margin >= self.timeout:
            raise TimeoutSettingError(
                f"--airflow-release-margin ({self.margin:g} s) is not below Airflow's "
                f"task_queued_timeout ({self.timeout:g} s), so every pod would be released at "
                f"once: raise the timeout ({SETTING}, e.g. 7200) or lower the margin"
            )

    @property
    def hold(self) -> float:
        """The most seconds a pod may stay gated."""
        return self.timeout - self.margin

    def deadline(
        self,
        pod: AirflowPod,
        now: float,
        queued: float | None = None,
        from_wall: Callable[[float], float] = float,
    ) -> float:
        """The moment by which `pod` must be released: `hold` after its task was `queued`
        (its task instance's ``queued_when``, when known), else after the pod's creation
        (else after `now`, for a pod whose creation is not recorded). Times are on the
        caller's clock: `from_wall` turns the wall-clock epoch times of Airflow and the pod
        into it."""
        known = [from_wall(t) for t in (queued, pod.created) if t is not None]
        return min(known, default=now) + self.hold

    def released_message(
        self, pod: AirflowPod, now: float, from_wall: Callable[[float], float] = float
    ) -> str:
        """The Warning a pod released at its deadline carries: what happened and the setting
        to raise (`now` and `from_wall` as for `deadline`)."""
        waited = now - (from_wall(pod.created) if pod.created is not None else now)
        return (
            f"Released before the pool had an executor for it: it waited {waited:.0f} s at "
            f"idlegate's gate, and Airflow fails or re-creates a task queued for "
            f"{self.timeout:g} s ([scheduler] task_queued_timeout). It runs beyond the pool "
            f"until an executor frees. Raise {SETTING} above the longest wait on this pool "
            "(and --airflow-queued-timeout with it) so the pool bound holds."
        )
