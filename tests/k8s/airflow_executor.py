"""A small stand-in for Airflow 3's scheduler with the KubernetesExecutor, for tests on the
emulated API server that need Airflow's pods but not Airflow's own processes (a real
Airflow, tests/k8s/airflow_stack.py, takes half a minute of two cores to start).

It serves the part of Airflow's REST API idlegate reads (`LiveDags`), through the replaying
server of tests/airflow_data.py: one recorded DAG's answers (its structure, its earlier
runs), and those of the runs it runs, rewritten as they go. It runs them as Airflow's
scheduler and KubernetesExecutor do, from the emulator's events (in the test API server's
event loop, as tests/k8s/argo_controller.py):

* :meth:`AirflowExecutor.trigger` starts a run (``running``, queued now) whose task
  instances have no state yet;
* a task instance is queued once every task upstream of it succeeded: ``queued``, its
  ``queued_when`` now, try 1, and one worker pod created as ``PodGenerator.construct_pod``
  makes it (the labels and annotations of tests/data/airflow/worker-pods.json, the run id's
  label sanitised as Airflow does, a unique name, the run's `labels` added as a
  ``pod_override`` adds them), gated by idlegate's gate (Airflow's worker pod template, as
  tests/airflow_e2e.py's ``GATED_WORKER``), running for the task's `durations` seconds on
  the simulated kubelet (its ``TASK_DURATION_SECONDS``);
* its pod running: the task instance ``running``; its pod succeeded: ``success`` (the task
  reports before its pod ends), the pod deleted (``delete_worker_pods``), the tasks after it
  queued; every one succeeded: the run ``success``;
* a task instance still queued `queued_timeout` wall seconds after it was (Airflow's
  ``task_queued_timeout``: its pod never ran) has its pod deleted and a new one created, as
  Airflow's scheduler requeues it: `pods` counts the pods of each task instance.

Left out: failures and retries, mapped tasks, trigger rules other than ``all_success``,
skipped and Empty tasks, pools and slots, a run's own end time beyond its last task's.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import ExitStack, suppress
from datetime import UTC, datetime
from typing import Any, Self

import kmock

from idlegate.api.labels import GATE
from idlegate.integrations.airflow_pods import (
    DAG_ID,
    RUN_ID,
    TASK_ID,
    TRY_NUMBER,
    AirflowPod,
)
from tests.airflow_data import DATA, replaying, session
from tests.k8s.apiserver import PODS
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import DURATION_ENV
from tests.test_airflow_live import _path

Instance = tuple[str, str, str]
"""(namespace, run id, task id): one task instance (no mapped tasks here)."""


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def safe_label(value: str) -> str:
    """A label value as Airflow's ``make_safe_label_value`` sanitises it."""
    safe = re.sub(r"^[^a-z0-9A-Z]*|[^a-zA-Z0-9_\-\.]|[^a-z0-9A-Z]*$", "", value)
    if len(safe) > 63 or safe != value:
        digest = hashlib.md5(value.encode()).hexdigest()[:9]
        safe = f"{safe[: 63 - len(digest) - 1]}-{digest}"
    return safe


