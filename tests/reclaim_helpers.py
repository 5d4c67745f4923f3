"""What the reclaim's tests share (issue 82): an engine with a trace over a few workflows,
and its events; an operator core's admitted workflows and the intents its answers make."""

from __future__ import annotations

import copy
from typing import Any

from idlegate.api.labels import ANNOTATION_STOP, FINALIZER_STOP
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.operator.core.core import Core
from idlegate.operator.core.events import Admit
from idlegate.operator.core.intents import EvictPod, PatchStatus, PostEvent
from idlegate.policy import make_scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Engine, JobArrival, Workload
from idlegate.sim.queues import QueueSpec
from tests.test_operator_core import T0, said, workflow


def engine_of(
    *jobs: tuple[float, str, Dag] | JobArrival,
    executors: int = 1,
    policy: str = "fifo",
    queues: tuple[QueueSpec, ...] = (),
) -> Engine:
    """An engine with a trace and the tasks' log over `jobs` ((time, name, dag), or an
    arrival naming its queue) on `executors`, with `queues` if given."""
    arrivals = tuple(j if isinstance(j, JobArrival) else JobArrival(*j) for j in jobs)
    w = Workload("test", arrivals, executors, queues=queues)
    return Engine.for_workload(w, make_scheduler(policy), 0, trace=True, record_tasks=True)


def events(engine: Engine, *kinds: str) -> list[tuple]:
    """The trace's events of `kinds` as (time, kind, job, stage, info)."""
    assert engine.trace is not None
    return [e for e in engine.trace if e[1] in kinds]


def admitted(core: Core, name: str, spec: dict[str, Any], pods: list | None = None) -> None:
    """DagWorkflow `name` of `spec` admitted to `core` at T0."""
    said(core, Admit(workflow(name, spec), pods or [], NamespacePolicy()), T0)


def of(intents: list[Any], kind: type) -> list[Any]:
    """The intents of `kind`."""
    return [i for i in intents if isinstance(i, kind)]


def reasons(intents: list[Any]) -> list[str]:
    """The reasons of the Events among `intents`."""
    return [i.reason for i in of(intents, PostEvent)]


def status_of(intents: list[Any]) -> dict[str, Any]:
    """The last workflow status written among `intents`."""
    return of(intents, PatchStatus)[-1].status.workflow.status()


def marked(body: dict[str, Any], evict: EvictPod) -> dict[str, Any]:
    """`body` as the edge leaves it before the eviction: the stop's mark and finalizer on it."""
    out = copy.deepcopy(body)
    out["metadata"]["annotations"][ANNOTATION_STOP] = evict.stop
    out["metadata"]["finalizers"] = [FINALIZER_STOP]
    return out
