"""Which ExecutorPool a workflow of any kind lands in, and what it asks of the queues there.

One function, :func:`route_workflow`, routes every kind the operator schedules: a
DagWorkflow (a DagCronWorkflow's runs are DagWorkflows), an Argo Workflow and an Airflow DAG
run, read from one of its worker pods. Each kind names its pool, queue and priority class in
its own place (:data:`FIELDS`); the pool is then picked by :func:`~.pool_spec.route`'s rule:

1. the pool the workflow names (a DagWorkflow's ``spec.pool``; the label
   :data:`~.labels.LABEL_POOL` on an Argo Workflow or an Airflow worker pod): that one, or
   none (:class:`PoolNotFoundError`: it waits, never routed elsewhere behind its author's
   back);
2. else the first pool by name whose `namespaceSelector` selects its namespace;
3. else the operator's implicit default pool.

The queue is a DagWorkflow's ``spec.queueName``, else the label
:data:`~.labels.LABEL_QUEUE` (any kind); the priority class a DagWorkflow's
``spec.priorityClassName``, an Argo Workflow's ``spec.podPriorityClassName`` or an Airflow
pod's ``spec.priorityClassName`` (docs/queues.md). Pure: no kopf, no API, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.kinds import KIND
from idlegate.api.labels import LABEL_POOL, LABEL_QUEUE
from idlegate.api.pool_spec import ExecutorPoolSpec, route
from idlegate.errors import IdlegateError

ARGO_KIND = "Workflow"
"""An Argo Workflow's kind, by which the operator holds it."""
AIRFLOW_KIND = "DagRun"
"""An Airflow DAG run's kind in the operator (its worker pods are the objects read)."""


@dataclass(frozen=True, slots=True)
class Fields:
    """Where a kind's object names its pool and priority class (paths from the object's top;
    ``("metadata", "labels", LABEL_POOL)``: a label)."""

    pool: tuple[str, ...]
    priority_class: tuple[str, ...]

    def where(self) -> str:
        """How the pool is named, for a message: ``spec.pool``, ``label idlegate.io/pool``."""
        if self.pool[:2] == ("metadata", "labels"):
            return f"label {self.pool[2]}"
        return ".".join(self.pool)


_LABEL = ("metadata", "labels", LABEL_POOL)
FIELDS: dict[str, Fields] = {
    KIND: Fields(("spec", "pool"), ("spec", "priorityClassName")),
    ARGO_KIND: Fields(_LABEL, ("spec", "podPriorityClassName")),
    AIRFLOW_KIND: Fields(_LABEL, ("spec", "priorityClassName")),
}
"""The kinds the operator routes, by their kind as it holds them."""


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a workflow lands: its `pool`, and the `queue` and `priority_class` it asks for
    (None: it names none)."""

    pool: str
    queue: str | None = None
    priority_class: str | None = None


class NoPlaceError(IdlegateError):
    """A workflow has no place now, its `pool` or its queue there missing or unable to run:
    it waits for it (:class:`PoolNotFoundError`, :class:`PoolInvalidError`, and
    `idlegate.api.queueing.QueueNotFoundError`)."""

    reason = ""
    """The reason of its workflow's condition and Warning."""
    pool: str
    where: str
    """Where the workflow names what is missing (``spec.pool``, ``label idlegate.io/pool``)."""

    def left_to(self, controller: str) -> str:
        """The sentence for a workflow whose pods go to `controller`'s own order meanwhile
        (an Airflow run's, which cannot wait past Airflow's pending timeout)."""
        raise NotImplementedError


class PoolNotFoundError(NoPlaceError):
    """The ExecutorPool a workflow names does not exist: it waits for it."""

    reason = "PoolNotFound"

    def __init__(self, pool: str, fields: Fields) -> None:
        self.pool, self.where = pool, fields.where()
        super().__init__(
            f"ExecutorPool {pool!r} does not exist: the workflow waits until it is created "
            f"(kubectl get executorpools), or {self.where} names another."
        )

    def left_to(self, controller: str) -> str:
        return (
            f"ExecutorPool {self.pool!r} does not exist: its pods are left to {controller} "
            f"until it is created (kubectl get executorpools), or {self.where} names another."
        )


