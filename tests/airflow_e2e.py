"""The real-Airflow end-to-end scenario, shared by tests/test_airflow_e2e.py and
benchmarks/airflow_e2e.py: everything up, DAG runs triggered, their outcome measured,
everything down, the orphans counted.

    with AirflowE2E(directory, operator_args=[]) as e2e:
        outcome = e2e.run({"idlegate_e2e_diamond": 2})
    outcome.leftovers = e2e.leftovers()

:class:`AirflowE2E` brings up the test API server (the project's CRDs served), a namespace,
PostgreSQL, Airflow (tests/k8s/airflow_stack.py) and a :class:`CommandKubelet` for
Airflow's pods. With `operator_args` (a list, possibly empty) it also starts
``idlegate operator`` on that namespace with those extra flags, a simulated kubelet for
every other pod, and, once the first Airflow pod runs, `workflows` DagWorkflows and
`argo` Argo Workflows beside the DAG runs (Argo's Workflow CRD from ../shared/data/argo,
run by the stand-in for Argo's controller of tests/k8s/argo_controller.py, which creates
their pods gated; the operator gets ``--argo``). The operator gates its own pods and
Argo's; Airflow's are gated too with `gate_airflow`, else they run beside the pool.
:class:`AirflowPods` measures the pool all kinds share.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import kmock
import yaml

from idlegate.api.argo_pods import NODE_ID, WORKFLOW_LABEL
from idlegate.api.crd import KINDS, render_crd
from idlegate.api.labels import GATE, LABEL_WORKFLOW
from idlegate.api.status import FINISHED
from idlegate.integrations.airflow_pods import AirflowPod, TaskTry
from idlegate.integrations.airflow_pods import is_worker_pod as is_airflow_pod
from tests.argo_data import WORKFLOW_CRD
from tests.argo_workflows import diamond, loop, phase, steps
from tests.e2e import DWF, OperatorProcess, stage, status_of, wait, workflow
from tests.k8s.airflow_stack import (
    CHANGING_DAG,
    PASSWORD,
    USER,
    AirflowStack,
    HarnessError,
    Postgres,
    leftovers,
)
from tests.k8s.apiserver import PODS
from tests.k8s.argo_controller import DONE, WORKFLOWS, ArgoController
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import CommandKubelet, SimKubelet

NAMESPACE = "airflow"
STUCK = "stuck in queued tries exceeded"
"""The event Airflow logs when it fails a task queued beyond ``task_queued_timeout`` (its
pending timeout: the pod never ran) after requeueing it."""
REQUEUED = "stuck in queued reschedule"
WATCHER_DIED = "Unknown error in KubernetesJobWatcher"
GATED_WORKER = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "placeholder"},
    "spec": {
        "containers": [{"name": "base", "image": "apache/airflow:3.1.3"}],
        "restartPolicy": "Never",
        "schedulingGates": [{"name": GATE}],
    },
}
"""Airflow's worker pod template (``[kubernetes_executor] pod_template_file``) that creates
every worker pod gated: the test API server calls no admission webhook (docs/airflow.md:
the webhook, or this template)."""
KINDS_OF_PODS = ("Airflow", "Argo", "DagWorkflow")
ARGO_SECONDS = 5.0
"""The run time of each Argo pod (the simulated kubelet's, and the operator's estimate)."""


def kind_of(pod: dict[str, Any]) -> str:
    """Which kind of job a pod of the namespace belongs to (``other``: none of the three)."""
    labels = pod["metadata"].get("labels") or {}
    if is_airflow_pod(pod):
        return "Airflow"
    if WORKFLOW_LABEL in labels:
        return "Argo"
    return "DagWorkflow" if LABEL_WORKFLOW in labels else "other"


def argo_workflow(i: int) -> dict[str, Any]:
    """The `i`-th Argo Workflow beside the DAG runs: a diamond, a loop over three items
    and a steps workflow, in turn."""
    shape = (diamond, lambda name, seconds: loop(name, 3, seconds), steps)[i % 3]
    return shape(f"argo-{i}", ARGO_SECONDS)


class AirflowPods:
    """Every write of the namespace's pods, as it happens: creations of Airflow's pods per
    task try and of Argo's per node (a duplicate is a try or node with two pods), and the
    most running at once, of each kind and of all kinds together."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.created: Counter[TaskTry | str] = Counter()
        self.argo_created: Counter[tuple[str, str]] = Counter()
        """Argo's pods created per (workflow, node id)."""
        self.running: dict[str, set[str]] = {kind: set() for kind in (*KINDS_OF_PODS, "other")}
        self.max_running: Counter[str] = Counter()
        """The most pods of each kind running at once."""
        self.max_total = 0
        """The most pods of all kinds holding an executor at once."""
        self.live: dict[str, set[str]] = {kind: set() for kind in (*KINDS_OF_PODS, "other")}
        """Pods not ended (gated, pending or running), by kind."""
        self.gated_at: dict[str, float] = {}
        """Airflow's pods gated now, and since when (monotonic seconds)."""
        self.longest_gated = (0.0, "")
        """The longest an Airflow pod stayed gated before its gate went (or it went), and
        which."""
        self.wanted: set[str] = set()
        self.together = threading.Event()
        """Set once each kind of `wanted` has a pod not ended at the same moment (work in
        flight of each kind)."""
        self._lock = threading.Lock()
        self._unsubscribe = api.call(lambda: api.emulator.subscribe(self._on_event))

    def _on_event(self, res: kmock.resource, etype: str, pod: dict[str, Any]) -> None:
        if res != PODS or pod["metadata"].get("namespace") != self.namespace:
            return
        name = pod["metadata"]["name"]
        runs = (
            etype != "DELETED"
            and (pod.get("status") or {}).get("phase") == "Running"
            and not pod["spec"].get("schedulingGates")
        )
        kind = kind_of(pod)
        with self._lock:
            if kind == "Airflow" and etype == "ADDED":
                read = AirflowPod.of(pod)
                self.created[read.task_try if read and not read.problem else name] += 1
            if kind == "Airflow":
                gated = etype != "DELETED" and bool(pod["spec"].get("schedulingGates"))
                if gated:
                    self.gated_at.setdefault(name, time.monotonic())
                elif name in self.gated_at:
                    waited = time.monotonic() - self.gated_at.pop(name)
                    self.longest_gated = max(self.longest_gated, (waited, name))
            if kind == "Argo" and etype == "ADDED":
                labels, notes = pod["metadata"]["labels"], pod["metadata"].get("annotations")
                self.argo_created[labels[WORKFLOW_LABEL], (notes or {}).get(NODE_ID, name)] += 1
            held = self.running[kind]
            (held.add if runs else held.discard)(name)
            ended = etype == "DELETED" or (pod.get("status") or {}).get("phase") in (
                "Succeeded",
                "Failed",
            )
            (self.live[kind].discard if ended else self.live[kind].add)(name)
            if self.wanted and all(self.live[k] for k in self.wanted):
                self.together.set()
            self.max_running[kind] = max(self.max_running[kind], len(held))
            total = sum(len(names) for names in self.running.values())
            self.max_total = max(self.max_total, total)

    def close(self) -> None:
        self.api.call(self._unsubscribe)

    @property
    def twice(self) -> list[TaskTry | str]:
        """Task tries with more than one pod."""
        with self._lock:
            return [key for key, n in self.created.items() if n > 1]

    def airflow_running(self) -> bool:
        with self._lock:
            return bool(self.running["Airflow"])

    @property
    def argo_twice(self) -> list[tuple[str, str]]:
        """Argo nodes with more than one pod."""
        with self._lock:
            return [key for key, n in self.argo_created.items() if n > 1]


