"""Mixed workflows on one resource pool over three nodes (issue 52, "The operator e2e on
nodes"), shared by tests/test_e2e_nodes.py and benchmarks/e2e_nodes.py.

    with ApiServer(directory) as api:   # serving the project's CRDs and Argo's Workflow CRD
        outcome = run(api, namespace, workflows=60, seed=0)

* :func:`mixed_workflows`: DagWorkflows (two in three) whose stages' pod templates request
  from 500m CPU / 1 GiB to 4 CPU / 8 GiB (one size memory-heavy), in chains and diamonds,
  and Argo Workflows (one in three: a map-reduce loop and a diamond) whose templates
  request the same sizes; tasks of 40 to 120 simulated seconds, drawn from `seed`;
* :func:`run`: three Nodes of 8 CPU and 32 GiB on the test API server (its kube-scheduler
  binds pods by their requests, tests/k8s/scheduler.py), the simulated kubelet, the stand-in
  for Argo's controller, and the real operator (``--argo``, ``fair``) with one resource
  pool: the default pool following the nodes (``--pool-nodes ''``: their allocatable, each
  pod released where it fits a node and pinned there), or of a fixed capacity equal to
  their allocatable (``--pool-resources``); every workflow created at once;
* :class:`ClusterMonitor`: every node, pod and workflow write as it happens (an emulator
  subscriber, so no state is missed between two polls), whence the :class:`Outcome`.

On an accelerated wall clock, as the end-to-end tests run (tests/e2e.py, `SPEED`; `run`'s
`speed`): the utilisation is measured in wall time, so it counts the operator's reaction
time (a pod's end seen, the next one released) as idle, as a cluster would; the faster the
clock, the more that time weighs against the tasks' (a task of 40 s lasts 2 wall seconds at
20 times the wall's pace).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import kmock

from idlegate.api.labels import (
    ANNOTATION_ATTEMPT,
    GATE,
    HOSTNAME,
    LABEL_STAGE,
    LABEL_TASK,
    LABEL_WORKFLOW,
)
from idlegate.sim.argo import DURATION_ANNOTATION
from idlegate.sim.resources import ResourceVector, pod_request
from tests.argo_workflows import argo
from tests.clocks import ScaledClock
from tests.e2e import DWF, HANG_SECONDS, SPEED, running_operator, stage, wait, workflow
from tests.k8s.apiserver import NODES, PODS
from tests.k8s.argo_controller import WORKFLOWS, ArgoController
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet
from tests.k8s.scheduler import ONE_POD, node

NODE_COUNT, NODE_CPU, NODE_MEMORY = 3, "8", "32Gi"
"""The cluster of issue 52's e2e: 3 nodes of 8 CPU and 32 GiB."""
POOL_RESOURCES = "cpu=24,memory=96Gi"
"""The pool: the three nodes' allocatable."""
POOL_PODS = 330
"""Executors of the pool: the nodes' pod slots (110 each), never the binding limit."""
SIZES: dict[str, tuple[str, str]] = {
    "xs": ("500m", "1Gi"),
    "s": ("1", "2Gi"),
    "m": ("2", "4Gi"),
    "l": ("4", "8Gi"),
    "mem": ("1", "12Gi"),
}
"""A task's requests (cpu, memory) by size."""
SECONDS = (40, 120)
"""A task's run time, in simulated seconds."""
ENDED = ("Succeeded", "Failed", "Error")


# -- the workflows -------------------------------------------------------------------------------


def requests(size: str) -> dict[str, Any]:
    cpu, memory = SIZES[size]
    return {"requests": {"cpu": cpu, "memory": memory}}


def sized_stage(
    rng: random.Random, name: str, deps: tuple[str, ...] = (), retries: int = 0
) -> dict[str, Any]:
    """A DagWorkflow stage of 1 to 4 tasks whose pod template requests a drawn size, each
    task retried up to `retries` times."""
    container = {"name": "task", "image": "busybox", "resources": requests(rng.choice([*SIZES]))}
    template = {"spec": {"containers": [container]}}
    more = {"backoffLimit": retries} if retries else {}
    return stage(name, rng.randint(1, 4), rng.randint(*SECONDS), deps, template=template, **more)


def sized_template(rng: random.Random, name: str) -> dict[str, Any]:
    """An Argo pod template of a drawn run time (its duration annotation) and size."""
    return {
        "name": name,
        "metadata": {"annotations": {DURATION_ANNOTATION: str(rng.randint(*SECONDS))}},
        "container": {"image": "busybox", "resources": requests(rng.choice([*SIZES]))},
    }


