"""`ExecutorPool`: a cluster-scoped pool of executors with its own policy, and which
namespaces' workflows land in it.

An `ExecutorPool` is to the operator what a ClusterQueue is to Kueue: `size` executors
shared by the DagWorkflows routed to it, released by its own scheduling `policy`. A
workflow is routed (:func:`route`) in this order:

1. ``spec.pool`` names a pool: that one. If it does not exist (yet, or any more), the
   workflow waits, with condition ``PoolReady=False`` saying which pool it waits for; it
   is never routed elsewhere behind its author's back.
2. Else the pool whose `namespaceSelector` selects the workflow's namespace; when several
   do, the first by name (deterministic, and the pools' status says so).
3. Else the operator's implicit default pool (``--pool-size``, ``--scheduler``), which is
   how the operator worked before pools: a cluster without ExecutorPools is unchanged.

`namespaceSelector` is a Kubernetes label selector (``matchLabels`` and
``matchExpressions``, ANDed) with Kubernetes' meaning: ``{}`` selects every namespace; an
absent selector selects none (the pool is reached through ``spec.pool`` only), as Kueue's
ClusterQueue does. :func:`selects` implements the matching; the models here generate the
CRD (:mod:`idlegate.api.crd`) and import neither kopf nor kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from idlegate.api.labels import label_problem
from idlegate.api.names import check_pool_name
from idlegate.api.status import Condition, Conditions, generation_of
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.arrival_kinds import Arrivals
from idlegate.sim.queues import (
    QueueSpec,
    preemption_problem,
    queue_problems,
    queues_cohort_problems,
    queues_from,
    whole_problem,
)
from idlegate.sim.resources import MILLI, ResourceVector, binary_units, format_quantities
from idlegate.sim.spec import Quantity, describe_validation_error, validation_problems

DEFAULT_POOL = "default"
"""The implicit pool of ``--pool-size`` executors. An ExecutorPool may not take this name
(the CRD's CEL rule): a workflow naming it means the operator's own pool."""
POOL_CONDITION = "PoolReady"
"""The workflow condition that says whether its pool exists (False: it waits for it)."""

NO_COHORT = {"cohort": False}
"""A validation context that leaves the queues' cohort unchecked (`pool_spec_problems`
reads the spec's other fields so, to say the cohort's problems one by one)."""

LAGGING = "Lagging"
"""The ExecutorPool's condition (True while the operator lags: `operator.lag.lag`) and its
Warning's reason."""


class SelectorOperator(StrEnum):
    """A label selector requirement's operator (Kubernetes' set-based requirements)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class Requirement(BaseModel):
    """One requirement of a label selector: `key` `operator` `values`."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    key: str = Field(min_length=1, max_length=317, description="The label's key.")
    operator: SelectorOperator = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: tuple[str, ...] = Field(
        default=(),
        max_length=256,
        description="The values for In and NotIn (at least one); empty for Exists and "
        "DoesNotExist.",
    )

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Requirement:
        wants_values = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if wants_values and not self.values:
            raise ValueError(f"{self.operator} needs at least one value (key {self.key!r})")
        if not wants_values and self.values:
            raise ValueError(f"{self.operator} takes no values (key {self.key!r})")
        return self

    @model_validator(mode="after")
    def _valid_labels(self) -> Requirement:
        for value in self.values or (None,):
            problem = label_problem(self.key, value)
            if problem is not None:
                raise ValueError(problem)
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is SelectorOperator.EXISTS:
            return present
        if self.operator is SelectorOperator.DOES_NOT_EXIST:
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator is SelectorOperator.IN else not inside