@dataclass
class Outcome:
    """What one scenario measured (see :meth:`AirflowE2E.run`)."""

    runs: int = 0
    runs_succeeded: int = 0
    task_instances: int = 0
    failed: list[str] = field(default_factory=list)
    """Failed task instances, ``dag/run/task[index]``, ``(pending timeout)`` if so."""
    pending_timeouts: int = 0
    requeued: int = 0
    """Tasks Airflow put back from queued after ``task_queued_timeout`` (still pending)."""
    pods_created: int = 0
    pods_twice: list[TaskTry | str] = field(default_factory=list)
    max_running: int = 0
    max_running_all: int = 0
    """The most pods of all kinds (Airflow's, Argo's, DagWorkflows') running at once."""
    max_running_by_kind: dict[str, int] = field(default_factory=dict)
    watcher_deaths: int = 0
    workflows: dict[str, str] = field(default_factory=dict)
    """DagWorkflow -> its phase, when the operator ran beside Airflow."""
    argo_workflows: dict[str, str] = field(default_factory=dict)
    """Argo Workflow -> its phase."""
    argo_pods_created: int = 0
    argo_pods_twice: list[tuple[str, str]] = field(default_factory=list)
    in_flight_at_kill: dict[str, int] = field(default_factory=dict)
    """Of each kind, the runs or workflows not yet ended when the operator was killed."""
    seconds: float = 0.0
    leftovers: list[str] = field(default_factory=list)
    pool: int | None = None
    """The operator's pool size (None: no operator)."""
    gated: bool = False
    """Airflow's pods were gated and scheduled by the operator."""
    operator_kills: int = 0
    longest_gated: tuple[float, str] = (0.0, "")
    """The longest an Airflow pod waited at the gate (seconds), and which."""
    still_gated: list[str] = field(default_factory=list)
    """Airflow's pods gated when every run had ended: left behind the gate."""
    warnings: dict[str, int] = field(default_factory=dict)
    """The operator's Warnings on Airflow's pods, by reason."""
    changed_run: dict[str, str] = field(default_factory=dict)
    """Of the run of the DAG changed during it: each task's state."""

    def lines(self) -> list[str]:
        pool = ""
        if self.pool is not None:
            inside = "in" if self.gated else "not in"
            pool = f"; the operator's pool: {self.pool}, Airflow's pods {inside} it"
        killed = f"operator killed -9 mid-run and started again: {self.operator_kills}"
        by_kind = ", ".join(f"{k} {n}" for k, n in self.max_running_by_kind.items())
        at_kill = ", ".join(f"{k} {n}" for k, n in self.in_flight_at_kill.items())
        phases = Counter(self.argo_workflows.values())
        argo = [
            f"Argo Workflows beside: {len(self.argo_workflows)}, "
            + ", ".join(f"{n} {p}" for p, n in sorted(phases.items())),
            f"Argo pods created: {self.argo_pods_created}; Argo nodes with a pod created"
            f" twice: {len(self.argo_pods_twice)}",
        ]
        return [
            f"runs succeeded: {self.runs_succeeded}/{self.runs} in {self.seconds:.0f} s",
            f"task instances failed: {len(self.failed)} of {self.task_instances}"
            f" ({self.pending_timeouts} for a pending timeout, task_queued_timeout;"
            f" {self.requeued} requeued after it)",
            *(f"  {line}" for line in self.failed),
            f"pods created: {self.pods_created}; task tries with a pod created twice: "
            f"{len(self.pods_twice)}",
            f"max Airflow pods running at once: {self.max_running}"
            f" (all pods of the namespace: {self.max_running_all}{pool})",
            *([f"  the most of each kind: {by_kind}"] if by_kind else []),
            *([killed] if self.operator_kills else []),
            *([f"  not ended at the kill: {at_kill}"] if at_kill else []),
            f"pod watcher deaths in the scheduler's log: {self.watcher_deaths}",
            *([f"DagWorkflows beside: {self.workflows}"] if self.workflows else []),
            *(
                [
                    f"the longest an Airflow pod waited at the gate: {self.longest_gated[0]:.1f} s"
                    f" ({self.longest_gated[1]});"
                    f" pods still gated at the end: {len(self.still_gated)};"
                    f" Warnings on Airflow's pods: {self.warnings or 'none'}"
                ]
                if self.gated
                else []
            ),
            *([f"the changed DAG's run: {self.changed_run}"] if self.changed_run else []),
            *(argo if self.argo_workflows else []),
            f"processes left after the stop: {len(self.leftovers)}",
            *(f"  {line}" for line in self.leftovers),
        ]


