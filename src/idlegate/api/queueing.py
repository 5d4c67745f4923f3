"""A pool's queues in the operator: where they are declared, which queue a workflow joins,
why it waits, and what the pool's status says of each queue.

The queues (`idlegate.sim.queues.QueueSpec`, parsed by its one parser `queues_from`) are
declared in an ExecutorPool's ``spec.queues``, or for the default pool in the YAML file of
the operator's ``--queues`` (`QueueFile`). A workflow joins (`placement`):

1. the queue it names (a DagWorkflow's ``spec.queueName``, else the label
   ``idlegate.io/queue`` on any kind: `idlegate.api.routing.Routing.queue`); a name the pool
   lacks raises `QueueNotFoundError`, and the workflow waits for it as it waits for a
   missing pool (condition ``PoolReady=False``, reason ``QueueNotFound``): nothing is lost,
   and it is admitted again when its pool's queues change;
2. else the queue whose ``namespaces`` include its namespace;
3. else the pool's default queue; the rule is the simulator's too
   (`idlegate.sim.queues.queue_of`, which `placement` calls).

Pure: no kopf, no API, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import inf
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idlegate.api.kinds import KIND
from idlegate.api.labels import LABEL_QUEUE
from idlegate.api.routing import NoPlaceError, Routing
from idlegate.errors import IdlegateError
from idlegate.sim.queues import QueueSpec, check_cohort, queue_of, queues_from, read_queues
from idlegate.sim.resources import (
    MILLI,
    ResourceVector,
    binary_units,
    format_quantities,
    format_quantity,
)

if TYPE_CHECKING:
    from idlegate.sim.admission import Admission
    from idlegate.sim.admission_result import AdmissionResult
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.protocol import Job

QUEUE_NOT_FOUND = "QueueNotFound"
"""The reason of the condition and Warning of a workflow naming a queue its pool lacks."""


@dataclass(frozen=True)
class QueueFile:
    """The queues of the operator's default pool, read from ``--queues FILE`` (a YAML list
    of the mappings `queues_from` reads, or ``{queues: [...]}``)."""

    specs: tuple[QueueSpec, ...]
    source: str = ""

    @classmethod
    def parse(cls, text: str) -> QueueFile:
        """The queues of the YAML file at path `text` (`idlegate.sim.queues.read_queues`)."""
        return cls(read_queues(text), text)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """As a config field: a file's path in, the path out."""
        from pydantic_core import core_schema

        def validate(value: Any) -> QueueFile:
            if isinstance(value, QueueFile):
                return value
            try:
                if isinstance(value, str | Path):
                    return cls.parse(str(value))
                return cls(queues_from(value))
            except IdlegateError as exc:
                raise ValueError(str(exc)) from None

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v.source),
        )


class QueueNotFoundError(NoPlaceError):
    """The queue a workflow names is not one of its pool's: it waits for it."""

    reason = QUEUE_NOT_FOUND

    def __init__(self, pool: str, queue: str, queues: Sequence[QueueSpec], kind: str) -> None:
        self.pool, self.queue = pool, queue
        self.where = "spec.queueName" if kind == KIND else f"label {LABEL_QUEUE}"
        self.names = ", ".join(q.name for q in queues) or "none"
        super().__init__(
            f"Queue {queue!r} does not exist in ExecutorPool {pool!r} (its queues: "
            f"{self.names}): the workflow waits until it is declared, or names another queue.",
        )

    def left_to(self, controller: str) -> str:
        return (
            f"Queue {self.queue!r} does not exist in ExecutorPool {self.pool!r} (its queues: "
            f"{self.names}): its pods are left to {controller} until it is declared, or "
            f"{self.where} names another."
        )


def cohort_check(
    queues: Sequence[QueueSpec],
    pods: int,
    capacity: ResourceVector | None,
    counted: Sequence[str] | None = None,
) -> None:
    """`check_cohort` against a pool of `pods` executors and `capacity` (None: pods only);
    for a pool that follows its nodes, `counted` instead: the resources it counts
    (`idlegate.api.nodes.counted`), whose names alone a quota is checked against."""
    if counted is not None:
        check_cohort(queues, counted=counted)
        return
    pool = ResourceVector({**(capacity or {}), "pods": pods * MILLI})  # (pods once)
    check_cohort(queues, pool)


def quotas_on_nodes(
    name: str, queues: Sequence[QueueSpec], pods: int, counted: Sequence[str]
) -> None:
    """ExecutorPool `name` on nodes may quote only what its nodes count (`counted`:
    `idlegate.api.nodes.counted`), as a `resources` pool only its own resources
    (`cohort_check`, here with no bound on the amounts: its nodes' come and go);
    IdlegateError if a queue quotes another (a GPU none of them has). The operator's check
    when it reads the nodes, and lint's given them."""
    unbounded = ResourceVector({n: 1 << 62 for n in counted})
    try:
        cohort_check(queues, pods, unbounded)
    except IdlegateError as exc:
        raise IdlegateError(f"ExecutorPool {name!r}, on its nodes: {exc}") from None


def placement(queues: Sequence[QueueSpec], routing: Routing, namespace: str, kind: str) -> int:
    """The index of the queue a workflow of `namespace` routed as `routing` joins (the
    module docstring's order); QueueNotFoundError if it names one `queues` lacks."""
    if routing.queue is not None and routing.queue not in (q.name for q in queues):
        raise QueueNotFoundError(routing.pool, routing.queue, queues, kind)
    return queue_of(queues, namespace, routing.queue)