class LabelSelector(BaseModel):
    """A Kubernetes label selector: every `matchLabels` pair and every requirement hold."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    match_labels: dict[str, str] = Field(
        default_factory=dict,
        alias="matchLabels",
        description="Labels the object must have, with these values.",
    )
    match_expressions: tuple[Requirement, ...] = Field(
        default=(),
        alias="matchExpressions",
        max_length=64,
        description="Requirements the object's labels must meet.",
    )

    @field_validator("match_labels")
    @classmethod
    def _valid_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            problem = label_problem(key, value)
            if problem is not None:
                raise ValueError(problem)
        return labels

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """A selector in kubectl's ``-l`` syntax: ``pool=batch,tier in (a,b),gpu,!spot``
        (``=``/``==``, ``!=``, ``in``, ``notin``, a key alone: it exists, ``!key``: it does
        not); empty: every object. IdlegateError for a part it cannot read."""
        try:
            return cls._parse(text)
        except ValidationError as exc:  # (a key or value the API server would refuse)
            raise IdlegateError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None

    @classmethod
    def _parse(cls, text: str) -> LabelSelector:
        labels: dict[str, str] = {}
        requirements: list[Requirement] = []
        for part in _SELECTOR_PART.findall(text):
            part = part.strip().rstrip(",").strip()
            found = _SELECTOR_TERM.fullmatch(part)
            if found is None:
                raise IdlegateError(
                    f"{part!r} is not a label selector's requirement; write e.g. pool=batch, "
                    "tier in (a,b), tier notin (c), gpu (it exists) or !spot (it does not)"
                )
            key, op, value = found["key"], (found["op"] or "").strip(), found["value"]
            if found["not"] and op:
                raise IdlegateError(
                    f"{part!r}: '!' goes before a key alone (!spot); write key!=value"
                )
            if op in ("=", "=="):
                labels[key] = value.strip()
            elif op == "!=":
                requirements.append(
                    Requirement(key=key, operator=SelectorOperator.NOT_IN, values=(value.strip(),))
                )
            elif op in ("in", "notin"):
                values = tuple(v.strip() for v in value.strip("() ").split(",") if v.strip())
                kind = SelectorOperator.IN if op == "in" else SelectorOperator.NOT_IN
                requirements.append(Requirement(key=key, operator=kind, values=values))
            else:
                kind = SelectorOperator.DOES_NOT_EXIST if found["not"] else SelectorOperator.EXISTS
                requirements.append(Requirement(key=key, operator=kind))
        return cls(match_labels=labels, match_expressions=tuple(requirements))

    def text(self) -> str:
        """The selector in kubectl's ``-l`` syntax (:meth:`parse` reads it back)."""
        ops = {SelectorOperator.IN: "in", SelectorOperator.NOT_IN: "notin"}
        parts = [f"{k}={v}" for k, v in self.match_labels.items()]
        for r in self.match_expressions:
            if r.operator in ops:
                parts.append(f"{r.key} {ops[r.operator]} ({','.join(r.values)})")
            else:
                parts.append(("!" if r.operator is SelectorOperator.DOES_NOT_EXIST else "") + r.key)
        return ",".join(parts)


_SELECTOR_PART = re.compile(r"[^,(]+(?:\([^)]*\))?[^,]*")
_SELECTOR_TERM = re.compile(
    r"(?P<not>!)?\s*(?P<key>[A-Za-z0-9][-A-Za-z0-9_./]*)"
    r"(?:\s*(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<value>\([^)]*\)|[-A-Za-z0-9_.]*))?"
)


def one_capacity(resources: str, nodes: str) -> str:
    """The sentence for a pool given both a fixed capacity (`resources`: the field or
    flag) and nodes to follow (`nodes`): an ExecutorPool's, the operator's, lint's."""
    return (
        f"give {resources} (a fixed capacity) or {nodes} (the capacity of the nodes it "
        "selects), not both"
    )


def no_queues(setting: str, pool: str, queues: str) -> str:
    """Why a pool without queues cannot invent its forecast's arrivals per queue."""
    return (
        f"{setting} invents a forecast's arrivals per queue, but {pool} has no queues; give "
        f"it {queues}, or choose poisson (arrivals at the pool's rate) or none"
    )


ARRIVALS_FALLBACK = "ForecastArrivalsFallback"
"""The ExecutorPool's condition (True while it holds) and its Warning Event's reason, when
its forecasts do not invent the arrivals it inherited (`pool_arrivals`)."""


