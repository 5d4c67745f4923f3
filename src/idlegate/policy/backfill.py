"""Backfilling with a reservation (EASY) for the job-priority baselines on a resource pool.

On a pool that counts resources beyond pods a stage can be runnable and not fit: its
tasks ask more CPU, memory or GPUs than is free. A priority rule (`fifo`, `lcfs`, `sjf`,
`sjf-cp`, `srpt`) then goes down its order to the first job whose stage fits, so a stage
that fits now is never starved by one that does not (`launchable`). Left at that, the
first job in the order that does not fit, the *head*, could wait forever behind smaller
tasks that keep the pool busy. EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001)
bounds that wait, and `backfill_decision` follows it:

* The head's *reservation* is the earliest time its next task (a gang's: all its tasks)
  fits, from the estimated ends of the running tasks (`shadow`): an executor's stage
  runs on for its remaining tasks shared among its executors, each taking the stage's
  estimated seconds per task. *Extra* is what stays free at that time beyond the head's
  need, pods included.
* A later job's stage may start only if it does not delay the reservation: its
  remaining tasks, on as many executors as fit now, end by the reservation (cap K), or
  it takes no more than the extra (its cap: the tasks the extra holds).

On the simulator's nodes (``--nodes``) the head's tasks must also fit nodes: a task end
gives its own node its room back, the reservation is when nodes hold the head, and a
later stage may not take the extra where it would start on a node the head waits for.

Only the head is protected, as in EASY; a driver view without `running_tasks` (no
estimate of when anything ends) gets no reservation. A pods-only pool never comes here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from math import ceil, inf

from idlegate.policy.drf import pool_capacity
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Job, Need, Stage
from idlegate.sim.resources import MILLI


def head_stage(stages: Iterable[Stage]) -> Stage:
    """Of a job's runnable `stages` (`view.runnable(job)`, not empty), the one it would
    launch if it fitted: the largest bottom level, ties to the lowest index (the
    heuristics' within-job rule)."""
    return min(stages, key=lambda s: (-s.bottom_level, s.index))


def _tasks_at_once(stage: Stage) -> int:
    """Tasks the stage must start together: all of a gang's left, else one."""
    return stage.tasks - stage.launched if stage.gang else 1


def _amounts(stage: Stage, size: int) -> list[int]:
    return [0] * size if stage.need is None else list(stage.need.amounts)


@dataclass(frozen=True, slots=True)
class Reservation:
    """The head's earliest start (`at`) and what stays free then beyond its need:
    executors (`pods`) and milli-units of each resource of the pool (`extra`); on the
    simulator's nodes, the nodes the head would start on then (`reserved`)."""

    at: float
    pods: int
    extra: tuple[int, ...]
    reserved: frozenset[int] = frozenset()

    def cap(self, view: ClusterView, stage: Stage) -> int | None:
        """The cap under which `stage` may start without delaying the reservation, or
        None if it may not start now."""
        left = stage.available - stage.launched
        size = len(self.extra)
        amounts = _amounts(stage, size)
        free = _free_amounts(view, size)
        now_fit = min(
            [view.free_executors, left] + [f // a for f, a in zip(free, amounts, strict=True) if a]
        )
        if now_fit >= 1 and view.now + ceil(left / now_fit) * stage.duration <= self.at:
            return view.num_executors
        within = min(
            [self.pods, left] + [e // a for e, a in zip(self.extra, amounts, strict=True) if a]
        )
        if self.reserved and stage.need is not None:
            within = min(within, _off_reserved(view, stage.need.amounts, within, self.reserved))
        if within < 1 or (stage.gang and within < left):
            return None
        return stage.job.held + within


def _off_reserved(
    view: ClusterView, amounts: tuple[int, ...], tasks: int, reserved: frozenset[int]
) -> int:
    """How many of `tasks` tasks of `amounts`, placed now on the simulator's nodes as the
    pool places them (`idlegate.sim.pool.packed`), start before one would take a node the
    head has reserved."""
    placed = view.placed_nodes()  # type: ignore[attr-defined]
    nodes = [list(n) for n in placed[0]]
    for k in range(tasks):
        at = view.node_for(amounts, nodes)  # type: ignore[attr-defined]
        if at is None or at in reserved:
            return k
        _take(nodes[at], amounts, -1)
    return tasks


def _take(node: list[int], amounts: Sequence[int], sign: int) -> None:
    """One task of `amounts` off `node` (its free amounts, then pods; sign -1) or back."""
    for i, a in enumerate(amounts):
        node[i] += sign * a
    node[-1] += sign * MILLI


def _free_amounts(view: ClusterView, size: int) -> list[int]:
    free = view.free_resources  # type: ignore[attr-defined]
    return [free[n] for n in view.resource_names][:size]  # type: ignore[attr-defined]


def shadow(view: ClusterView, head: Stage, capacity: tuple[int, ...]) -> Reservation:
    """The head's reservation: when its tasks fit, from the running tasks' estimated
    ends (infinite, with no extra limit, if they never would)."""
    size = len(capacity)
    count = _tasks_at_once(head)
    need = [a * count for a in _amounts(head, size)]
    pods = view.free_executors
    free = _free_amounts(view, size)
    running = getattr(view, "running_tasks", None)
    if running is None:
        return Reservation(inf, view.num_executors, capacity)
    ends = []
    for executor, stage, start in running():
        waves = 1 + ceil((stage.available - stage.launched) / max(stage.executors, 1))
        ends.append((max(view.now, start + waves * stage.duration), executor, stage))
    ends.sort(key=lambda item: item[0])
    # on the simulator's nodes the head starts only where nodes hold it: each task end
    # gives its node its room back
    placed = getattr(view, "placed_nodes", lambda: None)()
    nodes = [] if placed is None or head.need is None else [list(n) for n in placed[0]]
    each = None if head.need is None else Need(head.need.amounts, [], [])

    def short() -> bool:
        if pods < count or any(f < n for f, n in zip(free, need, strict=True)):
            return True
        return bool(nodes) and each is not None and sum(map(each.on, nodes)) < count

    at = view.now
    items = iter(ends)
    while short():
        step = next(items, None)
        if step is None:
            return Reservation(inf, view.num_executors, capacity)
        at, executor, stage = step
        pods += 1
        free = [f + a for f, a in zip(free, _amounts(stage, size), strict=True)]
        if nodes and placed is not None and (i := placed[1].get(executor)) is not None:
            _take(nodes[i], _amounts(stage, size), 1)
    reserved: set[int] = set()
    for _ in range(count if nodes and each is not None else 0):
        i = view.node_for(each.amounts, nodes)  # type: ignore[attr-defined,union-attr]
        if i is not None:
            reserved.add(i)
            _take(nodes[i], each.amounts, -1)  # type: ignore[union-attr]
    extra = tuple(f - n for f, n in zip(free, need, strict=True))
    return Reservation(at, pods - count, extra, frozenset(reserved))


def backfill_decision(
    view: ClusterView,
    jobs: Iterable[Job],
    best: Callable[[list[Stage], int], Stage | None],
    launch: Callable[[Stage, int], Decision],
) -> Action | None:
    """The decision of a priority rule over `jobs` (in its order) on a resource pool:
    the first job's stage that fits, cap K, until the head; after it only stages that
    do not delay the head's reservation. None on a pods-only pool (the rule's own path).

    `best(stages, free)` is the rule's within-job choice among a job's stages the view
    shows and `launch(stage, cap)` its decision (`heuristics.best_stage`,
    `heuristics.launch_decision`).
    """
    capacity = pool_capacity(view)
    if capacity is None:
        return None
    free, runnable = view.free_executors, view.runnable
    reservation: Reservation | None = None
    for job in jobs:
        if not (stages := runnable(job)):
            continue
        stage = best(stages, free)
        if reservation is None:
            if stage is not None:
                return launch(stage, view.num_executors)
            reservation = shadow(view, head_stage(stages), capacity)
            continue
        if stage is not None and (cap := reservation.cap(view, stage)) is not None:
            return launch(stage, cap)
    return WAIT