def _amounts(
    result: AdmissionResult, nominal: Sequence[float], row: Sequence[float]
) -> dict[str, str]:
    return {
        d: format_quantities((int(v),), binary=d == "memory")[0]
        for d, v, n in zip(result.dims, row, nominal, strict=True)
        if n != inf or v
    }


def why_waiting(admission: Admission, q: int) -> str | None:
    """Why queue q's ready tasks wait when that is the queue's (its quota, borrowing
    limit, the cohort, or a wait bound's reservation), in one sentence: the hold the
    admission's phase wrote for its first waiting workflow (`QueueResult.why`, e.g.
    ``queue data-eng: pods 10/10 used, borrowing limit reached``); None if it waits for
    the pool or its policy (`AdmissionResult.of` says why each workflow waits)."""
    return admission.result().queues[q].why


def queue_status(
    admission: Admission, jobs: Sequence[Job] = (), now: float | None = None
) -> list[dict[str, Any]]:
    """Each queue's entry of an ExecutorPool's ``status.queues`` (`status_rows` of the
    admission's present result; `jobs` and `now` are the result's own, and ignored)."""
    return status_rows(admission.result(), admission.nominal)


def status_rows(
    result: AdmissionResult, nominal: Sequence[Sequence[float]]
) -> list[dict[str, Any]]:
    """Each queue's entry of ``status.queues`` from `result`: what it uses, borrows and
    lends now, its waiting workflows, the oldest wait (seconds) and its weighted share
    (`nominal`: each queue's quota per resource, inf where it has none: a resource it
    neither limits nor uses is left out)."""
    return [
        {
            "name": r.name,
            "used": _amounts(result, nominal[q], r.used),
            "borrowed": _amounts(result, nominal[q], r.borrowed),
            "lent": _amounts(result, nominal[q], r.lent),
            "waiting": len(r.entries()),  # (started ones with a stage that waits too)
            "oldestWait": round(r.oldest_wait, 3),
            "share": round(r.share, 4),
        }
        for q, r in enumerate(result.queues)
    ]


def pool_use(cluster: Cluster) -> dict[str, Any]:
    """What a pool uses of each resource it counts, beside its capacity, and each queue's
    use beside its nominal quota, with what it borrows and lends: the visibility API's
    ``use`` (`idlegate.api.visibility.pool_entry`), for every pool, the default one too,
    whose queues (``--queues``) have no ExecutorPool status to say it.

    ``resources``: what the pool counts, pods (its executors) first, then CPU, memory,
    GPUs as its capacity or nodes have them; every amount is a Kubernetes quantity
    (``9500m``, ``40Gi``) of each of them, 0 included. A queue's ``nominal`` names only
    the resources its quota names; a pool without queues has one, ``""``, with no quota:
    the pool is its bound."""
    dims = ("pods", *cluster.resource_names)
    used = {"pods": cluster.busy * MILLI, **cluster.used_resources}

    def amounts(values: Mapping[str, float], only: Sequence[str] = dims) -> dict[str, str]:
        return {d: format_quantity(int(values.get(d, 0)), binary=binary_units(d)) for d in only}

    out = {"resources": list(dims), "capacity": amounts(cluster.capacity), "used": amounts(used)}
    result, admission = cluster.admission_result(), cluster.admission
    if result is None or admission is None:
        whole = {"name": "", "nominal": {}, "used": out["used"], "borrowed": {}, "lent": {}}
        return {**out, "queues": [whole]}
    queues = []
    for q, r in enumerate(result.queues):
        quota = {d: n for d, n in zip(result.dims, admission.nominal[q], strict=True) if n != inf}
        queues.append(
            {
                "name": r.name,
                "nominal": amounts(quota, list(quota)),
                "used": amounts(dict(zip(result.dims, r.used, strict=True))),
                "borrowed": amounts(dict(zip(result.dims, r.borrowed, strict=True)), list(quota)),
                "lent": amounts(dict(zip(result.dims, r.lent, strict=True)), list(quota)),
            }
        )
    return {**out, "queues": queues}


def queues_summary(status: Sequence[dict[str, Any]]) -> str:
    """The printer column of `queue_status`: workflows waiting per queue (``a=3,b=0``)."""
    return ",".join(f"{s['name']}={s['waiting']}" for s in status)


def bound_hit(admission: Admission, q: int, bound: float, start: float) -> str:
    """What a pool's Event says when queue q's task, past its wait bound since `bound`,
    moved ahead of the others and started at `start`."""
    spec = admission.queues[q]
    return (
        f"queue {spec.name}: a task that waited past its {spec.wait_bound:g} s bound started "
        f"first, {start - bound:.1f} s after the bound"
    )


def priority_of(classes: Mapping[str, int], name: str | None) -> tuple[int, str | None]:
    """A workflow's priority from the PriorityClass it names (`classes`: each class's value),
    and the Warning to say if that class does not exist (its priority is then 0)."""
    if name is None:
        return 0, None
    if name in classes:
        return classes[name], None
    return 0, (
        f"PriorityClass {name!r} does not exist: the workflow runs with priority 0 in its "
        "queue; create it (kubectl get priorityclasses) or name another."
    )


def priority_classes(body: Mapping[str, Any]) -> dict[str, int]:
    """A PriorityClass object as (name: value), for the operator's view of them."""
    name, value = (body.get("metadata") or {}).get("name"), body.get("value")
    valid = isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool)
    return {name: value} if valid else {}  # type: ignore[dict-item]