def pool_arrivals(
    spec: ExecutorPoolSpec, inherited: Arrivals, pool: str
) -> tuple[Arrivals, str | None]:
    """What ExecutorPool `pool`'s forecasts invent: its own ``forecastArrivals``, else the
    operator's ``--forecast-arrivals`` (`inherited`); and, when that is not what it
    inherited, why and how to fix it, a sentence (None: as set). One case falls back: an
    inherited ``queues`` on a pool without queues invents ``poisson`` (one stream at the
    pool's recent rate, the nearest it can), which must be said, not done in silence: the
    pool's own ``forecastArrivals: queues`` without queues is refused instead (`no_queues`),
    but the operator's flag is given for every pool at once."""
    if spec.forecast_arrivals is not None:
        return spec.forecast_arrivals, None
    if inherited == "queues" and not spec.queues:
        return "poisson", (
            f"ExecutorPool {pool!r} has no queues, so its forecasts cannot invent the "
            "operator's --forecast-arrivals queues (arrivals per queue); they invent poisson "
            "instead (arrivals at the pool's recent rate). Set spec.forecastArrivals on the "
            "pool (poisson, or none), or give it queues."
        )
    return inherited, None


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether `selector` selects an object with `labels` (None selects nothing; an empty
    selector everything, as in Kubernetes)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(r.matches(labels) for r in selector.match_expressions)


class PreemptionModel(BaseModel):
    """Which running tasks a queue's ready task may stop to start (docs/queues.md,
    "Preemption")."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    reclaim: Literal["Never", "LowerPriority", "Any"] | None = Field(
        default=None,
        description="While the queue is within its nominal quota, stop tasks that other "
        "queues run beyond theirs: Never, LowerPriority (of lower priority than the "
        "waiting task) or Any (Kueue's reclaimWithinCohort). Unset: Never.",
    )
    within_queue: Literal["Never", "LowerPriority"] | None = Field(
        default=None,
        alias="withinQueue",
        description="Stop the queue's own tasks of lower priority: Never or LowerPriority "
        "(Kueue's withinClusterQueue). Unset: Never.",
    )
    borrow_below: int | None = Field(
        default=None,
        alias="borrowBelow",
        strict=True,
        description="While the queue borrows, stop tasks that other queues run beyond their "
        "nominal quota, of lower priority than the waiting task and below this one (Kueue's "
        "borrowWithinCohort). Unset: never.",
    )
    decide: Literal["Rules", "Forecast"] | None = Field(
        default=None,
        description="Rules: stop what the rules choose; Forecast: only where a replay of the "
        "pool with and without the stops says they pay (the operator's replay process "
        "judges them before they are evicted). Unset: Rules.",
    )

    @field_validator("reclaim", "within_queue", "borrow_below", mode="before")
    @classmethod
    def _setting(cls, value: object, info: ValidationInfo) -> object:
        # (the queues file's own sentences, before pydantic's: one check of each setting,
        # each field's apart, so that lint says every bad one)
        field = cls.model_fields[info.field_name or ""]
        problem = preemption_problem(field.alias or str(info.field_name), value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("decide", mode="before")
    @classmethod
    def _decide(cls, value: object) -> object:
        problem = preemption_problem("decide", value)
        if problem is not None:
            raise ValueError(problem)
        return value


class QueueModel(BaseModel):
    """One queue of a pool, as `idlegate.sim.queues.queue_from` reads it (docs/queues.md)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=63, description="The queue's name (a DNS label).")
    nominal: dict[str, Quantity] | None = Field(
        default=None,
        description="What the queue owns of the pool whenever it has work, as a ResourceList "
        "(pods: 10, cpu: 8); a resource it does not name is not limited by its quota.",
    )
    borrowing_limit: dict[str, Quantity] | None = Field(
        default=None,
        alias="borrowingLimit",
        description="How much beyond its nominal quota it may borrow of what others leave idle. "
        "Unset: no limit but the cohort's idle quota.",
    )
    lending_limit: dict[str, Quantity] | None = Field(
        default=None,
        alias="lendingLimit",
        description="How much of its idle nominal quota others may borrow. Unset: all of it.",
    )
    weight: float | None = Field(
        default=None, description="Its share of borrowed quota (weighted DRF). Unset: 1."
    )
    priority: int | None = Field(
        default=None, description="Among queues that borrow, a higher one borrows first."
    )

    @field_validator("priority")
    @classmethod
    def _int64(cls, value: int | None) -> int | None:
        # (the CRD's integers are int64: the queues file's one check, `whole_problem`)
        if value is not None and (why := whole_problem(value)) is not None:
            raise ValueError(f"{value} {why}")
        return value

    wait_bound: float | None = Field(
        default=None,
        alias="waitBound",
        description="Seconds a ready task may wait before it starts first and room is reserved "
        "for it. Unset: no bound.",
    )
    namespaces: list[str] | None = Field(
        default=None,
        description="The namespaces whose workflows join this queue when they name none.",
    )
    preemption: PreemptionModel | None = Field(
        default=None,
        description="Which running tasks its ready tasks may stop to start (docs/queues.md, "
        "Preemption). Unset: none, ever.",
    )


