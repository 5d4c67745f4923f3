"""The admission's reclaim: which running tasks a question's plan stops (issue 82, item 1),
the `AdmissionPlan.stop` the cluster applies (`Cluster.decide_once`).

Pure and clock-free, like `idlegate.sim.cluster`: it reads the pool (`PoolState`) and the
admission's usage, and answers; what it remembers is the no-thrash ledger's
(`idlegate.sim.reclaim_ledger`) and the stops asked and not yet carried out (`pending`).

Semantics, at each question of a pool where some queue's ``preemption`` is not ``Never``
(with every queue at ``Never`` it is never asked: today's behaviour, to the byte):

* *The claimant.* Of the queues whose settings allow a stop and that have a ready task,
  in the admission's order (priority, then lowest weighted dominant share), the first
  whose ready task of its highest priority (one of its stages of that shape: all of one
  shape are alike here) does not fit the free room now, the stops asked and not carried
  out counted as done. A queue whose task fits needs no stop this question.
* *The candidates* are the running tasks of the queues the rules name
  (`idlegate.sim.reclaim_rules.eligible`: the borrowing queues, or the claimant's own),
  read only from those queues: a task of a queue that neither borrows nor is the
  claimant's is never read.
* *The victims* are the ledger's choice (`idlegate.sim.reclaim_ledger.calm_victims`:
  cooldown, budget, grace) of the least work lost (`idlegate.sim.reclaim.choose_victims`),
  or with ``victims="kueue"`` the Kueue-like baseline's
  (`idlegate.sim.reclaim_baselines.kueue_victims`, under the same cooldown and budget).
  None found: the next claimant is tried; none at all, nothing is stopped.
* *Cooldown.* A stage's tasks are alike in the state machine, so a task stopped and run
  again is not told from its stage's other tasks. Each stop of a stage within the
  ledger's cooldown is taken to be run again by the first of the stage's tasks that
  started after it and is not another stop's: those tasks are no candidates until the
  stop's cooldown ends (the ledger's cooldown, per stop rather than per name). The
  ledger counts the stops for its budget.
* *Pending.* The simulator stops the victims at once; the operator evicts them, which
  takes their grace period, so a stop asked is *pending* until its task no longer runs
  (stopped, or ended) or `PENDING_FOR` seconds passed (an eviction refused for good):
  meanwhile its room counts as free for the claimants, so the same room is not asked
  for twice.
* On a pool whose nodes the driver tells (the operator's ``nodeSelector`` pools) nothing
  is stopped: where each task runs is the API's, not the state machine's (not built).

Cost: the choice is exact over the candidates (`choose_victims`), but it reads them
newest first and stops reading once no older one could be in a better choice: a task
started at s loses at least (now − s) executor-seconds, so once the best choice among
the newer ones loses less than that (and spares the young lent tasks the grace spares,
or none is left), every choice with an older one loses more. Checkpointed tasks, which
lose nothing, are read first. A question with no claimant, or no queue borrowing for a
``reclaim`` claimant, costs a pass over the queues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from idlegate.sim.reclaim import MILLI as LOSS_UNIT
from idlegate.sim.reclaim import Running, Victims, fits
from idlegate.sim.reclaim_baselines import kueue_victims
from idlegate.sim.reclaim_ledger import Calm, StopLedger, calm_victims
from idlegate.sim.reclaim_rules import BORROWING, RECLAIM, Claimant, Eligible, eligible
from idlegate.sim.reclaim_stop import checkpointed

if TYPE_CHECKING:
    from idlegate.sim.admission_types import PoolState
    from idlegate.sim.protocol import Stage
    from idlegate.sim.queues import QueueSpec

VICTIMS = ("least", "kueue")
"""How victims are chosen: idlegate's least work lost, or the Kueue-like baseline."""
PENDING_FOR = 300.0
"""Seconds a stop asked and not carried out counts as freeing its room (the module
docstring's *pending*)."""
FIRST = 16
"""Candidates read before the first choice (then twice as many each time)."""


class Reclaim(NamedTuple):
    """A plan's stops: the executors whose tasks to stop (`AdmissionPlan.stop`), each
    task's start, the queue that reclaims (its name), why (`reclaim_rules`' reason), the
    executor-seconds they lose, and the executors of the other candidates read, cheapest
    first (the operator tries them when an eviction is refused)."""

    executors: tuple[int, ...]
    starts: tuple[float, ...]
    queue: str
    reason: str
    lost: float
    spare: tuple[int, ...] = ()


