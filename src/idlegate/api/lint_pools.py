"""``idlegate lint``: DagWorkflows checked against the ExecutorPool their ``spec.pool`` names,
when that pool is among the linted manifests.

The operator admits such a workflow into its pool and, when a stage could never fit it (a
gang wider than the pool's size, a task asking more than its ``resources``), holds it out
of the pool with ``PoolReady=False``, reason ``PoolTooSmall``, until the pool is resized:
not ``Invalid``, so lint says it as a note (exit 0), with what the operator would say.
A pool lint cannot parse is a problem of its own (`pool_problems`) and checks nothing here;
a pool not among the inputs is the cluster's, unknown offline.

A pool that follows its nodes (``nodeSelector``) may quote only what they count (cpu,
memory, and the extended resources one of them has): given the nodes among the inputs
(``kubectl get nodes -o yaml``), its queues are checked against them by the operator's
own check (`idlegate.api.queueing.quotas_on_nodes`), a problem with its sentence; without
them, a quota of an extended resource is noted as one lint could not check.

Given the operator's ``--forecast-arrivals`` (lint's own flag), a pool without queues that
would inherit ``queues`` is noted as the operator says it (`pool_arrivals`: its forecasts
invent poisson instead, condition ``ForecastArrivalsFallback``), also exit 0.

It also gathers the resources the linted stages request (`InPools.asked`), for the check
that ``--pool-resources`` names one of them, as ``simulate --resources`` does
(`check_pool_requested`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.nodes import Node, counted, read_node
from idlegate.api.pool_spec import (
    ARRIVALS_FALLBACK,
    DEFAULT_POOL,
    ExecutorPoolSpec,
    LabelSelector,
    one_capacity,
    parse_pool_spec,
    pool_arrivals,
)
from idlegate.api.queueing import QUEUE_NOT_FOUND, quotas_on_nodes
from idlegate.errors import IdlegateError
from idlegate.sim.arrival_kinds import Arrivals
from idlegate.sim.queue_files import queue_problem
from idlegate.sim.queues import QUEUE_KEYS, QueueSpec, queue_problems, queues_from
from idlegate.sim.resources import MILLI, ResourceVector, check_requested
from idlegate.sim.spec import WorkflowSpec, parse_workflow

WAITS = "PoolTooSmall"
"""The reason of such a note (the condition's), which also keeps it from the skipped."""
HELD = (WAITS, QUEUE_NOT_FOUND)
"""The reasons of the notes of workflows the operator would hold out of their pool."""
UNCHECKED = "QuotaOnNodes"
"""The reason of the note on a node pool's quota of an extended resource, linted without
its nodes."""
NOTHING_TO_JUDGE = "DecideWithoutStops"
"""The reason of the note on a queue whose ``decide: Forecast`` has no stop to judge."""
OWN = (*HELD, ARRIVALS_FALLBACK, UNCHECKED, NOTHING_TO_JUDGE)
"""The reasons of the notes on idlegate's own objects (none is left to Argo)."""

Where = tuple[str, int, int | None]
"""A document's file, index and List item, as lint's Problem and Note give them."""


def pool_options(pool_resources: str | None, pool_nodes: str | None) -> ResourceVector | None:
    """The linted pool's resources from lint's ``--pool-resources``, with ``--pool-nodes``
    checked as the operator reads it (the nodes are the cluster's: nothing is checked
    against them) and not given with it."""
    resources = None
    if pool_resources is not None:
        resources = ResourceVector.parse(pool_resources, "--pool-resources")
    if pool_nodes is not None:
        if resources is not None:
            raise IdlegateError(one_capacity("--pool-resources", "--pool-nodes"))
        try:
            LabelSelector.parse(pool_nodes)
        except IdlegateError as exc:
            raise IdlegateError(f"--pool-nodes: {exc}") from None
    return resources


@dataclass
class InPools:
    """The linted ExecutorPools by name, and the DagWorkflows that name a pool."""

    pools: dict[str, ExecutorPoolSpec] = field(default_factory=dict)
    places: dict[str, Where] = field(default_factory=dict)
    """Where each linted pool is."""
    workflows: list[tuple[Where, Mapping[str, Any]]] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)
    """The resources the stages of the linted workflows request."""
    stages: int = 0
    """Stages of the linted workflows seen (parsed)."""
    nodes: list[Node] = field(default_factory=list)
    """The Nodes among the inputs, which the node pools' quotas are checked against."""

    def node(self, obj: Mapping[str, Any]) -> bool:
        """Whether `obj` is a Node (kept for `quotas`)."""
        if obj.get("kind") != "Node" or obj.get("apiVersion") != "v1":
            return False
        self.nodes.append(read_node(obj))
        return True

    def quotas(self) -> Iterator[tuple[Where, str]]:
        """Where and why each node pool's queues quote what its nodes do not count (with
        the nodes given: the operator's sentence)."""
        for name, pool in self.pools.items():
            selector, queues = pool.node_selector, pool.queue_specs
            if selector is None or not queues or not self.nodes:
                continue
            try:
                quotas_on_nodes(name, queues, pool.executors, counted(self.nodes, selector))
            except IdlegateError as exc:
                yield self.places[name], str(exc)

    def notes(self) -> Iterator[tuple[Where, str, str]]:
        """`waits`, each queue whose ``decide: Forecast`` judges nothing, then each node
        pool's quota of an extended resource (a GPU) that only its nodes, not given, could
        check."""
        yield from self.waits()
        for name, pool in self.pools.items():
            for q in pool.queue_specs:
                if q.preemption.decide == "Forecast" and q.preemption.never:
                    yield (
                        self.places[name],
                        f"queue {q.name!r} of ExecutorPool {name!r} sets decide: Forecast but "
                        "stops nothing (reclaim and withinQueue Never, no borrowBelow), so "
                        "no replay ever judges a stop: set what it may stop, or drop decide",
                        NOTHING_TO_JUDGE,
                    )
        for name, pool in self.pools.items():
            if pool.node_selector is None or self.nodes:
                continue
            for q in pool.queue_specs:
                extended = sorted({n for n in q.nominal or () if "/" in n})
                if extended:
                    yield (
                        self.places[name],
                        f"queue {q.name!r} of ExecutorPool {name!r} quotes "
                        f"{', '.join(extended)}, which its nodes must have (the operator "
                        "refuses the pool when none of the nodes nodeSelector picks has it): "
                        "lint it with the nodes (kubectl get nodes -o yaml) to check",
                        UNCHECKED,
                    )

    def requests(self, spec: WorkflowSpec | Any) -> None:
        """Gather what the stages of `spec` (a parsed one, or a manifest's) request."""
        with suppress(IdlegateError):  # (a spec that does not parse is its own problem)
            parsed = spec if isinstance(spec, WorkflowSpec) else parse_workflow(spec, "spec")
            self.stages += len(parsed.stages)
            self.asked.update(n for s in parsed.stages for n in s.demand)

    def cron(self, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        if isinstance(spec, Mapping) and "workflowSpec" in spec:
            self.requests(spec["workflowSpec"])

    def pool(self, where: Where, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if isinstance(name, str):
            with suppress(IdlegateError):  # (said as the pool's own problem)
                self.pools[name] = parse_pool_spec(obj.get("spec"), name)
                self.places[name] = where

    def fallbacks(self, inherited: Arrivals) -> Iterator[tuple[Where, str, str]]:
        """Where, why and with which reason each linted pool's forecasts would not invent
        the operator's ``--forecast-arrivals`` (`inherited`) it inherits."""
        for name, pool in self.pools.items():
            _, why = pool_arrivals(pool, inherited, name)
            if why is not None:
                yield self.places[name], why, ARRIVALS_FALLBACK

    def workflow(self, where: Where, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec")
        self.requests(spec)
        pool = spec.get("pool") if isinstance(spec, Mapping) else None
        if isinstance(pool, str) and pool != DEFAULT_POOL:
            self.workflows.append((where, obj))

    def waits(self) -> Iterator[tuple[Where, str, str]]:
        """Where, why and with which reason each workflow would wait in (or for) its pool:
        to be resized, or for the queue it names."""
        for where, obj in self.workflows:
            name = (obj.get("metadata") or {}).get("name") or "the workflow"
            pool_name = obj["spec"]["pool"]
            pool = self.pools.get(pool_name)
            if pool is None:
                continue
            queue = obj["spec"].get("queueName")
            queues = pool.queue_specs
            if queues and isinstance(queue, str) and queue not in (q.name for q in queues):
                known = ", ".join(q.name for q in queues)
                yield (
                    where,
                    f"queue {queue!r} is not one of ExecutorPool {pool_name!r}'s ({known}): the "
                    "operator holds the workflow out of the pool (PoolReady=False, "
                    "QueueNotFound) until it is declared",
                    QUEUE_NOT_FOUND,
                )
                continue
            try:
                spec = parse_workflow(obj["spec"], "spec")
            except IdlegateError:
                continue  # (said as the workflow's problem)
            try:
                from idlegate.api.lint_render import linted_pool  # (the simulator: only here)
                from idlegate.sim.dag import Dag

                linted_pool(pool.size, pool.capacity).add_job(Dag.from_spec(spec), 0.0, name)
            except IdlegateError as exc:
                yield (
                    where,
                    f"in ExecutorPool {pool_name!r}, {exc}: the operator holds the workflow "
                    "out of the pool (PoolReady=False, PoolTooSmall) until the pool is resized",
                    WAITS,
                )


def check_pool_requested(in_pools: InPools, jobs: list[Any], pool: ResourceVector | None) -> None:
    """IdlegateError when `pool` (``--pool-resources``) names no resource that a linted
    stage requests, of the workflows in `in_pools` or the mapped Argo and Airflow `jobs`
    (`sim.resources.check_requested`); nothing to say with no stage linted."""
    demands = [s.demand for job in jobs for s in job.job.live_stages]
    if pool is None or not (in_pools.stages or demands):
        return
    asked = in_pools.asked.union(*demands)
    check_requested(pool, asked, "the linted workflows", "give them requests")


def _a_queue(item: Any) -> bool:
    """Whether a list's `item` reads as a queue: a mapping with a ``nominal`` quota, or a
    name and only the keys a queue takes (a queue without a quota: `simulate --queues`
    reads one)."""
    if not isinstance(item, Mapping):
        return False
    return "nominal" in item or ("name" in item and set(item) <= set(QUEUE_KEYS))


def is_queue_file(doc: Any) -> bool:
    """Whether a document is a ``--queues`` file's (the operator's default pool's and
    `simulate`'s), good or bad: a list of mappings each with a ``nominal`` quota and no
    ``kind`` (one such, and the rest entries `simulate --queues` refuses: issue 93 said
    such a file "a list, not a Kubernetes object"), or, with no ``kind``, a mapping of ``queues``, one queue not in a list, or
    queues keyed by their names (the last two `simulate --queues` refuses, so lint does
    too). A list of queues without a quota is one too (issue 93: lint skipped it as "a list,
    not a Kubernetes object" while simulate read it)."""
    if isinstance(doc, list):  # (one queue among bad entries: the file's, as simulate reads it)
        queues = [q for q in doc if _a_queue(q)]
        return bool(queues) and not any(isinstance(q, Mapping) and "kind" in q for q in doc)
    if not isinstance(doc, Mapping) or "kind" in doc:
        return False
    by_name = bool(doc) and all(isinstance(q, Mapping) and "nominal" in q for q in doc.values())
    return "nominal" in doc or "queues" in doc or by_name


@dataclass
class QueueFiles:
    """The ``--queues`` files among lint's inputs, and the queues the default pool's
    workflows name: each checked against each file as `simulate --queues` checks them
    (`queue_problems`, `check_named`)."""

    files: list[tuple[str, tuple[QueueSpec, ...]]] = field(default_factory=list)
    joins: list[tuple[Where, str, str]] = field(default_factory=list)
    """Where each workflow is, its name, and the queue it names."""
    read: int = 0
    """Queues files read (good or not)."""

    def add(
        self, source: str, doc: Any, pool_size: int | None, resources: ResourceVector | None
    ) -> list[str]:
        """Read a queues file's document: every problem of it, each as `simulate --queues`
        says it (`queue_problems`: each bad value apart, with its queue and key), then
        against the pool of ``--pool-size`` and ``--pool-resources`` when given; empty
        when nothing is wrong."""
        self.read += 1
        pods = pool_size or int((resources or ResourceVector()).units("pods"))
        pool = {**(resources or {}), "pods": pods * MILLI} if pods else None
        problems = queue_problems(doc, "queues", pool)  # (every one, each apart)
        if problems:
            return problems
        self.files.append((source, queues_from(doc, "queues")))
        return []

    def join(self, where: Where, name: str | None, spec: Any) -> None:
        """A workflow of the default pool at `where`: the queue its spec names, if any."""
        queue = spec.get("queueName") if isinstance(spec, Mapping) else None
        pool = spec.get("pool") if isinstance(spec, Mapping) else None
        if isinstance(queue, str) and pool in (None, DEFAULT_POOL):
            self.joins.append((where, name or f"#{where[1]}", queue))

    def problems(self) -> Iterator[tuple[Where, str]]:
        """Where and why each workflow names a queue a queues file does not declare."""
        for file, queues in self.files:
            for where, name, queue in self.joins:
                problem = queue_problem(queues, file, f"{name!r} of {where[0]}", queue)
                if problem is not None:
                    yield where, problem
