"""A pods-only gate over a cluster of resources: idlegate's pods-only pool, on a cluster.

What a user gets who runs idlegate with ``--pool-size N`` and no pool resources on a
cluster whose pods request CPU, memory and GPUs (`idlegate.sim.protocol.PodsGate`; the
scheduler spec ``pods-gate:BASE``). Two levels, driven by the simulator's engine through the cluster's round hooks
(`GatedCluster.close_round`, `GatedCluster.report`):

* The *gate* is the pods-only pool of N executors (`GatedCluster`, a `Cluster` of N
  executors and no resources): the scheduler sees it and nothing else, and decides on it
  as it does on any pods-only pool. Each task it launches is a pod *released* to the
  cluster below, and the pod holds its executor from its release to its end, as
  idlegate counts a released pod whether it runs or pends.
* The *cluster* (`NodePool`) is the capacity of `--resources`, with `-k` as its
  `pods`. A released pod starts, and its task's run time begins, only when its request
  (its stage's demand, and one pod) fits what is free. One that does not fit *pends*.
* Pending pods start in the kube-scheduler's order: priority (all equal here), then
  release time, older first. At every event time, after the gate's decision round, each
  pending pod in that order starts if it fits and is passed over if it does not (the
  kube-scheduler does not hold its queue for a pod that does not fit). An executor that
  goes on with its stage releases the stage's next pod, which queues behind the older
  ones; the pod that ended gives its request back first.
* The cluster is its nodes (``--nodes``: `Workload.nodes`), a pod starting on the first
  node it fits; without nodes it is one bin, the sum of their allocatable. (A resource
  pool packs instead, `idlegate.sim.pool.packed`; the kube-scheduler's default scoring
  spreads. First fit is this baseline's simplification, docs/resources.md.)
* A stage that could never fit the cluster is refused on arrival (DemandTooLargeError),
  as on a resource pool; a gang's pods are placed one by one, as the kube-scheduler
  without a coscheduling plugin places them.
* `gate_size` sizes the gate as a user would: the cluster's CPUs over the workload's
  mean CPU request per pod, rounded.

Forks (planners) and replays of the gate's scheduler see the gate alone: a pods-only
pool, which is what such a scheduler knows of the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from idlegate.errors import DemandTooLargeError, IdlegateError
from idlegate.sim.cluster import Cluster, TraceSink
from idlegate.sim.dag import Dag
from idlegate.sim.nodeset import NodeSet
from idlegate.sim.pool import nodes_text, nodes_total
from idlegate.sim.protocol import Job, Launch, PodsGate, Stage
from idlegate.sim.resources import MILLI, ResourceVector

if TYPE_CHECKING:
    from idlegate.sim.runs import SimResult, Workload


def gate_size(workload: Workload) -> int:
    """The pods-only pool a user would size for `workload`'s cluster: its CPUs over the
    mean CPU request of the workload's pods (every task one pod), rounded, at least 1."""
    cpu = workload.resources["cpu"] if workload.resources is not None else 0
    if not cpu:
        raise IdlegateError(
            "pods-gate sizes its pool from the cluster's CPUs; give them in --resources "
            "(e.g. cpu=24,memory=96Gi), or the pool's size as pods-gate?pods=N:BASE"
        )
    pods = requested = 0
    for arrival in workload.jobs:
        dag = arrival.dag
        pods += sum(dag.tasks)
        if dag.demands:
            requested += sum(n * d["cpu"] for n, d in zip(dag.tasks, dag.demands, strict=True))
    if not requested:
        raise IdlegateError(
            f"no task of workload {workload.name!r} requests CPU, so no pool size follows "
            "from the cluster's CPUs; give it as pods-gate?pods=N:BASE"
        )
    return max(1, round(cpu * pods / requested))