class ExecutorPoolSpec(BaseModel):
    """The spec of an ExecutorPool."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    size: int | None = Field(
        default=None,
        ge=1,
        strict=True,
        description="Executors in the pool: task pods of its workflows running at once. "
        "Changed at run time, no running task is preempted: a smaller pool releases "
        "nothing until fewer than `size` are busy. Unset: resources.pods.",
    )
    resources: dict[str, Quantity] | None = Field(
        default=None,
        description="The pool's capacity as a ResourceList of Kubernetes quantities (cpu: "
        "24, memory: 96Gi, nvidia.com/gpu: 2, pods: 60): a task is released only where its "
        "pod's requests fit what is free of each resource named (pods: the size). Unset: "
        "`size` pods, whatever they request.",
    )
    node_selector: LabelSelector | None = Field(
        default=None,
        alias="nodeSelector",
        description="A pool that follows the cluster: its capacity is the allocatable of "
        "the Ready nodes this selects, less the requests of the pods there that idlegate "
        "does not gate, and a task is released only where its requests fit one node's free "
        "allocatable. {} selects every node. Not with resources.",
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        alias="namespaceSelector",
        description="The namespaces whose workflows land in this pool (unless their "
        "spec.pool names another). {} selects every namespace; unset, none (the pool is "
        "reached through spec.pool only). Several pools selecting one namespace: the first "
        "by name wins.",
    )
    policy: str | None = Field(
        default=None,
        min_length=1,
        description="The scheduling policy, a scheduler spec as for the operator's "
        "--scheduler (fair, analytic:sjf, learned:PATH.onnx, lookahead:...). Unset: the "
        "operator's --scheduler.",
    )
    plan_budget_ms: float | None = Field(
        default=None,
        alias="planBudgetMs",
        gt=0,
        strict=True,
        description="Wall milliseconds one plan of a lookahead policy may take. Unset: the "
        "operator's --plan-budget-ms.",
    )
    queues: list[QueueModel] | None = Field(
        default=None,
        description="Queues sharing the pool (its cohort): each with a nominal quota, lending "
        "and borrowing limits, a weight, a priority and a wait bound (docs/queues.md). Unset: "
        "one queue, no quotas.",
    )
    forecast_arrivals: Arrivals | None = Field(
        default=None,
        alias="forecastArrivals",
        description="What the pool's forecasts invent of the workflows not submitted yet "
        "(docs/forecast.md, Arrivals): none; poisson, copies of its recent workflows at its "
        "recent rate; queues, the same per queue (needs queues). Unset: the operator's "
        "--forecast-arrivals.",
    )

    @field_validator("resources", mode="before")
    @classmethod
    def _quantities(cls, value: object) -> object:
        # a zero is no capacity, not a resource the pool leaves uncounted
        if value is None:
            return value
        vector = ResourceVector.validated(value, capacity=True)
        zero = next((k for k in value if k not in vector), None)  # type: ignore[union-attr]
        if zero is not None:
            given = value[zero]  # type: ignore[index]
            raise ValueError(
                f"{zero}: {given!r} is no capacity; give {zero} above 0, or leave it out for "
                "a pool that does not count it"
            )
        if not vector:
            raise ValueError("names no capacity; give e.g. cpu: 24, memory: 96Gi, or remove it")
        return value

    @model_validator(mode="after")
    def _executors(self) -> ExecutorPoolSpec:
        pods = self.capacity["pods"] // MILLI if self.capacity is not None else 0
        if self.resources is not None and self.node_selector is not None:
            raise ValueError(one_capacity("resources", "nodeSelector"))
        if self.size is None and not pods:
            raise ValueError(
                "give size (the task pods it runs at once; for a nodeSelector pool, the pods "
                "its nodes hold: 110 a node by default), or resources with pods"
            )
        if self.size is not None and pods and pods != self.size:
            raise ValueError(
                f"size is {self.size} but resources.pods is {pods}; give the pods once"
            )
        return self

    @model_validator(mode="after")
    def _cohort(self, info: ValidationInfo) -> ExecutorPoolSpec:
        problems = [] if info.context == NO_COHORT else self.cohort_problems()
        if problems:  # (all at once: the pool's condition names each)
            raise ValueError("; ".join(problems))
        return self

    def cohort_problems(self) -> list[str]:
        """Every problem of the pool's queues, each led by its place: each queue's values
        (`queue_problems`) and its cohort's, the names and, against the pool's capacity,
        the quotas' resources and sums together (a node pool's room is not known here:
        its names alone)."""
        if not self.queues:
            return []
        raw = [q.model_dump(by_alias=True, exclude_none=True) for q in self.queues]
        return queue_problems(raw, pool=self.room)

    @property
    def room(self) -> ResourceVector | None:
        """The capacity the queues' quotas are checked against (None: a pool on nodes)."""
        if self.node_selector is not None:
            return None
        return ResourceVector({**(self.capacity or {}), "pods": self.executors * MILLI})

    @model_validator(mode="after")
    def _arrivals_per_queue(self) -> ExecutorPoolSpec:
        if self.forecast_arrivals == "queues" and not self.queues:
            raise ValueError(no_queues("forecastArrivals: queues", "the pool", "queues"))
        return self

    @property
    def queue_specs(self) -> tuple[QueueSpec, ...]:
        """`queues` as the admission stage takes them (empty: no queues)."""
        if not self.queues:
            return ()
        raw = [q.model_dump(by_alias=True, exclude_none=True) for q in self.queues]
        return queues_from(raw, "queues")

    @property
    def capacity(self) -> ResourceVector | None:
        """`resources` as a vector (None: a pods-only or node-following pool)."""
        return None if self.resources is None else ResourceVector.of(self.resources, "")

    @property
    def engine(self) -> tuple[Any, ...]:
        """What the pool's state machine is built from: a change of it builds a new one
        (the operator's `Pools.apply`); a change of the rest (its arrivals) does not."""
        return (self.executors, self.capacity, self.node_selector, self.policy,
                self.plan_budget_ms, self.queue_specs)  # fmt: skip

    @property
    def executors(self) -> int:
        """The pool's executors: `size`, else `resources.pods`."""
        if self.size is not None:
            return self.size
        assert self.capacity is not None  # (the validator holds it)
        return self.capacity["pods"] // MILLI


