"""Queues of a shared pool: what a team owns of it, may borrow and lends (`QueueSpec`).

A pool's queues form one *cohort* (Kueue's word): each has a nominal quota, a vector of
the pool's resources in the units of an ExecutorPool's ``resources`` (``pods`` are its
executors), and the cohort lends what a queue leaves idle to the others:

* ``nominal``: what the queue is entitled to whenever it has work. A resource it does not
  name is not limited by its quota (only by the pool).
* ``borrowingLimit``: how much beyond its nominal quota it may use of what others leave
  idle (absent: no limit but the cohort's idle quota).
* ``lendingLimit``: how much of its idle nominal quota others may borrow (absent: all of
  it); the rest stays free for it even while it is idle.
* ``weight``: its share of borrowed quota, by weighted dominant-resource share.
* ``priority``: among queues that borrow, a higher one borrows first.
* ``waitBound``: seconds a ready task of the queue may wait before it is started first and
  room is reserved for it (`idlegate.sim.admission`'s wait bound).
* ``namespaces``: the operator routes a workflow of these namespaces to the queue (when
  the workflow names no queue itself).
* ``preemption`` (`Preemption`; being built: read and checked, not yet applied): which
  running tasks a ready task of the queue may stop to start, ``reclaim`` (from queues
  above their nominal, while it is within its own: ``Never``, ``LowerPriority``, ``Any``),
  ``withinQueue`` (its own queue's tasks of lower priority: ``Never``, ``LowerPriority``)
  and ``borrowBelow`` (while it borrows, other queues' borrowed tasks of lower priority
  than it and below this one; absent: never). All absent: never, today's behaviour. The
  victims are chosen by `idlegate.sim.reclaim`, by the rules of `idlegate.sim.reclaim_rules`;
  ``decide`` says whether the rules' stops are carried out as they are (``Rules``, the
  default) or only where a replay of the pool's future says they pay (``Forecast``:
  `idlegate.sim.reclaim_forecast`; the simulator's only, the operator refuses it yet).

The admission stage that applies them is `idlegate.sim.admission`. A workflow joins
(`queue_of`, in the simulator and in the operator alike): the queue it names (a
DagWorkflow's ``spec.queueName``, a workload's `JobArrival.queue`), else the one its label
``idlegate.io/queue`` names, else the queue whose ``namespaces`` include its namespace,
else the pool's default queue (the one named ``default``, else the first). One spec parser (`queues_from`) serves the CLI's
``--queues FILE`` (`read_queues`), workload files and the operator's pools.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import inf, isfinite
from pathlib import Path
from typing import Any

import yaml

from idlegate.documents import YamlLoader, YamlRefusal
from idlegate.errors import IdlegateError
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import not_a_field
from idlegate.textfiles import read_text

DEFAULT_QUEUE = "default"
"""The queue of a workflow that names none and whose namespace no queue selects."""
QUEUE_LABEL = "idlegate.io/queue"
"""The label by which a workflow of any kind asks for its queue (`queue_of`)."""

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUEUE_KEYS = (
    "name",
    "nominal",
    "borrowingLimit",
    "lendingLimit",
    "weight",
    "priority",
    "waitBound",
    "namespaces",
    "preemption",
)
"""The keys a queue takes (a ``--queues`` file's and an ExecutorPool's ``queues``)."""
RECLAIM = ("Never", "LowerPriority", "Any")
"""A queue's ``preemption.reclaim`` settings (Kueue's ``reclaimWithinCohort``)."""
WITHIN_QUEUE = ("Never", "LowerPriority")
"""A queue's ``preemption.withinQueue`` settings (Kueue's ``withinClusterQueue``)."""
DECIDE = ("Rules", "Forecast")
"""A queue's ``preemption.decide`` settings: the rules' stops as they are, or only those a
replay with and without them says pay (`idlegate.sim.reclaim_forecast`)."""
_PREEMPTION_KEYS = ("reclaim", "withinQueue", "borrowBelow", "decide")


def check_queue_name(name: object) -> None:
    """IdlegateError unless `name` may name a queue (a DNS label, as Kubernetes names)."""
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 63:
        raise IdlegateError(
            f"queue name {name!r} is not a DNS label; use lowercase letters, digits and '-', "
            "e.g. data-eng"
        )


INT64_MAX = 2**63 - 1
"""The largest integer of the CRD (int64): a priority beyond it is refused by the API
server, so lint and the queues file refuse it too."""


def written(value: object) -> str:
    """`value` as a user wrote it in YAML: None is an empty value (``~``, ``null`` or
    nothing), a boolean one of the words YAML reads as one (said "None is not a reclaim
    setting", "True is not ...")."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"{str(value).lower()} (YAML reads yes, no, on, off, true and false so)"
    return repr(value)


def whole_problem(value: object) -> str | None:
    """Why `value` is not a whole number the CRD holds (int64), the end of a sentence that
    names it (None: nothing): the one check of a queue's priorities."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be a whole number"
    if abs(value) > INT64_MAX:
        return f"is beyond the CRD's 64-bit integers (±{INT64_MAX})"
    return None


def preemption_problem(key: str, value: object) -> str | None:
    """What is wrong with `value` for ``preemption.KEY`` of a queue, a sentence without
    its place (None: nothing): the one check of the queues file's parser (`queue_from`)
    and of an ExecutorPool's ``spec.queues[]`` (`idlegate.api.pool_spec`)."""
    if key == "reclaim" and value not in RECLAIM:
        return (
            f"{written(value)} is not a reclaim setting; use Never (the default: lent quota comes "
            "back only as borrowed tasks end), LowerPriority (stop borrowed tasks of lower "
            "priority) or Any (stop any borrowed task)"
        )
    if key == "withinQueue" and value not in WITHIN_QUEUE:
        return (
            f"{written(value)} is not a withinQueue setting; use Never (the default) or "
            "LowerPriority (stop the queue's own tasks of lower priority)"
        )
    if key == "decide" and value not in DECIDE:
        return (
            f"{written(value)} is not a decide setting; use Rules (the default: stop what the rules "
            "choose) or Forecast (stop it only where a replay of the pool says it pays)"
        )
    if key == "borrowBelow" and (why := whole_problem(value)) is not None:
        what = "is not a priority" if why.startswith("must") else why
        return (
            f"{written(value)} {what}; give a whole number within ±{INT64_MAX} (a borrowing "
            "task may stop other queues' borrowed tasks of priority below it), or leave it "
            "out for never"
        )
    return None


@dataclass(frozen=True)
class Preemption:
    """Which running tasks a ready task of a queue may stop to start (the module
    docstring's ``preemption``). The default is never, on all three counts."""

    reclaim: str = "Never"
    within_queue: str = "Never"
    borrow_below: int | None = None
    """Absent (None): a borrowing task stops nothing."""
    decide: str = "Rules"
    """``Rules``: the rules' stops as they are; ``Forecast``: only those that pay."""

    def __post_init__(self) -> None:
        for key, value in self.to_dict().items():
            problem = preemption_problem(key, value)
            if problem is not None:
                raise IdlegateError(f"preemption.{key}: {problem}")

    @property
    def never(self) -> bool:
        """Whether it stops nothing, ever (the default: today's behaviour; ``decide``
        alone stops nothing)."""
        return replace(self, decide="Rules") == NEVER

    def to_dict(self) -> dict[str, Any]:
        """The settings that are not the default, as `preemption_from` reads them."""
        out: dict[str, Any] = {}
        if self.reclaim != "Never":
            out["reclaim"] = self.reclaim
        if self.within_queue != "Never":
            out["withinQueue"] = self.within_queue
        if self.borrow_below is not None:
            out["borrowBelow"] = self.borrow_below
        if self.decide != "Rules":
            out["decide"] = self.decide
        return out


NEVER = Preemption()
"""A queue's preemption when it gives none: it stops nothing."""


def preemption_problems(data: object, where: str) -> list[str]:
    """Every problem of a queue's ``preemption`` mapping, each a sentence led by its place
    (`where`, then the key): lint says them all, `preemption_from` raises the first."""
    if data is None:
        return []
    if not isinstance(data, Mapping):
        return [
            f"{where}: give a mapping of {', '.join(_PREEMPTION_KEYS)}, e.g. "
            "preemption: {reclaim: LowerPriority}"
        ]
    unknown = [
        f"{where}.{k}: {not_a_field(k, _PREEMPTION_KEYS)}"
        for k in sorted(set(data) - set(_PREEMPTION_KEYS), key=str)
    ]
    checked = ((key, preemption_problem(key, value)) for key, value in data.items())
    return unknown + [f"{where}.{key}: {problem}" for key, problem in checked if problem]


def preemption_from(data: object, where: str) -> Preemption:
    """A queue's ``preemption`` mapping (`where`: its place, for the sentences)."""
    problems = preemption_problems(data, where)
    if problems:
        raise IdlegateError(problems[0])
    if not isinstance(data, Mapping):
        return NEVER
    return Preemption(
        reclaim=data.get("reclaim", "Never"),
        within_queue=data.get("withinQueue", "Never"),
        borrow_below=data.get("borrowBelow"),
        decide=data.get("decide", "Rules"),
    )


@dataclass(frozen=True)
class QueueSpec:
    """One queue of a pool's cohort (the module docstring says what each field means)."""

    name: str
    nominal: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Milli-units of each resource named (a 0 is a quota of none, not no quota)."""
    borrowing_limit: Mapping[str, int] | None = field(default=None, hash=False)
    lending_limit: Mapping[str, int] | None = field(default=None, hash=False)
    weight: float = 1.0
    priority: int = 0
    wait_bound: float = inf
    namespaces: tuple[str, ...] = ()
    preemption: Preemption = NEVER

    def __post_init__(self) -> None:
        check_queue_name(self.name)
        where = f"queue {self.name!r}"
        for problem in _spec_problems(where, self.weight, self.priority, self.wait_bound):
            raise IdlegateError(problem)
        for problem in _lending_problems(where, self.lending_limit, self.nominal):
            raise IdlegateError(problem)

    def to_dict(self) -> dict[str, Any]:
        """The spec as `queues_from` reads it (JSON-ready)."""
        out: dict[str, Any] = {"name": self.name, "nominal": _texts(self.nominal)}
        if self.borrowing_limit is not None:
            out["borrowingLimit"] = _texts(self.borrowing_limit)
        if self.lending_limit is not None:
            out["lendingLimit"] = _texts(self.lending_limit)
        if self.weight != 1.0:
            out["weight"] = self.weight
        if self.priority:
            out["priority"] = self.priority
        if self.wait_bound != inf:
            out["waitBound"] = self.wait_bound
        if self.namespaces:
            out["namespaces"] = list(self.namespaces)
        if not self.preemption.never:
            out["preemption"] = self.preemption.to_dict()
        return out


def _spec_problems(where: str, weight: object, priority: object, bound: object) -> list[str]:
    """What is wrong with a queue's weight, priority and wait bound, each a sentence led by
    `where`: `QueueSpec` raises the first, `queue_problems` says them all."""
    out = []
    if isinstance(weight, bool) or not (
        isinstance(weight, int | float) and isfinite(weight) and weight > 0
    ):
        out.append(f"{where}: weight {weight!r} must be a number > 0, e.g. 1")
    if (why := whole_problem(priority)) is not None:
        out.append(f"{where}: priority {written(priority)} {why}")
    if isinstance(bound, bool) or not isinstance(bound, int | float) or not bound > 0:
        why = " (a bound of 0 would start every task first)" if bound == 0 else ""
        out.append(
            f"{where}: waitBound {bound!r} must be a number of seconds > 0{why}; leave it "
            "out for no bound"
        )
    return out


def _lending_problems(
    where: str, lending: Mapping[str, int] | None, nominal: Mapping[str, int] | None
) -> list[str]:
    """A lendingLimit above the nominal quota, said after `where` (none: nothing)."""
    lends, owns = lending or {}, nominal or {}
    over = [n for n in lends if lends[n] > owns.get(n, 0)]
    if not over:
        return []
    return [
        f"{where}: lendingLimit of {', '.join(over)} is above the nominal quota; a queue "
        "lends at most what it owns"
    ]


def queue_from(data: Mapping[str, Any], where: str = "queues") -> QueueSpec:
    """One queue from its mapping (the keys of the module docstring); IdlegateError with
    the first of its `queue_problems`."""
    problems: list[str] = []
    queue = _read_queue(data, where, problems)
    if queue is None or problems:
        raise IdlegateError(problems[0])
    return queue


def queue_problems(
    data: Any, where: str = "queues", pool: Mapping[str, int] | None = None
) -> list[str]:
    """Every problem of a queues document (a list of queues, or ``{queues: [...]}``), each
    a sentence led by its place (``queues[0][a].preemption.reclaim``): what `idlegate lint`
    says, where `queues_from` raises the first. Each queue's keys are checked apart, then
    the cohort (`cohort_problems`, against `pool` if given) even when a queue has a bad
    value: its name and quotas still count, so that one bad value hides nothing else."""
    try:
        items = _queue_items(data, where)
    except IdlegateError as exc:
        return [str(exc)]
    problems: list[str] = []
    queues = [_read_queue(item, f"{where}[{i}]", problems) for i, item in enumerate(items)]
    return problems + _cohort_problems(list(enumerate(queues)), pool, where)


def queues_cohort_problems(
    data: Any, pool: Mapping[str, int] | None = None, where: str = "queues"
) -> list[str]:
    """The cohort's problems alone of a queues document whose queues may have bad values
    (`queue_problems` without theirs): for a pool whose queues another reader checks."""
    try:
        items = _queue_items(data, where)
    except IdlegateError:
        return []
    queues = [_read_queue(item, f"{where}[{i}]", []) for i, item in enumerate(items)]
    return _cohort_problems(list(enumerate(queues)), pool, where)


def _read_queue(data: Any, where: str, problems: list[str]) -> QueueSpec | None:
    """One queue from its mapping, each of its problems added to `problems` (a sentence
    led by its place); with problems, a stand-in of its name and quotas alone for the
    cohort's checks (None: not even those read)."""
    if not isinstance(data, Mapping):
        problems.append(f"{where}: a queue is a mapping with a name and a nominal quota")
        return None
    before = len(problems)
    name = data.get("name")
    at = f"{where}[{name}]" if isinstance(name, str) else where  # (as a pool's: its name)
    problems.extend(
        f"{at}.{key}: {not_a_field(key, QUEUE_KEYS)}"
        for key in sorted(set(data) - set(QUEUE_KEYS), key=str)
    )
    if not isinstance(name, str):
        problems.append(f"{where}: every queue needs a name, e.g. name: data-eng")
        return None
    named = True
    try:
        check_queue_name(name)
    except IdlegateError as exc:
        problems.append(f"{where}: {exc}")
        named = False

    def vector(key: str) -> dict[str, int] | None:
        value = data.get(key)
        if value is None:
            return None
        # (names and quantities checked, and none past Kubernetes' cap: read as the cap, a
        # quota of 1e30 pods would be quoted back as 9223372036854775807)
        try:
            parsed = ResourceVector.capacity(value, f"{at}.{key}", "a quota within the pool")
        except IdlegateError as exc:
            problems.append(str(exc))
            return None
        return {name: parsed.get(name, 0) for name in value}  # (a 0 kept: a limit of none)

    nominal, borrowing, lending = (vector(k) for k in ("nominal", "borrowingLimit", "lendingLimit"))
    bound = data.get("waitBound", inf)
    if isinstance(bound, str):
        problems.append(f"{at}.waitBound: {bound!r} must be a number of seconds, e.g. 600")
    weight, priority = data.get("weight", 1.0), data.get("priority", 0)
    problems += _spec_problems(at, weight, priority, inf if isinstance(bound, str) else bound)
    namespaces = data.get("namespaces", ())
    if (
        not isinstance(namespaces, Sequence)
        or isinstance(namespaces, str)
        or not all(isinstance(n, str) for n in namespaces)
    ):
        problems.append(f"{at}.namespaces: give a list of namespace names")
        namespaces = ()
    problems += preemption_problems(data.get("preemption"), f"{at}.preemption")
    lends = _lending_problems(at, lending, nominal)
    problems += lends
    if len(problems) > before:  # (a stand-in for the cohort's checks: name and quotas)
        return (
            None
            if not named
            else QueueSpec(
                name=name,
                nominal=nominal or {},
                borrowing_limit=borrowing,
                lending_limit=None if lends else lending,
                namespaces=tuple(namespaces),
            )
        )
    return QueueSpec(
        name=name,
        nominal=nominal or {},
        borrowing_limit=borrowing,
        lending_limit=lending,
        weight=weight,
        priority=priority,
        wait_bound=bound,
        namespaces=tuple(namespaces),
        preemption=preemption_from(data.get("preemption"), f"{at}.preemption"),
    )


def _queue_items(data: Any, where: str) -> Sequence[Any]:
    """The queues' mappings of a queues document (a list, or ``{queues: [...]}``)."""
    if isinstance(data, Mapping) and "queues" in data:
        data = data["queues"]
    if not isinstance(data, Sequence) or isinstance(data, str) or not data:
        raise IdlegateError(
            f"{where}: give a non-empty list of queues, each a '- name: …' item, e.g. "
            "- {name: team-a, nominal: {pods: 10}}"
        )
    return data


def queues_from(data: Any, where: str = "queues") -> tuple[QueueSpec, ...]:
    """A pool's queues from a list of mappings (or ``{queues: [...]}``), names unique;
    IdlegateError with the first problem (`queue_problems` says them all)."""
    queues = tuple(
        queue_from(item, f"{where}[{i}]") for i, item in enumerate(_queue_items(data, where))
    )
    check_cohort(queues, where=where)
    return queues


def check_cohort(
    queues: Iterable[QueueSpec],
    pool: Mapping[str, int] | None = None,
    where: str = "queues",
    *,
    counted: Iterable[str] | None = None,
) -> None:
    """IdlegateError with every problem of `cohort_problems` at once (joined by "; "), so
    that a pool's condition and a command's error name them all, not the first."""
    problems = cohort_problems(queues, pool, where, counted=counted)
    if problems:
        raise IdlegateError("; ".join(problems))


def cohort_problems(
    queues: Iterable[QueueSpec],
    pool: Mapping[str, int] | None = None,
    where: str = "queues",
    *,
    counted: Iterable[str] | None = None,
) -> list[str]:
    """Every problem of a cohort, each a sentence led by `where`: names unique, each
    namespace in one queue, and with `pool` (its capacity, pods included) quotas naming
    only its resources and summing to at most it. With `counted` instead (the resources a
    pool that follows its nodes counts; pods always), only the names are checked: its
    capacity comes and goes with its nodes, so no sum can be. All of them, not the first:
    a user who fixes one learns of the next at once (lint, the pool's condition)."""
    return _cohort_problems(list(enumerate(queues)), pool, where, counted)


def _cohort_problems(
    indexed: Sequence[tuple[int, QueueSpec | None]],
    pool: Mapping[str, int] | None,
    where: str,
    counted: Iterable[str] | None = None,
) -> list[str]:
    """`cohort_problems` of the queues at their places in the document (None: a queue
    not even named, left out), so that a problem of one says which."""
    queues = [(i, q) for i, q in indexed if q is not None]
    names = [q.name for _, q in queues]
    problems = [
        f"{where}: two queues are named {dup!r}; give each its own name"
        for dup in dict.fromkeys(n for n in names if names.count(n) > 1)
    ]
    seen: dict[str, str] = {}
    for _, q in queues:
        for ns in q.namespaces:
            if ns in seen:
                problems.append(
                    f"{where}: namespace {ns!r} is selected by queues {seen[ns]!r} and "
                    f"{q.name!r}; a namespace routes to one queue"
                )
            else:
                seen[ns] = q.name
    if counted is not None:
        dims = ("pods", *(n for n in counted if n != "pods"))
        problems += _counted_problems(queues, dims, where)
    if pool is None:
        return problems
    problems += _counted_problems(queues, pool, where)
    total = sum((ResourceVector(q.nominal) for _, q in queues), ResourceVector())
    problems += [
        f"{where}: the queues' nominal quotas of {name} add up to {_texts(total)[name]}, more "
        f"than the pool's {_texts(pool)[name]}; lower a quota or grow the pool"
        for name in total
        if name in pool and total[name] > pool[name]
    ]
    return problems


def check_counted(queues: Iterable[QueueSpec], names: Iterable[str]) -> None:
    """IdlegateError naming every quota of a resource not among `names` (what the pool
    counts, pods included): `counted_problems`."""
    problems = counted_problems(queues, names)
    if problems:
        raise IdlegateError("; ".join(problems))


def counted_problems(
    queues: Iterable[QueueSpec], names: Iterable[str], where: str = "queues"
) -> list[str]:
    """Each quota naming a resource not among `names` (what the pool counts, pods
    included): on a `resources` pool and on one that follows its nodes alike, a quota of
    what the pool does not count could never be used."""
    return _counted_problems(list(enumerate(queues)), names, where)


def _counted_problems(
    queues: Sequence[tuple[int, QueueSpec]], names: Iterable[str], where: str
) -> list[str]:
    """`counted_problems` of the queues at their positions (``queues[1][etl].nominal``)."""
    names = tuple(names)
    problems = []
    for i, q in queues:
        for key, alias in (
            ("nominal", "nominal"),
            ("borrowing_limit", "borrowingLimit"),
            ("lending_limit", "lendingLimit"),
        ):
            missing = [n for n in getattr(q, key) or () if n not in names]
            if missing:
                problems.append(
                    f"{where}[{i}][{q.name}].{alias}: the pool does not count "
                    f"{' or '.join(missing)} (only {', '.join(names)}), so a quota of "
                    f"{'it' if len(missing) == 1 else 'them'} could never be used; remove "
                    f"{'it' if len(missing) == 1 else 'them'}"
                )
    return problems


def _texts(amounts: Mapping[str, int]) -> dict[str, str]:
    """Milli-units as the quantities' texts (a 0 as "0")."""
    return {n: ResourceVector({n: v}).to_list().get(n, "0") for n, v in amounts.items()}


def queue_of(
    queues: Sequence[QueueSpec],
    namespace: str | None = None,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> int:
    """The position of the queue a workflow joins (the module docstring's order): `name`
    (the queue it names), else its `labels`' ``idlegate.io/queue``, else the queue whose
    namespaces include its `namespace`, else the default one. A name `queues` lacks
    raises IdlegateError (the operator waits for it: `idlegate.api.queueing.placement`)."""
    if name is None and labels:
        name = labels.get(QUEUE_LABEL)
    if name is not None:
        return queue_index(queues, name)
    if namespace is not None:
        for i, q in enumerate(queues):
            if namespace in q.namespaces:
                return i
    return queue_index(queues, None)


def queue_index(queues: Sequence[QueueSpec], name: str | None) -> int:
    """The position of the queue named `name` (None: the default one, the first queue
    named ``default`` else the first); an unknown name raises IdlegateError."""
    names = [q.name for q in queues]
    if name is None:
        return names.index(DEFAULT_QUEUE) if DEFAULT_QUEUE in names else 0
    if name not in names:
        raise IdlegateError(
            f"queue {name!r} does not exist; the pool's queues are {', '.join(names)}"
        )
    return names.index(name)


def read_queues(path: Path | str) -> tuple[QueueSpec, ...]:
    """The queues of the file at `path`; IdlegateError naming the file for a missing or
    unreadable one, or a bad queue."""
    where = str(path)
    text = read_text(
        path, "queues file", "give a list of queues, e.g. - {name: a, nominal: {pods: 4}}"
    )
    try:
        data = yaml.load(text, Loader=YamlLoader)  # (a key given twice: an error)
    except YamlRefusal as exc:
        raise IdlegateError(exc.at(where)) from None
    except yaml.YAMLError as exc:
        raise IdlegateError(
            f"{where} is not YAML or JSON ({' '.join(str(exc).split())}); give a list of "
            "queues, e.g. - {name: team-a, nominal: {pods: 10}}"
        ) from None
    return queues_from(data, where=where)