class NodePool:
    """The cluster below the gate: its capacity, what is free, the pods that pend, and
    the resource-seconds the running pods held (the module docstring)."""

    def __init__(self, capacity: ResourceVector, nodes: Sequence[ResourceVector] = ()) -> None:
        self.capacity = capacity
        """The cluster's capacity, `pods` included (the sum of `nodes`, if given)."""
        # (pods last: the nodes' index counts one pod a task there)
        self.names: tuple[str, ...] = (*(n for n in capacity if n != "pods"), "pods")
        each = [[node[n] for n in self.names] for node in (nodes or [capacity])]
        self.free = NodeSet(each, each)
        """Each node's free milli-units of each of `names`, in order (one bin: one node),
        indexed by shape (`first_fit`)."""
        self.nodes = tuple(nodes) or (capacity,)
        """The nodes' capacities (one bin: the cluster's)."""
        self._kinds = tuple(dict.fromkeys(self.nodes))
        """Each distinct node capacity once (`check`'s: nodes are many, kinds few)."""
        self._nodes_text = nodes_text(nodes) if nodes else capacity.format()
        self.pending: list[tuple[Launch, float]] = []
        """Released pods not started yet, with their release time, oldest first."""
        self.pended = 0
        """Pods that started later than they were released."""
        self.pending_seconds = 0.0
        """Seconds pods spent released but not started (of those that started)."""
        self._running: dict[int, tuple[tuple[int, ...], float, int]] = {}
        self._held = [0.0] * len(self.names)
        self._amounts: dict[int, tuple[tuple[int, ...], ...]] = {}
        self._dags: list[Dag] = []  # (keeps the ids of `_amounts` unique)

    def amounts(self, stage: Stage) -> tuple[int, ...]:
        """A pod of `stage`'s request, in milli-units of each of `names` (one pod)."""
        dag = stage.job.dag
        per_stage = self._amounts.get(id(dag))
        if per_stage is None:
            pod = ResourceVector({"pods": MILLI})
            per_stage = tuple(
                tuple((d.restricted(self.names) + pod)[n] for n in self.names)
                for d in (dag.demands or (ResourceVector(),) * dag.num_stages)
            )
            self._amounts[id(dag)] = per_stage
            self._dags.append(dag)
        return per_stage[stage.index]

    def check(self, dag: Dag, name: str | None) -> None:
        """DemandTooLargeError if a pod of a stage of `dag` could never fit a node."""
        where = "the cluster has (its" if len(self.nodes) == 1 else "any node has (each node's"
        for i, demand in enumerate(dag.demands):
            need = demand.restricted(self.names)
            if not any(need.fits(node) for node in self._kinds):
                raise DemandTooLargeError(
                    f"stage {dag.names[i]!r} of {name or 'the job'} requests {need.format()} "
                    f"a pod, more than {where} resources: {self._nodes_text}), so its pods "
                    "would pend for ever; lower the stage's requests or give the cluster more",
                    need,
                )

    def release(self, launches: list[Launch], now: float) -> None:
        """Pods released at `now`, in release order."""
        self.pending += [(launch, now) for launch in launches]

    def place(self, now: float) -> list[Launch]:
        """Start the pending pods that fit, oldest first, each on the first node it fits
        (the module docstring)."""
        if not self.pending:
            return []
        nodes, running = self.free, self._running
        placed: list[Launch] = []
        waiting: list[tuple[Launch, float]] = []
        for launch, since in self.pending:
            need = self.amounts(launch.stage)
            at = nodes.first_fit(need)
            if at is not None:
                nodes.move(at, need[:-1], -1, need[-1])  # (its request, and its pod)
                running[launch.executor] = (need, now, at)
                placed.append(launch)
                if since < now:
                    self.pended += 1
                    self.pending_seconds += now - since
            else:
                waiting.append((launch, since))
        self.pending = waiting
        return placed

    def finish(self, executor: int, now: float) -> None:
        """The pod on `executor` ended: its request is free again."""
        need, since, at = self._running.pop(executor)
        self.free.move(at, need[:-1], 1, need[-1])
        held = self._held
        for i, n in enumerate(need):
            held[i] += n * (now - since)

    def resource_seconds(self, now: float) -> dict[str, float]:
        """Unit-seconds of each resource but pods that running pods held up to `now`."""
        held = list(self._held)
        for need, since, _ in self._running.values():
            for i, n in enumerate(need):
                held[i] += n * (now - since)
        return {n: h / MILLI for n, h in zip(self.names, held, strict=True) if n != "pods"}