class ReplayedWindow(BaseModel):
    """The finished workflows a portfolio's last round replayed."""

    model_config = ConfigDict(extra="forbid")

    workflows: int = Field(description="Finished workflows replayed.")
    prior: int = Field(
        description="Of them, those that finished before the operator started (from its "
        "history sink)."
    )
    source: str | None = Field(
        default=None, description="Where those came from: history sink, or history file."
    )


class QueueStatus(BaseModel):
    """One queue of the pool as it stands (`idlegate.api.queueing.queue_status`)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    name: str = Field(description="The queue's name.")
    used: dict[str, str] = Field(description="What its running task pods use (a ResourceList).")
    borrowed: dict[str, str] = Field(description="What it uses beyond its nominal quota.")
    lent: dict[str, str] = Field(description="What of its idle nominal quota others use.")
    waiting: int = Field(description="Its workflows with ready tasks not started.")
    oldest_wait: float = Field(
        alias="oldestWait", description="Seconds its longest-waiting ready task has waited."
    )
    share: float = Field(description="Its weighted dominant share of the cohort.")


class ExecutorPoolStatus(BaseModel):
    """The observed state of an ExecutorPool, written by the operator."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    size: int | None = Field(default=None, description="The size the operator runs it with.")
    busy: int | None = Field(default=None, description="Executors running task pods.")
    pending: int | None = Field(
        default=None, description="Workflows in the pool that have not finished."
    )
    capacity: dict[str, str] | None = Field(
        default=None,
        description="The pool's capacity of each resource it counts beyond pods (a "
        "ResourceList; a node-following pool's as its nodes have it now).",
    )
    used: dict[str, str] | None = Field(
        default=None,
        description="What the pool's running task pods request of each of those resources.",
    )
    usage: dict[str, str] | None = Field(
        default=None, description="used/capacity of each of those resources (cpu: 12/24)."
    )
    policy: str | None = Field(default=None, description="The policy the pool follows.")
    queues: list[QueueStatus] | None = Field(
        default=None, description="Each queue's use, borrowing, lending and waiting workflows."
    )
    queues_summary: str | None = Field(
        default=None,
        alias="queuesSummary",
        description="Workflows waiting per queue (data-eng=3,ml=0), a printer column.",
    )
    following: str | None = Field(
        default=None,
        description="What the policy follows now and why: a portfolio's candidate with its "
        "replay's figures, else the rule followed.",
    )
    replayed: ReplayedWindow | None = Field(
        default=None,
        description="A portfolio's last round: the finished workflows it replayed, and how "
        "many finished before the operator started.",
    )
    observed_generation: int | None = Field(
        default=None,
        alias="observedGeneration",
        description="The spec generation this status reflects.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready: the pool runs (False: its policy cannot be loaded, and why).",
    )