def dag_workflow(rng: random.Random, name: str, retries: int = 0) -> dict[str, Any]:
    """A chain of 2 or 3 stages, or a diamond (each task retried up to `retries` times)."""
    if rng.random() < 0.5:
        names = ["a", "b", "c"][: rng.randint(2, 3)]
        stages = [sized_stage(rng, n, tuple(names[:i][-1:]), retries) for i, n in enumerate(names)]
    else:
        stages = [
            sized_stage(rng, "a", (), retries),
            sized_stage(rng, "b", ("a",), retries),
            sized_stage(rng, "c", ("a",), retries),
            sized_stage(rng, "d", ("b", "c"), retries),
        ]
    return workflow(name, *stages)


def argo_workflow(rng: random.Random, name: str) -> dict[str, Any]:
    """split, 2 to 5 map pods (``withItems``), reduce; or a diamond: each task its size."""
    if rng.random() < 0.5:
        tasks = [
            {"name": "split", "template": "split"},
            {
                "name": "map",
                "template": "map",
                "dependencies": ["split"],
                "withItems": list(range(rng.randint(2, 5))),
            },
            {"name": "reduce", "template": "reduce", "dependencies": ["map"]},
        ]
    else:
        tasks = [
            {"name": "a", "template": "a"},
            {"name": "b", "template": "b", "dependencies": ["a"]},
            {"name": "c", "template": "c", "dependencies": ["a"]},
            {"name": "d", "template": "d", "dependencies": ["b", "c"]},
        ]
    templates = [sized_template(rng, t["template"]) for t in tasks]
    return argo(name, {"dag": {"tasks": tasks}}, *templates)


