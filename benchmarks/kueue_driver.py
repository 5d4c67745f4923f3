"""What benchmarks/kueue_vs_idlegate.py runs beside a controller: the arrivals' submission,
and a watch of the task pods that says when each stage has ended.

* :class:`Tracker` watches every pod labelled ``idlegate.io/workflow`` on the plane and
  counts, per stage, the pods that succeeded; a stage whose tasks have all succeeded is
  *done* (its callback is called once), and the run is over when every stage of the plan
  is;
* :func:`submit` creates each arrival's object at its time (the scenario's clock over the
  wall's `speed`): a DagWorkflow for idlegate, the Jobs of its first stages for Kueue;
* :class:`Driver` is Kueue's DAG engine, since Kueue has none (its issue #74): it creates
  a stage's Job once the tracker says its parents are done, as a workflow engine
  watching pods would.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from benchmarks.kueue_figures import Key, Plan, StageKey
from benchmarks.kueue_scenario import Arrival, job, plan
from idlegate.api.labels import LABEL_STAGE, LABEL_WORKFLOW
from idlegate.controlplane.client import ApiRefusal, Client

WATCH_SECONDS = 5
"""A watch's own end (the tracker's thread then sees whether it is closed)."""


class Tracker:
    """The task pods' ends, from a watch in a thread of its own (the module's docstring):
    `on_done(stage)` is called once for each stage whose tasks all succeeded."""

    def __init__(
        self, client: Client, planned: Plan, on_done: Callable[[StageKey], None] | None = None
    ) -> None:
        self.client = client
        self.plan = planned
        self.on_done = on_done
        self.done: set[StageKey] = set()
        self.over = threading.Event()
        self._succeeded: defaultdict[StageKey, set[str]] = defaultdict(set)
        self._closed = threading.Event()
        self._left = sum(len(stages) for stages in planned.values())
        self._thread = threading.Thread(target=self._watch, name="tracker", daemon=True)
        self._version = self._list()
        self._thread.start()

    def _list(self) -> str:
        listed = self.client.request("GET", "/api/v1/pods", query={"labelSelector": LABEL_WORKFLOW})
        for pod in listed["items"]:
            self._saw(pod)
        return str(listed["metadata"]["resourceVersion"])

    def _watch(self) -> None:
        while not self._closed.is_set():
            query = {
                "watch": "1",
                "labelSelector": LABEL_WORKFLOW,
                "resourceVersion": self._version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(WATCH_SECONDS),
            }
            try:
                for event in self.client.stream("/api/v1/pods", query, WATCH_SECONDS + 30):
                    obj = event["object"]
                    if event["type"] == "ERROR":  # (410 Gone: too old; list again)
                        self._version = self._list()
                        break
                    self._version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self._saw(obj)
            except (ApiRefusal, OSError):
                time.sleep(0.2)  # (the plane stops at the end, or a hiccup: watch again)

    def _saw(self, pod: dict) -> None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        key = (meta["namespace"], labels.get(LABEL_WORKFLOW, ""), labels.get(LABEL_STAGE, ""))
        stages = self.plan.get(key[:2])
        if stages is None or key[2] not in stages or key in self.done:
            return
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            self._succeeded[key].add(meta["name"])
        if len(self._succeeded[key]) >= stages[key[2]][0]:
            self.done.add(key)
            self._left -= 1
            if self.on_done is not None:
                self.on_done(key)
            if self._left == 0:
                self.over.set()

    def wait(self, seconds: float, what: str) -> None:
        """Until every stage of the plan is done; TimeoutError after `seconds` (a hang)."""
        if not self.over.wait(seconds):
            left = self._left
            raise TimeoutError(f"{what}: {left} stages not done after {seconds:g} s")

    def close(self) -> None:
        self._closed.set()
        self._thread.join(WATCH_SECONDS + 35)


def submit(arrivals: Sequence[Arrival], speed: float, create: Callable[[Arrival], None]) -> None:
    """`create` each arrival at its time: its `at` over `speed` wall seconds from now."""
    began = time.monotonic()
    for arrival in arrivals:
        time.sleep(max(0.0, began + arrival.at / speed - time.monotonic()))
        create(arrival)


class Driver:
    """Kueue's DAG engine (the module's docstring): `start` creates an arrival's first
    stages' Jobs; each other stage's Job is created once its parents are done."""

    def __init__(self, client: Client, arrivals: Sequence[Arrival]) -> None:
        self.client = client
        self.arrivals: dict[Key, Arrival] = {(a.namespace, a.name): a for a in arrivals}
        self._created: set[StageKey] = set()
        self._lock = threading.Lock()
        self.tracker = Tracker(client, plan(list(arrivals)), self._stage_done)

    def start(self, arrival: Arrival) -> None:
        for name, _, deps in arrival.shape.stages:
            if not deps:
                self._create(arrival, name)

    def _stage_done(self, done: StageKey) -> None:
        arrival = self.arrivals[done[:2]]
        finished = {s for ns, wf, s in self.tracker.done if (ns, wf) == done[:2]}
        for name, _, deps in arrival.shape.stages:
            if deps and done[2] in deps and set(deps) <= finished:
                self._create(arrival, name)

    def _create(self, arrival: Arrival, name: str) -> None:
        with self._lock:
            key = (arrival.namespace, arrival.name, name)
            if key in self._created:
                return
            self._created.add(key)
        path = f"/apis/batch/v1/namespaces/{arrival.namespace}/jobs"
        self.client.request("POST", path, job(arrival, name))