class Reclaimer:
    """The reclaim phase of one pool's admission (the module docstring)."""

    def __init__(
        self,
        queues: Sequence[QueueSpec],
        dims: Sequence[str],
        victims: str = "least",
        calm: Calm | None = None,
    ) -> None:
        self.queues = tuple(queues)
        self.dims = tuple(dims)
        self.victims = victims
        self.ledger = StopLedger(calm)
        self.pending: dict[int, tuple[float, float, Stage]] = {}
        """Stops asked and not carried out: executor → (its task's start, when asked, its
        stage)."""
        self.restarts: dict[tuple[int, int], list[float]] = {}
        """Per stage (workflow id, index), when its tasks were stopped, within the
        cooldown (the module docstring's *cooldown*)."""
        self._demands: dict[Stage, dict[str, int]] = {}
        """Each running stage's demand by name, made once."""
        self.claiming = [q for q, spec in enumerate(queues) if not spec.preemption.never]
        """The queues whose settings may stop a task."""

    def copy(self) -> Reclaimer:
        """An independent copy (a forked cluster's admission)."""
        twin = object.__new__(Reclaimer)
        twin.__dict__.update(self.__dict__)
        twin.ledger = self.ledger.copy()
        twin.pending = dict(self.pending)
        twin.restarts = {k: list(v) for k, v in self.restarts.items()}
        return twin

    def plan(
        self,
        pool: PoolState,
        now: float,
        used: Sequence[Sequence[float]],
        nominal: Sequence[Sequence[float]],
        order: Sequence[int],
        claims: Mapping[int, tuple[Stage, int, bool]],
    ) -> Reclaim | None:
        """The stops of the question at `now` (None: none): `used` and `nominal` are each
        queue's, in `dims` order; `order` the claiming queues in the admission's order;
        `claims` each one's ready task of its highest priority (its stage, the tasks it
        starts at once, and whether the cohort lends what it needs beyond its quota)."""
        if pool.follows_nodes:
            return None
        self._settle(pool, now)
        dims = self.dims
        free = dict(pool.free_resources)
        placed = pool.placed_nodes()
        nodes: list[dict[str, int]] | None = None
        where: Mapping[int, int] = {}
        if placed is not None:
            rows, where = placed
            names = dims[1:]
            nodes = [{**dict(zip(names, row, strict=False)), "pods": row[-1]} for row in rows]
        for executor, (_start, _at, stage) in self.pending.items():
            amounts = _demand(stage, len(dims))
            for x, a in zip(dims, amounts, strict=True):
                free[x] = free.get(x, 0) + int(a)
                if nodes is not None and (n := where.get(executor)) is not None:
                    nodes[n][x] = nodes[n].get(x, 0) + int(a)
        usage = [{x: int(u) for x, u in zip(dims, row, strict=True)} for row in used]
        borrowing = {r for r, (u, n) in enumerate(zip(used, nominal, strict=True)) if _above(u, n)}
        for q in order:
            stage, tasks, lends = claims[q]
            one = _demand(stage, len(dims))
            need = {x: int(a) * tasks for x, a in zip(dims, one, strict=True) if a > 0}
            if nodes is None and fits(need, free, ()):
                continue
            if nodes is not None and any(fits(need, n, ()) for n in nodes):
                continue
            claimant = Claimant(q, stage.job.priority, need)
            settings = self.queues[q].preemption
            wanted = set(borrowing) - {q}
            if settings.within_queue == "LowerPriority":
                wanted.add(q)
            if not wanted:
                continue
            got = self._choose(pool, now, claimant, usage, wanted, lends, free, nodes, where)
            if got is not None:
                return got
        return None

    def _choose(
        self,
        pool: PoolState,
        now: float,
        claimant: Claimant,
        usage: Sequence[Mapping[str, int]],
        wanted: set[int],
        lends: bool,
        free: Mapping[str, int],
        nodes: list[dict[str, int]] | None,
        where: Mapping[int, int],
    ) -> Reclaim | None:
        """The victims for `claimant` among the running tasks of the `wanted` queues."""
        rows = pool.running_of(wanted)
        pending = self.pending
        cooling = self._cooling(rows, now)
        if pending or cooling:
            rows = [r for r in rows if r[1] not in pending and r[1] not in cooling]
        # checkpointed first (they lose nothing), then the newest first
        rows.sort(key=lambda r: (not checkpointed(r[2]), -r[0], r[1]))
        ledger, dims = self.ledger, self.dims
        made: list[Running] = []
        if self.victims == "kueue":
            made = [self._running(r, now, dims, where) for r in rows]
            rules = eligible(claimant, self.queues, usage, made, lends=lends)
            return self._kueue(claimant, rules, now, free)
        read = 0
        size = FIRST
        while True:
            upto = min(len(rows), size)
            made += [self._running(r, now, dims, where) for r in rows[read:upto]]
            read = upto
            rules = eligible(claimant, self.queues, usage, made, lends=lends)
            if nodes is None:
                got = calm_victims(ledger, claimant, rules, now, free=free)
            else:
                got = calm_victims(ledger, claimant, rules, now, nodes=nodes)
            if read == len(rows):
                break
            start, _e, stage = rows[read]
            if got is not None and not checkpointed(stage):
                floor = max(0, round((now - start) * LOSS_UNIT))
                spared = not any(ledger.young(t, claimant, now) for t in got.tasks)
                if got.lost < floor and spared:
                    break
            size *= 2
        return None if got is None else self._reclaim(got, rules, claimant, made, now)

    def _kueue(
        self, claimant: Claimant, rules: Eligible, now: float, free: Mapping[str, int]
    ) -> Reclaim | None:
        """The Kueue-like baseline's choice, under the ledger's cooldown and budget."""
        ledger = self.ledger
        left = ledger.left(now)
        if not left:
            return None
        ready = [t for t in rules.candidates if not ledger.cooling(t.task, now)]
        got = kueue_victims(
            claimant.need,
            ready,
            now,
            claimant.queue,
            free=free,
            limits=rules.limits,
            borrowed=rules.borrowed,
        )
        if got is None or not got.tasks or len(got.tasks) > left:
            return None
        return self._reclaim(got, rules, claimant, ready, now)

    def _reclaim(
        self,
        got: Victims,
        rules: Eligible,
        claimant: Claimant,
        read: Sequence[Running],
        now: float,
    ) -> Reclaim | None:
        """The plan's stops of a choice (None: an empty one, the task fits already)."""
        if not got.tasks:
            return None
        chosen = {id(t) for t in got.tasks}
        spare = sorted(
            (t for t in rules.candidates if id(t) not in chosen),
            key=lambda t: (t.loss(now), t.priority, -t.start),
        )
        reason = rules.reason(got.tasks[0])
        return Reclaim(
            executors=tuple(_executor(t) for t in got.tasks),
            starts=tuple(t.start for t in got.tasks),
            queue=self.queues[claimant.queue].name,
            reason=reason,
            lost=got.seconds,
            spare=tuple(_executor(t) for t in spare),
        )

    def _cooling(self, rows: Sequence[tuple[float, int, Stage]], now: float) -> set[int]:
        """The executors of `rows` whose tasks are stops run again, in their cooldown (the
        module docstring's *cooldown*)."""
        restarts, cool = self.restarts, self.ledger.calm.cooldown
        for key, times in list(restarts.items()):
            times[:] = [t for t in times if now < t + cool]
            if not times:
                del restarts[key]
        out: set[int] = set()
        if not restarts:
            return out
        by: dict[tuple[int, int], list[tuple[float, int]]] = {}
        for start, e, stage in rows:
            key = (stage.job.id, stage.index)
            if key in restarts:
                by.setdefault(key, []).append((start, e))
        for key, tasks in by.items():
            tasks.sort()
            i = 0
            for t in sorted(restarts[key]):  # (each stop: the first task started after it)
                while i < len(tasks) and tasks[i][0] < t:
                    i += 1
                if i == len(tasks):
                    break
                out.add(tasks[i][1])
                i += 1
        return out

    def _running(
        self,
        row: tuple[float, int, Stage],
        now: float,
        dims: Sequence[str],
        where: Mapping[int, int],
    ) -> Running:
        """A running task as a candidate (its ledger name: the module docstring)."""
        start, executor, stage = row
        job = stage.job
        demand = self._demands.get(stage)
        if demand is None:  # (one mapping per stage: `choose_victims` groups a stage's by it)
            if len(self._demands) > 4096:
                self._demands.clear()
            amounts = _demand(stage, len(dims))
            demand = {x: int(a) for x, a in zip(dims, amounts, strict=True) if a > 0}
            self._demands[stage] = demand
        return Running(
            task=(job.id, stage.index, executor, start),
            queue=job.queue,
            priority=job.priority,
            start=start,
            demand=demand,
            checkpointed=checkpointed(stage),
            node=where.get(executor),
            workflow=job.id,
            admitted=job.first_start,
        )

    def stopped(self, plan: Reclaim, pool: PoolState, now: float, carried: bool) -> None:
        """The driver stopped `plan`'s victims (`carried`), or asked for their stops (the
        operator's evictions): the ledger records them, and those asked are pending."""
        names = []
        for executor, start in zip(plan.executors, plan.starts, strict=True):
            stage = pool.stage_on(executor)
            if stage is None:
                continue
            names.append((stage.job.id, stage.index, executor, start))
            self.restarts.setdefault((stage.job.id, stage.index), []).append(now)
            if not carried:
                self.pending[executor] = (start, now, stage)
        self.ledger.stopped(names, now)

    def _settle(self, pool: PoolState, now: float) -> None:
        """Forget the pending stops whose task no longer runs, or asked too long ago."""
        pending = self.pending
        for executor, (start, at, _stage) in list(pending.items()):
            if not pool.runs(executor, start) or now - at >= PENDING_FOR:
                del pending[executor]


def _executor(task: Running) -> int:
    """The executor of a candidate `_running` made (its name: workflow, stage, executor,
    start)."""
    return int(task.task[2])  # type: ignore[index]


def _demand(stage: Stage, dims: int) -> list[float]:
    """One task's demand in the admission's order (a pod, then the pool's resources)."""
    need = stage.need
    return [LOSS_UNIT, *([0.0] * (dims - 1))] if need is None else [LOSS_UNIT, *need.amounts]


def _above(used: Sequence[float], nominal: Sequence[float]) -> bool:
    return any(u > n for u, n in zip(used, nominal, strict=True))


__all__ = ["BORROWING", "PENDING_FOR", "RECLAIM", "VICTIMS", "Reclaim", "Reclaimer"]