def mixed_workflows(
    count: int, seed: int, retries: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(DagWorkflows, Argo Workflows): `count` in all, one in three an Argo Workflow; the
    DagWorkflows' tasks retried up to `retries` times."""
    rng = random.Random(seed)
    dags, argos = [], []
    for i in range(count):
        if i % 3 == 2:
            argos.append(argo_workflow(rng, f"argo-{i}"))
        else:
            dags.append(dag_workflow(rng, f"dwf-{i}", retries))
    return dags, argos


def first_tries_fail(pod: Mapping[str, Any]) -> int | None:
    """The kubelet's `failure`: the first attempt of task 0 of stages a and b of every
    DagWorkflow exits 1 (so each is retried once); every other pod succeeds."""
    meta = pod.get("metadata") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    first = notes.get(ANNOTATION_ATTEMPT) == "0" and labels.get(LABEL_TASK) == "0"
    return 1 if first and labels.get(LABEL_STAGE) in ("a", "b") else None


# -- what happened -------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """What a run did: the figures issue 52's e2e asks for, and what explains them."""

    workflows: dict[str, str]
    """Each workflow's final phase (DagWorkflows' and Argo's)."""
    pods: int
    twice: list[Any]
    """Pod names created twice, and DagWorkflow tasks (workflow, stage, task, attempt)
    with two pods."""
    overcommits: list[str]
    """Every moment a node held pods requesting more than its allocatable."""
    peak_cpu: dict[str, float]
    """Per node, the most CPU its pods requested at once, as a share of its allocatable."""
    released: int
    """Pods released by idlegate (their gate removed)."""
    unschedulable: list[str]
    """Pods the kube-scheduler said fit no node (PodScheduled False, Unschedulable)."""
    unschedulable_released: list[str]
    """Of those, the pods idlegate released."""
    waiting_seconds: float
    """Wall seconds during which some pod waited to run: gated, or released and unbound."""
    utilisation: float
    """The CPU the nodes' pods requested over their allocatable, averaged over those
    seconds."""
    seconds: float
    """Wall seconds from the first workflow created to the last one ended."""
    mean_jct: float
    """The DagWorkflows' mean JCT (their status, in simulated seconds)."""
    speed: float = SPEED
    """Simulated seconds per wall second."""
    retries: list[tuple[str, bool]] = dataclasses.field(default_factory=list)
    """Each DagWorkflow pod of a retry (attempt > 0), and whether it was pinned to a node
    (a ``kubernetes.io/hostname`` nodeSelector) when created."""

    @property
    def succeeded(self) -> int:
        return sum(phase == "Succeeded" for phase in self.workflows.values())

    def lines(self) -> list[str]:
        peaks = ", ".join(f"{n} {p:.0%}" for n, p in sorted(self.peak_cpu.items()))
        return [
            f"workflows succeeded        {self.succeeded}/{len(self.workflows)}",
            f"pods created               {self.pods} (twice: {len(self.twice)})",
            f"released by idlegate       {self.released}",
            f"requests over allocatable  {len(self.overcommits)} times",
            f"peak CPU requested         {peaks}",
            f"pods unschedulable         {len(self.unschedulable)} "
            f"(released by idlegate: {len(self.unschedulable_released)})",
            f"CPU utilisation waiting    {self.utilisation:.1%} over {self.waiting_seconds:.1f} s",
            f"run                        {self.seconds:.1f} s wall "
            f"({self.seconds * self.speed:.0f} s simulated at {self.speed:g} times the wall's pace)",
            f"mean JCT of DagWorkflows   {self.mean_jct:.1f} s simulated",
            f"retries pinned to a node   {sum(p for _, p in self.retries)}/{len(self.retries)}",
        ]


class ClusterMonitor:
    """Every Node, pod and workflow write of `namespace`'s run, as it happens (an emulator
    subscriber, in the API server's loop): what each node's bound pods request, against its
    allocatable, at every change; which pods waited and for what; the phases of
    `expected` workflows (:attr:`finished` is set once all have ended)."""

    def __init__(self, api: ApiServer, namespace: str, expected: set[str]) -> None:
        self.api, self.namespace, self.expected = api, namespace, set(expected)
        self.allocatable: dict[str, ResourceVector] = {}
        self.used: dict[str, ResourceVector] = {}
        self.peak: Counter[str] = Counter()  # node -> most CPU (milli) requested at once
        self.on_node: dict[str, tuple[str, ResourceVector]] = {}  # pod -> (node, request)
        self.overcommits: list[str] = []
        self.created: Counter[str] = Counter()
        self.tasks: Counter[tuple[str, str, str, str]] = Counter()
        self.retries: dict[str, bool] = {}
        self.gated: set[str] = set()
        self.released: set[str] = set()
        self.unschedulable: set[str] = set()
        self.waiting: set[str] = set()
        self.phases: dict[str, str] = {}
        self.jcts: dict[str, float] = {}
        self.pods_ended: dict[str, float] = {}  # DagWorkflow -> when its last pod ended
        self._ended_pods: set[str] = set()
        self.succeeded: dict[str, float] = {}  # workflow -> when its status first said so
        self.waited = 0.0  # wall seconds with some pod waiting
        self.busy = 0.0  # the integral of the CPU share requested over them
        self.started: float | None = None
        self.ended: float | None = None
        # running sums (allocatable CPU, CPU requested, workflows ended): each write costs
        # the same at 3 nodes and at a thousand (benchmarks/scale.py)
        self._cpu_total = 0
        self._cpu_used = 0
        self._done: set[str] = set()
        self._last = time.monotonic()
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._unsubscribe = api.call(self._start)

    def _start(self) -> Any:
        """Read the nodes there are and subscribe, in one step of the API server's loop."""
        for obj in self.api.emulator.list(NODES):
            self._on_node(obj)
        return self.api.emulator.subscribe(self._on_event)

    def _on_node(self, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        name = obj["metadata"]["name"]
        before = self.allocatable.get(name, ResourceVector())
        self.allocatable[name] = ResourceVector.of(status.get("allocatable"))
        self._cpu_total += self.allocatable[name]["cpu"] - before["cpu"]

    def close(self) -> None:
        self.api.call(self._unsubscribe)

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        with self._lock:
            self._tick()
            if res == NODES:
                self._on_node(obj)
            elif obj["metadata"].get("namespace") != self.namespace:
                return
            elif res == PODS:
                self._on_pod(etype, obj)
            elif res.plural in ("dagworkflows", WORKFLOWS.plural):
                self._on_workflow(etype, obj)

    def _tick(self) -> None:
        """Account the time since the last write at the state it left."""
        now = time.monotonic()
        if self.waiting and self._cpu_total:
            self.waited += now - self._last
            self.busy += (now - self._last) * self._cpu_used / self._cpu_total
        self._last = now

    def _on_pod(self, etype: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        status = pod.get("status") or {}
        name, labels = meta["name"], meta.get("labels") or {}
        if etype == "ADDED":
            self.created[name] += 1
            if LABEL_WORKFLOW in labels:
                attempt = (meta.get("annotations") or {}).get(ANNOTATION_ATTEMPT, "0")
                task = (
                    labels[LABEL_WORKFLOW],
                    labels.get(LABEL_STAGE, ""),
                    labels.get(LABEL_TASK, ""),
                    attempt,
                )
                self.tasks[task] += 1
                if attempt != "0":
                    self.retries[name] = HOSTNAME in (spec.get("nodeSelector") or {})
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        live = etype != "DELETED" and status.get("phase") not in ENDED
        if not live and LABEL_WORKFLOW in labels and name not in self._ended_pods:
            self._ended_pods.add(name)
            self.pods_ended[labels[LABEL_WORKFLOW]] = self._last
        if GATE in gates:
            self.gated.add(name)
        elif name in self.gated and etype != "DELETED":
            self.released.add(name)
        scheduled = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {}
        )
        if scheduled.get("reason") == "Unschedulable":
            self.unschedulable.add(name)
        bound = spec.get("nodeName")
        if live and (gates or not bound):
            self.waiting.add(name)
        else:
            self.waiting.discard(name)
        self._place(name, bound if live else None, spec)

    def _place(self, name: str, bound: str | None, spec: dict[str, Any]) -> None:
        """Count the pod on `bound` (None: on no node), and check that node."""
        before = self.on_node.pop(name, None)
        if before is not None:
            self.used[before[0]] = self.used[before[0]] - before[1]
            self._cpu_used -= before[1]["cpu"]
        if bound is None:
            return
        request = before[1] if before is not None else pod_request(spec) + ONE_POD
        self.on_node[name] = (bound, request)
        self._cpu_used += request["cpu"]
        used = self.used.get(bound, ResourceVector()) + request
        self.used[bound] = used
        self.peak[bound] = max(self.peak[bound], used["cpu"])
        over = used.too_large(self.allocatable.get(bound, ResourceVector()))
        if over:
            self.overcommits.append(f"{bound}: {used.format()} ({', '.join(over)} over)")

    def _on_workflow(self, etype: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        if name not in self.expected:
            return
        if etype == "ADDED" and self.started is None:
            self.started = time.monotonic()
        phase = status.get("phase") or ""
        self.phases[name] = phase
        if status.get("jctSeconds") is not None:
            self.jcts[name] = float(status["jctSeconds"])
        if phase in ENDED:
            self._done.add(name)
        if phase == "Succeeded":
            self.succeeded.setdefault(name, self._last)
        if len(self._done) == len(self.expected) and not self.finished.is_set():
            self.ended = time.monotonic()
            self.finished.set()

    def status_lags(self) -> list[float]:
        """Per DagWorkflow succeeded, the wall seconds from its last pod ending to its
        status saying Succeeded: how stale ``kubectl get dagworkflows`` was."""
        with self._lock:
            ended = self.pods_ended
            return sorted(t - ended[n] for n, t in self.succeeded.items() if n in ended)

    def outcome(self) -> Outcome:
        with self._lock:
            alloc = {n: a["cpu"] for n, a in self.allocatable.items()}
            twice = [n for n, k in self.created.items() if k > 1]
            twice += [t for t, k in self.tasks.items() if k > 1]
            return Outcome(
                workflows=dict(self.phases),
                pods=len(self.created),
                twice=twice,
                overcommits=list(self.overcommits),
                peak_cpu={n: self.peak[n] / alloc[n] for n in alloc if alloc[n]},
                released=len(self.released),
                unschedulable=sorted(self.unschedulable),
                unschedulable_released=sorted(self.unschedulable & self.released),
                waiting_seconds=self.waited,
                utilisation=self.busy / self.waited if self.waited else 0.0,
                seconds=(self.ended or time.monotonic()) - (self.started or time.monotonic()),
                mean_jct=sum(self.jcts.values()) / len(self.jcts) if self.jcts else 0.0,
                retries=sorted(self.retries.items()),
            )


# -- the run -------------------------------------------------------------------------------------


POOLS: dict[str, dict[str, Any]] = {
    "nodes": {"pool_nodes": ""},
    "fixed": {"pool_resources": POOL_RESOURCES},
}
"""The default pool's settings: following every node (``--pool-nodes ''``), or a fixed
capacity equal to their allocatable (``--pool-resources``)."""


def run(
    api: ApiServer,
    namespace: str,
    *,
    workflows: int,
    seed: int = 0,
    pool: str = "nodes",
    speed: float = SPEED,
    failing: bool = False,
) -> Outcome:
    """Run `workflows` mixed workflows on the three nodes (the module docstring), the pool
    one of `POOLS`, the operator's clock and the kubelet at `speed` times the wall's pace;
    `failing`: with `first_tries_fail`'s failures, each retried once."""
    for i in range(NODE_COUNT):
        if api.get(NODES, None, f"node-{i}") is None:
            api.create(NODES, node(f"node-{i}", cpu=NODE_CPU, memory=NODE_MEMORY))
    dags, argos = mixed_workflows(workflows, seed, retries=1 if failing else 0)
    names = {w["metadata"]["name"] for w in [*dags, *argos]}
    monitor = ClusterMonitor(api, namespace, names)
    try:
        with (
            SimKubelet(
                api,
                namespace,
                time_factor=1 / speed,
                failure=first_tries_fail if failing else None,
            ),
            ArgoController(api, namespace),
            running_operator(
                api,
                namespace,
                pool=POOL_PODS,
                clock=ScaledClock(speed),
                policy="fair",
                argo=True,
                **POOLS[pool],
            ),
        ):
            for body in dags:
                api.create(DWF, body, namespace)
            for body in argos:
                api.create(WORKFLOWS, body, namespace)
            wait(monitor.finished.is_set, HANG_SECONDS * 4, "every workflow to end")
    finally:
        monitor.close()
    return dataclasses.replace(monitor.outcome(), speed=speed)