class GatedCluster(Cluster):
    """The gate (a pods-only `Cluster` of `pods` executors) over a `NodePool` of
    `cluster` (the module docstring). Only the simulator drives it."""

    def __init__(
        self,
        pods: int,
        cluster: ResourceVector,
        trace: TraceSink | None = None,
        *,
        moving_delay: float = 0.0,
        nodes: Sequence[ResourceVector] = (),
    ) -> None:
        self._due = self._wake = False
        super().__init__(pods, trace, moving_delay=moving_delay)
        self.nodes = NodePool(cluster, nodes)

    @property
    def needs_schedule(self) -> bool:
        """A decision round is due, or a pod ended, so pending pods may start."""
        return self._due or self._wake

    @needs_schedule.setter
    def needs_schedule(self, value: bool) -> None:
        self._due = value
        if not value:
            self._wake = False

    @property
    def round_due(self) -> bool:
        """A scheduling event of the gate's happened (not only a pod's end)."""
        return self._due

    def add_job(
        self,
        dag: Dag,
        now: float,
        name: str | None = None,
        payload: Any = None,
        *,
        arrival: float | None = None,
    ) -> Job:
        self.nodes.check(dag, name)
        return super().add_job(dag, now, name, payload, arrival=arrival)

    def task_finished(self, executor: int, now: float) -> Stage | None:
        """The pod on `executor` ended; an executor going on with its stage releases the
        stage's next pod (never started here: None, `close_round` starts what fits)."""
        stage = super().task_finished(executor, now)
        nodes = self.nodes
        nodes.finish(executor, now)
        if stage is not None:
            nodes.release([Launch(executor, stage, False, False)], now)
        self._wake = True
        return None

    def close_round(self, launches: list[Launch], now: float) -> list[Launch]:
        """The round's launches are pods released to the cluster below; what starts now is
        the pending pods that fit, in the kube-scheduler's order."""
        nodes = self.nodes
        nodes.release(launches, now)
        return nodes.place(now)

    def report(self, result: SimResult) -> SimResult:
        """The run's figures as the cluster below saw them."""
        nodes, now = self.nodes, self.now
        # the gate's executors are busy from a pod's release; its task runs from its start
        waiting = nodes.pending_seconds + sum(now - since for _, since in nodes.pending)
        return replace(
            result,
            busy_seconds=result.busy_seconds - waiting,
            capacity=nodes.capacity,
            resource_seconds=nodes.resource_seconds(now),
            pending=(nodes.pended, nodes.pending_seconds),
        )


def gated(
    workload: Workload,
    gate: PodsGate,
    trace: TraceSink | None,
    moving_delay: float,
    num_executors: int,
) -> GatedCluster:
    """The gate of `gate` over `workload`'s cluster (`num_executors` its pods)."""
    if workload.resources is None:
        raise IdlegateError(
            f"{gate.name} runs a pods-only pool on a cluster of resources; give the "
            "cluster's with --resources (e.g. cpu=24,memory=96Gi,nvidia.com/gpu=2)"
        )
    pods = gate.pods if gate.pods is not None else gate_size(workload)
    cluster = ResourceVector({**workload.resources, "pods": num_executors * MILLI})
    if workload.nodes:
        cluster = nodes_total(workload.nodes)
    return GatedCluster(pods, cluster, trace, moving_delay=moving_delay, nodes=workload.nodes)
