"""A small stand-in for Airflow 3's scheduler with the KubernetesExecutor, for tests on the
emulated API server that need Airflow's pods but not Airflow's own processes (a real
Airflow, tests/k8s/airflow_stack.py, takes half a minute of two cores to start).

It serves the part of Airflow's REST API idlegate reads (`LiveDags`), through the replaying
server of tests/airflow_data.py: one recorded DAG's answers (its structure, its earlier
runs), or those of a DAG of any size generated in their shape (:func:`layered`), and those
of the runs it runs, rewritten as they go (task instances paged by 100, as Airflow pages
them; a change rewrites the page that holds it). It runs them as Airflow's
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
  the simulated kubelet (its ``TASK_DURATION_SECONDS``), its containers' resources those of
  the task instance's ``executor_config`` pod override, if any (merged over the template as
  the executor merges it: only the resources here);
* its pod running: the task instance ``running``; its pod succeeded: ``success`` (the task
  reports before its pod ends), the pod deleted (``delete_worker_pods``), the tasks after it
  queued (only those: a task's end costs its downstream tasks, not the DAG); every one
  succeeded: the run ``success``;
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
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack, suppress
from datetime import UTC, datetime
from typing import Any, Self

import kmock

from idlegate.api.labels import GATE
from idlegate.integrations.airflow import PAGE
from idlegate.integrations.airflow_pods import (
    DAG_ID,
    RUN_ID,
    TASK_ID,
    TRY_NUMBER,
    AirflowPod,
)
from idlegate.sim.airflow.requests import pod_override_spec
from tests.airflow_data import DATA, replaying, session
from tests.k8s.apiserver import PODS
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import DURATION_ENV
from tests.test_airflow_live import _path
from tests.test_airflow_requests import container, override

Instance = tuple[str, str, str]
"""(namespace, run id, task id): one task instance (no mapped tasks here)."""


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _pages(path: str, instances: list[dict[str, Any]]) -> dict[str, Any]:
    """The answers to ``<path>/taskInstances`` page by page, as the client asks for them."""
    body = {"task_instances": [], "total_entries": len(instances)}
    pages = {}
    for offset in range(0, max(len(instances), 1), PAGE):
        page = {**body, "task_instances": instances[offset : offset + PAGE]}
        pages[f"{path}/taskInstances?limit={PAGE}&offset={offset}"] = {"status": 200, "body": page}
    return pages


def _renamed(obj: Any, old: str, new: str) -> Any:
    """`obj` with every string `old` (a DAG id) replaced by `new`."""
    if isinstance(obj, dict):
        return {k: _renamed(v, old, new) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_renamed(v, old, new) for v in obj]
    return new if obj == old else obj


def layered(
    tasks: int, width: int = 100, seconds: float = 1.0, requests: Mapping[str, str] | None = None
) -> tuple[str, dict[str, Any]]:
    """A DAG ``layered_<tasks>`` of `tasks` tasks in `width` chains (task ``t<i>`` after
    ``t<i - width>``), answered in the shape of the recorded DAG ``tutorial``: its details,
    its tasks (each a copy of ``print_date``'s), one earlier successful run (its newest
    recorded one) whose task instances (each a copy of ``print_date``'s) took `seconds`
    each; with `requests`, each task's ``executor_config`` has a pod override asking for
    them. Its id and its answers, for :class:`AirflowExecutor`."""
    recorded, dag = session("tutorial"), f"layered_{tasks}"
    answers = {k: v for k, v in recorded.items() if "/dags/" not in k}
    base = "GET /api/v2/dags/tutorial"
    details = _renamed(recorded[f"{base}/details"], "tutorial", dag)
    answers[f"GET /api/v2/dags/{dag}/details"] = details
    model = _renamed(recorded[f"{base}/tasks"]["body"]["tasks"][0], "tutorial", dag)
    names = [f"t{i}" for i in range(tasks)]
    listed = [
        {
            **model,
            "task_id": n,
            "task_display_name": n,
            "downstream_task_ids": names[i + width :][:1],
        }
        for i, n in enumerate(names)
    ]
    answers[f"GET /api/v2/dags/{dag}/tasks"] = {
        "status": 200,
        "body": {"tasks": listed, "total_entries": tasks},
    }
    runs_key = next(k for k in recorded if "tutorial/dagRuns?" in k)
    run = _renamed(recorded[runs_key]["body"]["dag_runs"][0], "tutorial", dag)
    run.update(state="success")
    answers[runs_key.replace("/tutorial/", f"/{dag}/")] = {
        "status": 200,
        "body": {"dag_runs": [run], "total_entries": 1},
    }
    old = recorded[runs_key]["body"]["dag_runs"][0]["dag_run_id"]
    first_page = f"{_path('tutorial', old)}/taskInstances?limit={PAGE}&offset=0"
    (ti,) = [
        t for t in recorded[first_page]["body"]["task_instances"] if t["task_id"] == "print_date"
    ]
    ti = _renamed(ti, "tutorial", dag)
    instances = [
        {**ti, "task_id": n, "task_display_name": n, "id": f"{ti['id'][:-8]}{i:08x}"}
        for i, n in enumerate(names)
    ]
    config = "{}" if requests is None else override(container(requests=dict(requests)))
    for one in instances:
        one.update(state="success", duration=seconds, executor_config=config)
    answers.update(_pages(_path(dag, run["dag_run_id"]), instances))
    return dag, answers


def safe_label(value: str) -> str:
    """A label value as Airflow's ``make_safe_label_value`` sanitises it."""
    safe = re.sub(r"^[^a-z0-9A-Z]*|[^a-zA-Z0-9_\-\.]|[^a-z0-9A-Z]*$", "", value)
    if len(safe) > 63 or safe != value:
        digest = hashlib.md5(value.encode()).hexdigest()[:9]
        safe = f"{safe[: 63 - len(digest) - 1]}-{digest}"
    return safe


class AirflowExecutor:
    """Runs DAG runs of the DAG `dag` (a context manager: from enter to exit; `url` its REST
    API's), each task's pod `durations[task]` simulated seconds long: the recorded DAG of
    that id, or the one `answers` are of (:func:`layered`)."""

    def __init__(
        self,
        api: ApiServer,
        dag: str,
        durations: Mapping[str, float],
        *,
        queued_timeout: float,
        answers: Mapping[str, Any] | None = None,
    ) -> None:
        self.api, self.emulator, self.dag = api, api.emulator, dag
        self.durations, self.queued_timeout = dict(durations), queued_timeout
        self.answers: dict[str, Any] = dict(answers) if answers is not None else session(dag)
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
        path = _path(dag, recorded[0]["dag_run_id"])
        self.model_instances: list[dict[str, Any]] = []
        for offset in itertools.count(0, PAGE):
            page = self.answers.get(f"{path}/taskInstances?limit={PAGE}&offset={offset}")
            if page is None:
                break
            self.model_instances += page["body"]["task_instances"]
        self.position = {ti["task_id"]: i for i, ti in enumerate(self.model_instances)}
        """Each task's place among the run's task instances (which page holds it)."""
        tasks = self.answers[f"GET /api/v2/dags/{dag}/tasks"]["body"]["tasks"]
        self.upstream: dict[str, set[str]] = {t["task_id"]: set() for t in tasks}
        self.downstream: dict[str, list[str]] = {
            t["task_id"]: list(t.get("downstream_task_ids") or ()) for t in tasks
        }
        for t in tasks:
            for down in t.get("downstream_task_ids") or ():
                self.upstream[down].add(t["task_id"])
        (self.template,) = json.loads((DATA / "worker-pods.json").read_text())[:1]
        self.runs: dict[tuple[str, str], dict[str, Any]] = {}
        """(namespace, run id) -> the run as Airflow answers for it."""
        self.instances: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        """(namespace, run id) -> task id -> its task instance."""
        self.unfinished: Counter[tuple[str, str]] = Counter()
        """(namespace, run id) -> its task instances not succeeded yet."""
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

    def _publish(self, key: tuple[str, str], tasks: Iterable[str] | None = None) -> None:
        """Answer for the run as it is now: the run, and the pages of its task instances
        that hold `tasks` (None: all). Each answer is replaced whole (the server's threads
        read them); a task instance changes only at its top level (`dict.update`), so a
        shallow copy of it is a snapshot."""
        path = _path(self.dag, key[1])
        self.answers[path] = {"status": 200, "body": copy.deepcopy(self.runs[key])}
        instances = list(self.instances[key].values())
        pages = _pages(path, [dict(ti) for ti in instances]) if tasks is None else {}
        for offset in {self.position[t] // PAGE * PAGE for t in tasks or ()}:
            chunk = [dict(ti) for ti in instances[offset : offset + PAGE]]
            page = {"task_instances": chunk, "total_entries": len(instances)}
            pages[f"{path}/taskInstances?limit={PAGE}&offset={offset}"] = {
                "status": 200,
                "body": page,
            }
        self.answers.update(pages)

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
        self.unfinished[key] = len(self.instances[key])
        self._schedule(key, list(self.instances[key]))
        self._publish(key)

    def _schedule(self, key: tuple[str, str], candidates: list[str]) -> list[str]:
        """Queue those of `candidates` whose upstream tasks succeeded; end the run once all
        did. The tasks queued."""
        tis, queued = self.instances[key], []
        for task in candidates:
            ti = tis[task]
            if ti["state"] is None and all(
                tis[u]["state"] == "success" for u in self.upstream[task]
            ):
                ti.update(state="queued", try_number=1, queued_when=_stamp(time.time()))
                self.timeline.append((time.monotonic(), (*key, task), "queued"))
                self._create_pod(key, task)
                queued.append(task)
        if not self.unfinished[key]:
            self.runs[key].update(state="success", end_date=_stamp(time.time()))
            self.ended[key] = time.monotonic()
        return queued

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
        overridden = pod_override_spec(self.instances[key][task].get("executor_config")) or {}
        for sized in overridden.get("containers") or ():
            for target in pod["spec"]["containers"]:
                if target["name"] == sized.get("name") and sized.get("resources"):
                    resources = {k: v for k, v in sized["resources"].items() if v is not None}
                    target["resources"] = copy.deepcopy(resources)
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
            self._publish(key, [pod.task_id])
        elif pod.phase == "Succeeded" and ti["state"] in ("queued", "running"):
            started = ti.get("start_date") or _stamp(now)
            ti.update(state="success", end_date=_stamp(now), start_date=started)
            self.unfinished[key] -= 1
            self.timeline.append((time.monotonic(), (*key, pod.task_id), "success"))
            self.emulator.delete(PODS, pod.namespace, pod.name)
            queued = self._schedule(key, self.downstream[pod.task_id])
            self._publish(key, [pod.task_id, *queued])

    # -- what a test reads ---------------------------------------------------------------------

    def done(self, namespace: str, run_id: str) -> bool:
        return (namespace, run_id) in self.ended

    def state(self, namespace: str, run_id: str) -> str:
        return str(self.api.call(lambda: self.runs[namespace, run_id]["state"]))

    def jct(self, namespace: str, run_id: str, speed: float) -> float:
        """The run's time from its trigger to its end, in simulated seconds."""
        key = (namespace, run_id)
        return (self.ended[key] - self.started[key]) * speed