def resource_status(capacity: ResourceVector, used: ResourceVector) -> dict[str, Any]:
    """An ExecutorPool status's capacity, used and usage (``used/capacity``) of each
    resource of `capacity` but pods; nothing for a pods-only pool."""
    names = [n for n in capacity if n != "pods"]
    if not names:
        return {}
    cap, use = capacity.restricted(names).to_list(), used.restricted(names).to_list()
    use = {n: use.get(n, "0") for n in names}
    # (the printer column: both in one unit, as kubectl's columns are read side by side)
    pairs = {n: format_quantities((used[n], capacity[n]), binary=binary_units(n)) for n in names}
    return {"capacity": cap, "used": use, "usage": {n: "/".join(p) for n, p in pairs.items()}}


def pool_conditions(
    ok: bool,
    reason: str,
    message: str,
    now: float,
    body: Mapping[str, Any],
    arrivals: str | None = None,
    lagging: str | None = None,
) -> list[dict[str, Any]]:
    """ExecutorPool `body`'s conditions with Ready set at `now` (the operator's clock, as
    every time it writes), `ARRIVALS_FALLBACK` True, reason ``NoQueues``, while its
    forecasts fall back (`arrivals`, `pool_arrivals`' sentence), and ``Lagging`` True,
    reason ``LagAboveBound``, while the operator lags (`lagging`, `operator.lag.lag`'s sentence);
    None: the condition goes. A condition that keeps its status keeps its transition time
    (`Conditions`)."""
    conditions = Conditions((body.get("status") or {}).get("conditions"))
    generation = generation_of(body)
    conditions.set("Ready", ok, reason, message, generation, now)
    held = ((ARRIVALS_FALLBACK, "NoQueues", arrivals), (LAGGING, "LagAboveBound", lagging))
    for type_, why, said in held:
        if said is None:
            conditions.remove(type_)
        else:
            conditions.set(type_, True, why, said, generation, now)
    return [
        c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in conditions.models()
    ]


def parse_pool_spec(raw: Any, name: str) -> ExecutorPoolSpec:
    """The spec of ExecutorPool `name`; SpecError says what is wrong with it (the pool's
    status and Event: the problems of :func:`pool_spec_problems`, and how to fix them in
    the cluster)."""
    try:
        return ExecutorPoolSpec.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise SpecError(
            f"ExecutorPool {name!r}: {describe_validation_error(exc, ExecutorPoolSpec)}; fix "
            "its spec (kubectl edit executorpool " + name + ")"
        ) from None