class AirflowExecutor:
    """Runs DAG runs of the recorded DAG `dag` (a context manager: from enter to exit; `url`
    its REST API's), each task's pod `durations[task]` simulated seconds long."""

    def __init__(
        self,
        api: ApiServer,
        dag: str,
        durations: Mapping[str, float],
        *,
        queued_timeout: float,
    ) -> None:
        self.api, self.emulator, self.dag = api, api.emulator, dag
        self.durations, self.queued_timeout = dict(durations), queued_timeout
        self.answers: dict[str, Any] = session(dag)
        listed = next(k for k in self.answers if f"{dag}/dagRuns?" in k)
        recorded = self.answers[listed]["body"]["dag_runs"]
        # (the recording asked for 3 runs; the DAG has no more, so 25 gives the same 3)
        self.answers[re.sub(r"limit=\d+", "limit=25", listed)] = self.answers[listed]
        details = self.answers[f"GET /api/v2/dags/{dag}/details"]["body"]
        self.answers["GET /api/v2/dags?limit=1"] = {
            "status": 200,
            "body": {"dags": [details], "total_entries": 1},
        }
        self.model_run = recorded[0]
        instances = f"{_path(dag, recorded[0]['dag_run_id'])}/taskInstances?limit=100&offset=0"
        self.model_instances = self.answers[instances]["body"]["task_instances"]
        tasks = self.answers[f"GET /api/v2/dags/{dag}/tasks"]["body"]["tasks"]
        self.upstream: dict[str, set[str]] = {t["task_id"]: set() for t in tasks}
        for t in tasks:
            for down in t.get("downstream_task_ids") or ():
                self.upstream[down].add(t["task_id"])
        (self.template,) = json.loads((DATA / "worker-pods.json").read_text())[:1]
        self.runs: dict[tuple[str, str], dict[str, Any]] = {}
        """(namespace, run id) -> the run as Airflow answers for it."""
        self.instances: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        """(namespace, run id) -> task id -> its task instance."""
        self.labels: dict[tuple[str, str], dict[str, str]] = {}
        self.pod_of: dict[Instance, str] = {}
        """Each task instance's pod now (its name)."""
        self.pods: Counter[Instance] = Counter()
        """Pods created per task instance (a requeue makes a second)."""
        self.names: set[tuple[str, str]] = set()
        """(namespace, name) of every pod created."""
        self.ended: dict[tuple[str, str], float] = {}
        """(namespace, run id) -> when the run ended (monotonic wall seconds)."""
        self.started: dict[tuple[str, str], float] = {}
        """(namespace, run id) -> when it was triggered (monotonic wall seconds)."""
        self.timeline: list[tuple[float, Instance, str]] = []
        """(monotonic wall seconds, task instance, its new state), in order: where a run's
        time went."""
        self._numbers = itertools.count()
        self._stack = ExitStack()
        self.url = ""

    def __enter__(self) -> Self:
        self.url = self._stack.enter_context(replaying(self.answers))
        self._stack.callback(self.api.call, self.api.call(self._subscribe))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _subscribe(self) -> Callable[[], None]:
        return self.emulator.subscribe(self._on_event)

    # -- what Airflow answers ------------------------------------------------------------------

    def _publish(self, key: tuple[str, str]) -> None:
        """Answer for the run as it is now (each answer replaced whole: the server's threads
        read them)."""
        run_id = key[1]
        instances = [copy.deepcopy(ti) for ti in self.instances[key].values()]
        body = {"task_instances": instances, "total_entries": len(instances)}
        path = _path(self.dag, run_id)
        self.answers[path] = {"status": 200, "body": copy.deepcopy(self.runs[key])}
        self.answers[f"{path}/taskInstances?limit=100&offset=0"] = {"status": 200, "body": body}

    def trigger(self, namespace: str, run_id: str, labels: Mapping[str, str] = {}) -> None:
        """Start a run `run_id` (unique: Airflow's answers are by run id) whose pods go to
        `namespace` with `labels` (from the test's thread)."""
        self.api.call(self._trigger, namespace, run_id, dict(labels))

    def _trigger(self, namespace: str, run_id: str, labels: dict[str, str]) -> None:
        key, now = (namespace, run_id), time.time()
        run = copy.deepcopy(self.model_run)
        run.update(dag_run_id=run_id, state="running", queued_at=_stamp(now))
        run.update(run_after=_stamp(now), start_date=_stamp(now), end_date=None, duration=None)
        self.runs[key], self.labels[key] = run, labels
        self.started[key] = time.monotonic()
        self.instances[key] = {}
        for model in self.model_instances:
            ti = copy.deepcopy(model)
            ti.update(dag_run_id=run_id, state=None, try_number=0, duration=None)
            ti.update(start_date=None, end_date=None, queued_when=None, scheduled_when=None)
            self.instances[key][ti["task_id"]] = ti
        self._schedule(key)

    def _schedule(self, key: tuple[str, str]) -> None:
        """Queue every task whose upstream tasks succeeded; end the run once all did."""
        tis = self.instances[key]
        for task, ti in tis.items():
            if ti["state"] is None and all(
                tis[u]["state"] == "success" for u in self.upstream[task]
            ):
                ti.update(state="queued", try_number=1, queued_when=_stamp(time.time()))
                self.timeline.append((time.monotonic(), (*key, task), "queued"))
                self._create_pod(key, task)
        if all(ti["state"] == "success" for ti in tis.values()):
            self.runs[key].update(state="success", end_date=_stamp(time.time()))
            self.ended[key] = time.monotonic()
        self._publish(key)

    # -- the executor's pods -------------------------------------------------------------------

    def _create_pod(self, key: tuple[str, str], task: str) -> None:
        namespace, run_id = key
        pod = copy.deepcopy(self.template)
        meta = pod["metadata"]
        base = f"{self.dag}-{task}".replace("_", "-").replace(".", "-")
        name = f"{base}-{next(self._numbers):08x}"
        notes = {DAG_ID: self.dag, RUN_ID: run_id, TASK_ID: task, TRY_NUMBER: "1"}
        labels = {**meta["labels"], **{k: safe_label(v) for k, v in notes.items()}}
        meta.update(name=name, namespace=namespace, annotations=notes)
        meta["labels"] = {**labels, **self.labels[key]}
        pod["spec"]["restartPolicy"] = "Never"
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
        env = pod["spec"]["containers"][0].setdefault("env", [])
        env.append({"name": DURATION_ENV, "value": str(self.durations[task])})
        self.emulator.create(PODS, pod, namespace)
        instance = (namespace, run_id, task)
        self.pod_of[instance] = name
        self.pods[instance] += 1
        self.names.add((namespace, name))
        loop = asyncio.get_running_loop()
        loop.call_later(self.queued_timeout, self.emulator._safely, self._stuck, instance, name)

    def _stuck(self, instance: Instance, name: str) -> None:
        """Airflow's ``task_queued_timeout``: a task still queued with its pod not running is
        requeued (its pod deleted, a new one created)."""
        namespace, run_id, task = instance
        ti = self.instances[namespace, run_id][task]
        if ti["state"] != "queued" or self.pod_of.get(instance) != name:
            return
        with suppress(kmock.KubernetesError):  # (gone already)
            self.emulator.delete(PODS, namespace, name)
        self._create_pod((namespace, run_id), task)

    def _on_event(self, res: kmock.resource, etype: str, body: dict[str, Any]) -> None:
        pod = AirflowPod.of(body) if res == PODS and etype != "DELETED" else None
        if pod is None or pod.dag_id != self.dag or pod.run_id is None or pod.task_id is None:
            return
        key = (pod.namespace, pod.run_id)
        ti = self.instances.get(key, {}).get(pod.task_id)
        if ti is None or self.pod_of.get((*key, pod.task_id)) != pod.name:
            return
        now = time.time()
        if pod.phase == "Running" and ti["state"] == "queued":
            ti.update(state="running", start_date=_stamp(now))
            self.timeline.append((time.monotonic(), (*key, pod.task_id), "running"))
            self._publish(key)
        elif pod.phase == "Succeeded" and ti["state"] in ("queued", "running"):
            started = ti.get("start_date") or _stamp(now)
            ti.update(state="success", end_date=_stamp(now), start_date=started)
            self.timeline.append((time.monotonic(), (*key, pod.task_id), "success"))
            self.emulator.delete(PODS, pod.namespace, pod.name)
            self._schedule(key)

    # -- what a test reads ---------------------------------------------------------------------

    def done(self, namespace: str, run_id: str) -> bool:
        return (namespace, run_id) in self.ended

    def state(self, namespace: str, run_id: str) -> str:
        return str(self.api.call(lambda: self.runs[namespace, run_id]["state"]))

    def jct(self, namespace: str, run_id: str, speed: float) -> float:
        """The run's time from its trigger to its end, in simulated seconds."""
        key = (namespace, run_id)
        return (self.ended[key] - self.started[key]) * speed