class PoolInvalidError(NoPlaceError):
    """The ExecutorPool a workflow names exists, but its spec or policy cannot run (`why`,
    its Invalid condition's message): it waits until it is fixed."""

    reason = "PoolInvalid"

    def __init__(self, pool: str, fields: Fields, why: str) -> None:
        self.pool, self.where = pool, fields.where()
        super().__init__(
            f"ExecutorPool {pool!r} cannot run ({why.rstrip('.')}): the workflow waits until "
            f"its spec is fixed (kubectl describe executorpool {pool}), or {self.where} names "
            "another.",
        )

    def left_to(self, controller: str) -> str:
        return (
            f"ExecutorPool {self.pool!r} cannot run: its pods are left to {controller} until "
            f"its spec is fixed (its Ready condition says why), or {self.where} names another."
        )


def _read(obj: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """The non-empty string at `path` in `obj`, else None (a value of another type too)."""
    found: Any = obj
    for key in path:
        found = found.get(key) if isinstance(found, Mapping) else None
    return found if isinstance(found, str) and found else None


def route_workflow(
    kind: str,
    obj: Mapping[str, Any],
    namespace_labels: Mapping[str, str],
    pools: Iterable[tuple[str, ExecutorPoolSpec]],
    invalid: Mapping[str, str] | None = None,
) -> Routing:
    """Where workflow `obj` of `kind` (a key of :data:`FIELDS`; for an Airflow run, one of
    its worker pods) lands, its namespace having `namespace_labels`, among the ExecutorPools
    `pools` (name, spec); PoolNotFoundError if the pool it names does not exist, the
    PoolInvalidError of one of `invalid` (name: why its latest spec cannot run) if it lands
    in one: a pool running an earlier spec takes no new workflow either."""
    fields, invalid = FIELDS[kind], invalid or {}
    wanted = pool_named(kind, obj)
    pool = route(wanted, namespace_labels, pools)
    if pool is None or pool in invalid:
        name = pool or wanted
        assert name is not None  # (only a pool named may be missing)
        why = invalid.get(name)
        raise (
            PoolNotFoundError(name, fields) if why is None else PoolInvalidError(name, fields, why)
        )
    return Routing(pool, queue_name(kind, obj), _read(obj, fields.priority_class))


def pool_named(kind: str, obj: Mapping[str, Any]) -> str | None:
    """The pool workflow `obj` of `kind` names (:data:`FIELDS`), if any."""
    return _read(obj, FIELDS[kind].pool)


def asked(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`route_workflow` reads of workflow `obj` of `kind` (its namespace, and the
    pool, queue and priority class it names), alone: kept with a workflow held in memory
    (an Argo Workflow's job, an Airflow run's), which is placed again when its pool changes."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {"namespace": meta.get("namespace", "")}}
    fields = FIELDS[kind]
    for path in (fields.pool, fields.priority_class, ("spec", "queueName")):
        found = _read(obj, path)
        if found is not None:
            *parents, last = path
            where = out
            for key in parents:
                where = where.setdefault(key, {})
            where[last] = found
    queue = _read(obj, ("metadata", "labels", LABEL_QUEUE))
    if queue is not None:
        out["metadata"].setdefault("labels", {})[LABEL_QUEUE] = queue
    return out


def queue_name(kind: str, obj: Mapping[str, Any]) -> str | None:
    """The queue workflow `obj` of `kind` names (a DagWorkflow's ``spec.queueName``, else
    the label :data:`~.labels.LABEL_QUEUE`), else None."""
    own = _read(obj, ("spec", "queueName")) if kind == KIND else None
    return own or _read(obj, ("metadata", "labels", LABEL_QUEUE))