def pool_spec_problems(raw: Any) -> list[tuple[str, str]]:
    """(path in the spec, sentence) of each problem of an ExecutorPool's spec (the path is
    empty for the spec itself); empty when :func:`parse_pool_spec` accepts it."""
    try:
        ExecutorPoolSpec.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        problems = validation_problems(exc, ExecutorPoolSpec)
        try:  # (the cohort's problems, said together by the pool's check: each apart here)
            spec = ExecutorPoolSpec.model_validate(
                raw if raw is not None else {}, context=NO_COHORT
            )
            every = spec.cohort_problems()
        except ValidationError:  # (a queue's value too: its cohort is checked all the same)
            every = _cohort_apart(raw)
            problems += [(p.partition(": ")[0], p.partition(": ")[2]) for p in every]
        if every and ("", "; ".join(every)) in problems:
            at = problems.index(("", "; ".join(every)))
            problems[at : at + 1] = [(p.partition(": ")[0], p.partition(": ")[2]) for p in every]
        return [(_named(path, raw), text) for path, text in problems]
    return []


def _cohort_apart(raw: Any) -> list[str]:
    """The cohort's problems of a spec whose queues have a bad value (so it does not
    validate): against its capacity if the rest of the spec reads, else names alone."""
    if not isinstance(raw, Mapping) or "queues" not in raw:
        return []
    rest = {k: v for k, v in raw.items() if k not in ("queues", "forecastArrivals")}
    try:
        room = ExecutorPoolSpec.model_validate(rest, context=NO_COHORT).room
    except ValidationError:
        room = None
    return queues_cohort_problems(raw["queues"], room)


def _named(path: str, raw: Any) -> str:
    """`path` with its queue's name after the queue's index (``queues[0][a].weight``), as
    a queues file's problems place it (`idlegate.sim.queues.queue_problems`)."""
    at = re.match(r"queues\[(\d+)\]", path)
    queues = raw.get("queues") if isinstance(raw, Mapping) else None
    if at is None or not isinstance(queues, list) or int(at[1]) >= len(queues):
        return path
    queue = queues[int(at[1])]
    name = queue.get("name") if isinstance(queue, Mapping) else None
    if not isinstance(name, str) or path[at.end() :].startswith(f"[{name}]"):
        return path  # (a queue problem's path has it already: `queue_problems`)
    return f"{at[0]}[{name}]{path[at.end() :]}"


def namespace_labels(namespace: Mapping[str, Any] | None) -> dict[str, str]:
    """The labels of a Namespace object as the API returns it (what a selector selects)."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def route(
    wanted: str | None,
    labels: Mapping[str, str],
    pools: Iterable[tuple[str, ExecutorPoolSpec]],
) -> str | None:
    """The pool a workflow lands in: `wanted` (its spec.pool) if that pool exists, else the
    first pool by name whose selector selects its namespace, else :data:`DEFAULT_POOL`;
    None when `wanted` names a pool that does not exist (the workflow waits)."""
    known = dict(pools)
    if wanted is not None:
        return wanted if wanted == DEFAULT_POOL or wanted in known else None
    for name in sorted(known):
        if selects(known[name].namespace_selector, labels):
            return name
    return DEFAULT_POOL


def pool_problems(obj: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """(field path, text) of what is wrong with ExecutorPool `obj` (``idlegate lint``): its
    name, its spec, and its policy's syntax and parameters, a planner's options and
    candidates included, as the operator checks them at start (`check_params`; whether the
    policy's model and history files load is the cluster's business: the pool's Ready
    condition says)."""
    from idlegate.policy import check_params  # (no torch, no model file loaded)

    out: list[tuple[str | None, str]] = []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if name == DEFAULT_POOL:
        out.append(("metadata.name", f"{DEFAULT_POOL!r} is the operator's implicit pool"))
    elif isinstance(name, str):
        try:
            check_pool_name(name)
        except SpecError as exc:
            out.append(("metadata.name", str(exc)))
    if isinstance(meta, Mapping) and meta.get("namespace"):
        out.append(("metadata.namespace", "an ExecutorPool is cluster-scoped; remove it"))
    raw = obj.get("spec")
    out.extend((f"spec.{p}" if p else "spec", text) for p, text in pool_spec_problems(raw))
    policy = raw.get("policy") if isinstance(raw, Mapping) else None
    if isinstance(policy, str) and policy:  # checked even beside other problems of the spec
        try:
            check_params(policy)
        except IdlegateError as exc:
            out.append(("spec.policy", str(exc)))
    return out