class AirflowE2E:
    """The whole scenario's processes, from enter to exit (see the module docstring);
    `settings` go to :class:`AirflowStack`, `pool` to the operator."""

    def __init__(
        self,
        directory: Path,
        *,
        python: str | None = None,
        settings: dict[str, str] | None = None,
        operator_args: list[str] | None = None,
        pool: int = 4,
        workflows: int = 2,
        argo: int = 0,
        gate_airflow: bool = False,
        kill_operator: bool = False,
        flaky: str | None = None,
        change: bool = False,
        beside: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None,
        time_factor: float = 1.0,
    ) -> None:
        self.directory = Path(directory)
        self.python, self.settings = python, dict(settings or {})
        self.operator_args, self.pool, self.workflow_count = operator_args, pool, workflows
        self.beside, self.time_factor = beside, time_factor
        """The DagWorkflows and Argo Workflows to create beside the DAG runs instead of
        `workflows` and `argo` default ones; the simulated kubelet's wall seconds per
        simulated second (a pod's run time)."""
        if beside is not None:
            workflows, argo = len(beside[0]), len(beside[1])
        self.argo_count = argo if operator_args is not None else 0
        self.gate_airflow, self.kill_operator = gate_airflow, kill_operator
        """With the operator: Airflow's pods are created gated (its worker pod template)
        and the operator schedules them (its --airflow-* flags); it is killed -9 once the
        first Airflow pod runs, and started again."""
        self.flaky, self.change = flaky, change
        """Each run of the DAG `flaky` has the operator's first read of it answered 503 (a
        proxy between the operator and Airflow's API); with `change`, the run of
        CHANGING_DAG has its DAG changed while it runs (`_change_dag`)."""
        self.markers: list[str] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Self:
        enter = self._stack.enter_context
        try:
            self.api = enter(ApiServer(self.directory))
            for kind in KINDS:
                self.api.create("customresourcedefinitions", render_crd(kind))
            self.api.create("namespaces", {"metadata": {"name": NAMESPACE}})
            if self.argo_count:
                self._install_argo()
            self.pods = AirflowPods(self.api, NAMESPACE)
            self._stack.callback(self.pods.close)
            db = enter(Postgres())
            self.markers.append(str(db.directory))
            if self.gate_airflow:
                template = self.directory / "worker-pod.yaml"
                template.write_text(json.dumps(GATED_WORKER))
                self.settings["AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE"] = str(template)
            self.airflow = AirflowStack(
                self.directory, self.api.kubeconfig, NAMESPACE, db.url,
                python=self.python, settings=self.settings,
            )  # fmt: skip
            self.markers.append(str(self.airflow.home))
            enter(self.airflow)
            logs = self.directory / "pods"
            enter(
                CommandKubelet(
                    self.api, NAMESPACE, python=self.airflow.python, env=self.airflow.env,
                    logs=logs, selects=is_airflow_pod,
                )
            )  # fmt: skip
            if self.operator_args is not None:
                self._start_operator()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _install_argo(self) -> None:
        """Argo's Workflow CRD, and the stand-in for its controller on the namespace."""
        if not WORKFLOW_CRD.exists():
            raise HarnessError(
                f"Argo's Workflow CRD is not at {WORKFLOW_CRD.resolve()} (../shared/data is "
                "absent): provide it, or run without Argo Workflows (argo=0, --argo 0)"
            )
        self.api.create("customresourcedefinitions", yaml.safe_load(WORKFLOW_CRD.read_text()))
        self._stack.enter_context(ArgoController(self.api, NAMESPACE))

    def _start_operator(self, again: bool = False) -> None:
        if not again:
            others = lambda pod: not is_airflow_pod(pod)  # noqa: E731
            kubelet = SimKubelet(self.api, NAMESPACE, time_factor=self.time_factor, selects=others)
            self._stack.enter_context(kubelet)
        log = self.directory / ("operator-again.log" if again else "operator.log")
        flags = list(self.operator_args or []) + (["--argo"] if self.argo_count else [])
        if self.gate_airflow:
            secret = self.directory / "airflow-password"
            secret.write_text(PASSWORD)
            timeout = float(self.settings.get("AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT", 600))
            url = self.airflow.url
            if self.flaky is not None:
                url = self._stack.enter_context(FlakyProxy(url, self.flaky)).url
            flags += [
                f"--airflow-url={url}",
                f"--airflow-username={USER}",
                f"--airflow-password-file={secret}",
                f"--airflow-queued-timeout={timeout:g}",
                f"--airflow-release-margin={min(120.0, timeout / 2):g}",  # (a short timeout)
            ]
        operator = OperatorProcess(self.api, NAMESPACE, self.pool, log, *flags)
        self.markers.append(str(log))
        self._stack.callback(operator.kill, signal.SIGTERM)
        wait(lambda: (operator.readiness() or {}).get("ready"), 60, "the operator to be ready")
        self.operator = operator

    def _kill_and_restart(self, unended: dict[str, Any]) -> dict[str, int]:
        """kill -9 the operator once each kind has a pod not ended at the same moment
        (work in flight of each kind), then start another; of each kind, the runs or
        workflows `unended` counted at the kill."""
        kinds = sorted(self.pods.wanted)
        wait(self.pods.together.is_set, 300, f"a pod of each of {kinds} in flight at once")
        self.operator.kill(signal.SIGKILL)
        at_kill = {kind: count() for kind, count in unended.items()}
        self._start_operator(again=True)
        return at_kill

    def leftovers(self) -> list[str]:
        """The processes of this scenario still alive (call after the exit)."""
        return leftovers(*self.markers)

    def run(self, runs: dict[str, int]) -> Outcome:
        """Trigger ``runs[dag_id]`` runs of each DAG (and the DagWorkflows, with the
        operator), wait until all have ended, and measure them."""
        start = time.monotonic()
        triggered = [(dag, self.airflow.trigger(dag)) for dag, n in runs.items() for _ in range(n)]
        names, argo_names = [], []
        if self.operator_args is not None:
            # beside the DAG runs once their first pod runs, so that all kinds share the pool
            wait(self.pods.airflow_running, 300, "an Airflow pod to run")
            counts = {"Airflow": 1, "Argo": self.argo_count, "DagWorkflow": self.workflow_count}
            self.pods.wanted = {kind for kind, n in counts.items() if n}
            dags, argos = self.beside or (
                [
                    workflow(f"beside-{i}", stage("a", 2, 3), stage("b", 2, 3, ("a",)))
                    for i in range(self.workflow_count)
                ],
                [argo_workflow(i) for i in range(self.argo_count)],
            )
            for body in dags:
                self.api.create(DWF, body, NAMESPACE)
                names.append(body["metadata"]["name"])
            for body in argos:
                self.api.create(WORKFLOWS, body, NAMESPACE)
                argo_names.append(body["metadata"]["name"])
        states: dict[tuple[str, str], str] = {}

        def poll_runs() -> int:
            """Read every run's state; how many of the triggered ones have not ended."""
            for dag in runs:
                for found in self.airflow.runs(dag):
                    states[dag, found["dag_run_id"]] = found["state"]
            return sum(states.get(key) not in ("success", "failed") for key in triggered)

        def unended_workflows() -> int:
            return sum(
                status_of(self.api, NAMESPACE, n).get("phase") not in FINISHED for n in names
            )

        def unended_argo() -> int:
            return sum(phase(self.api, NAMESPACE, n) not in DONE for n in argo_names)

        if self.change:
            self._change_dag()
        at_kill: dict[str, int] = {}
        if self.kill_operator and self.operator_args is not None:
            unended = {"Airflow": poll_runs, "Argo": unended_argo, "DagWorkflow": unended_workflows}
            at_kill = self._kill_and_restart(unended)

        def ended() -> bool:
            return poll_runs() == 0 and unended_workflows() == 0 and unended_argo() == 0

        wait(ended, 300 + 60 * len(triggered), "the end of every DAG run and workflow")
        outcome = Outcome(runs=len(triggered), seconds=time.monotonic() - start)
        outcome.pool = self.pool if self.operator_args is not None else None
        outcome.gated = self.gate_airflow
        outcome.operator_kills = int(self.kill_operator and self.operator_args is not None)
        outcome.runs_succeeded = sum(states[key] == "success" for key in triggered)
        stuck = self._events(STUCK)
        outcome.requeued = len(self._events(REQUEUED))
        for dag, run_id in triggered:
            for ti in self.airflow.task_instances(dag, run_id):
                outcome.task_instances += 1
                if ti["state"] in ("failed", "upstream_failed"):
                    key = (dag, run_id, ti["task_id"], _index(ti))
                    timed_out = key in stuck
                    outcome.pending_timeouts += timed_out
                    index = f"[{key[3]}]" if key[3] != -1 else ""
                    note = " (pending timeout)" if timed_out else ""
                    name = f"{dag}/{run_id}/{ti['task_id']}{index}"
                    outcome.failed.append(f"{name}: {ti['state']}{note}")
        outcome.pods_created = sum(self.pods.created.values())
        outcome.pods_twice = self.pods.twice
        outcome.max_running = self.pods.max_running["Airflow"]
        outcome.max_running_all = self.pods.max_total
        if self.operator_args is not None:
            kinds = [k for k in KINDS_OF_PODS if k != "Argo" or self.argo_count]
            outcome.max_running_by_kind = {k: self.pods.max_running[k] for k in kinds}
        outcome.in_flight_at_kill = at_kill
        outcome.watcher_deaths = self.airflow.tail("scheduler", 10**9).count(WATCHER_DIED)
        outcome.workflows = {n: str(status_of(self.api, NAMESPACE, n).get("phase")) for n in names}
        outcome.argo_workflows = {n: str(phase(self.api, NAMESPACE, n)) for n in argo_names}
        outcome.argo_pods_created = sum(self.pods.argo_created.values())
        outcome.argo_pods_twice = self.pods.argo_twice
        outcome.longest_gated = self.pods.longest_gated
        outcome.still_gated = sorted(self.pods.gated_at)
        events = [e for e in self.api.list("events", NAMESPACE) if e.get("type") == "Warning"]
        outcome.warnings = dict(Counter(e["reason"] for e in events))
        for dag, run_id in triggered:
            if dag == CHANGING_DAG:
                tis = self.airflow.task_instances(dag, run_id)
                outcome.changed_run = {ti["task_id"]: ti["state"] for ti in tis}
        return outcome

    def _change_dag(self) -> None:
        """Once the changing DAG's first task runs, replace its task ``c`` by ``e``."""
        wait(lambda: any("wait" in n for n in self.pods.running["Airflow"]), 300, "wait to run")
        old = 'step.override(task_id="c")("c")'
        self.airflow.change_dag(CHANGING_DAG, old, old.replace('"c"', '"e"'), "e")

    def _events(self, event: str) -> set[tuple[str, str, str, int]]:
        """(dag, run, task, map index) of each event log entry named `event`."""
        found = self.airflow.client.pages("eventLogs", "event_logs", {"event": event})
        return {(e["dag_id"], e["run_id"], e["task_id"], _index(e)) for e in found}


def _index(entry: dict[str, Any]) -> int:
    """A map index as task instances give it (-1: not mapped)."""
    index = entry.get("map_index")
    return -1 if index is None else int(index)


class FlakyProxy:
    """Airflow's API behind a proxy that answers 503 to the first ``GET`` of each run of
    the DAG `dag` (``/dags/{dag}/dagRuns/{run_id}``): an API error at a run's first pod."""

    def __init__(self, upstream: str, dag: str) -> None:
        self.failed: set[str] = set()
        proxy = self
        prefix = f"/api/v2/dags/{dag}/dagRuns/"

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _forward(self, method: str) -> None:
                path = self.path.split("?")[0]
                run = path.startswith(prefix) and "/" not in path[len(prefix) :]
                if method == "GET" and run and path not in proxy.failed:
                    proxy.failed.add(path)
                    return self._answer(503, b'{"detail": "Service Unavailable (test)"}')
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                request = urllib.request.Request(
                    upstream + self.path, data=body, headers=headers, method=method
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as reply:
                        self._answer(reply.status, reply.read())
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, exc.read())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
