"""The admission's reclaim: which running tasks a question's plan stops (issue 82, item 1),
the `AdmissionPlan.stop` the cluster applies (`Cluster.decide_once`).

Pure and clock-free, like `idlegate.sim.cluster`: it reads the pool (`PoolState`) and the
admission's usage, and answers; what it remembers is the no-thrash ledger's
(`idlegate.sim.reclaim_ledger`) and the stops asked and not yet carried out (`pending`).

Semantics, at each question of a pool where some queue's ``preemption`` is not ``Never``
(with every queue at ``Never`` it is never asked: today's behaviour, to the byte):

* *The claimant.* Of the queues whose settings allow a stop and that have a ready task,
  those whose ready task of its highest priority (one of its stages of that shape: all
  of one shape are alike here) does not fit the free room now, the stops asked and not
  carried out counted as done, are taken in the admission's order: a task past its wait
  bound first, then within its nominal quota before borrowing, then priority, then
  lowest weighted dominant share. One whose only setting is ``reclaim`` and whose task
  would take it beyond its nominal quota is no claimant (no rule lets it stop a task).
  The room a stop frees goes to the first of them (the admission serves it first), so
  while one's stops are declined (a verdict, lately) the claimants after it stop nothing:
  their stops would serve it, not them (issue 96: a queue behind another stopped task
  after task, each one's room taken by the first). They are told so (`still`). One that
  stops nothing for want of a victim, or that waits on its patience, lets the next be
  tried: the room the patient one waits for then comes to the next, which counts it
  as its room coming once the first is served (a queue with no ready task gives back
  the room of its tasks that end, below), so it stops once for both, where it would
  stop anyway, its victims having run less (issue 96: on `large` a steady team kept
  waiting behind one that waited on its own tasks, one after another, was held to a ρ
  of 1.48).
* *The candidates* are the running tasks of the queues the rules name
  (`idlegate.sim.reclaim_rules.eligible`: the borrowing queues, or the claimant's own),
  read only from those queues: a task of a queue that neither borrows nor is the
  claimant's is never read, nor one that started at this instant (it has run nothing).
* *Room coming, patience and pay* (`idlegate.sim.reclaim_patience`, the ledger's `Calm`):
  R is when the running tasks of those queues, of the queues with no ready task (their
  room is given back as they end), and of the claimant's own where it has fewer ready
  tasks than its quota has room for (else they only pass room between its own tasks) are
  expected to give its task the room without a stop, E when they give back all its queue
  lacks (`_lacks`). A claimant whose R is within what is left of its patience stops
  nothing, and the next claimant is tried; the driver asks the question again when its
  patience ends (`wake`, read by `Admission.next_bound`). Else a task is no victim where
  its stop would not pay: it saves at most E (and within its estimate its remaining),
  weighed against what it has run at `Calm.ending`, the saving by the claimant's `backlog`
  (`_ratio`). Neither holds for the Kueue-like victims. The claimant's wait is its queue's
  longest of that priority (`oldest_waiting`); its patience is at most its queue's wait
  bound, and past the bound neither the ending rule nor the cooldown spares a task.
* *The victims* are the ledger's choice (`idlegate.sim.reclaim_ledger.calm_victims`:
  cooldown, budget, grace) of the least work lost (`idlegate.sim.reclaim.choose_victims`),
  or with ``victims="kueue"`` the Kueue-like baseline's
  (`idlegate.sim.reclaim_baselines.kueue_victims`, under the same cooldown and budget).
  None found: the next claimant is tried; none at all, nothing is stopped.
* *Decided on forecasts.* A claimant whose queue says ``decide: Forecast`` has its
  victims judged before they are stopped, where the driver gave a judge (`judge`, the
  simulator's engine: `idlegate.sim.reclaim_forecast`): a verdict that declines stops
  nothing for it nor for the claimants after it (its task waits for the room as
  borrowed tasks end), and its queue is not judged again for `RECHECK` seconds; one
  that lets them go ahead rides on the plan (`Reclaim.verdict`).
  Without a judge (a fork, the operator) the rules decide; the operator then judges the
  stops asked off its loop (`idlegate.operator.core.judging`) and `withdraw`s those its
  verdict declines.
* *Cooldown.* A stage's tasks are alike in the state machine, so a task stopped runs
  again as the next task its stage launches (`Cluster.rerun_of`, kept by
  `idlegate.sim.reclaim_stop`): that task is no candidate until the ledger's cooldown
  from its stop has passed. The ledger counts the stops for its budget.
* *Pending.* The simulator stops the victims at once; the operator evicts them, which
  takes their grace period, so a stop asked is *pending* until its task no longer runs
  (stopped, or ended) or `PENDING_FOR` seconds passed (an eviction refused for good):
  meanwhile its room counts as free for the claimants, so the same room is not asked
  for twice. The ledger counts a stop when it is asked (the budget, the cooldown of
  the task asked for).
* *On nodes* (`PoolResources.reclaim_nodes`: the simulator's, or those a driver tells
  with where its running tasks are, `TasksOnNodes`: the operator's ``nodeSelector`` pools), the
  victims are all on one node where the claimant's task then fits (`choose_victims`'s
  nodes), among the nodes its task may use (`Need.allowed`). A node's room is its free
  amounts with the room of the stops pending on it, or, where more, the room its driver
  says pods being stopped still hold there (an eviction taken: the task is stopped, its
  pod ends within its grace period), so that room is not asked for twice; on told nodes
  its pods are at most the pool's free executors (a stop frees one too). The other
  candidates a driver may try instead (`Reclaim.spare`) are those on the same node.
  Told nodes whose driver does not say where tasks run stop nothing.

Cost: the choice is exact over the candidates (`choose_victims`), but it reads them as
the cluster keeps them, checkpointed first and then newest first (`running_newest`:
the busy executors in the order of their starts, kept as tasks start and end once a
reclaim first asks), and stops reading once no older one could be in a better choice:
a task started at s loses at least (now − s) executor-seconds, so once the best choice
among the newer ones loses less than that (and spares the young lent tasks the grace
spares), every choice with an older one loses more. So a question reads the newest
candidates, not every running task; one with no claimant, or no queue borrowing for a
``reclaim`` claimant, reads none. The room coming reads at most `SCAN` running tasks, for
the first claimant that does not fit (and the next only where that one found no victim).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from math import inf
from typing import TYPE_CHECKING, NamedTuple, Protocol

from idlegate.sim.reclaim import MILLI as LOSS_UNIT
from idlegate.sim.reclaim import Running, Victims, fits
from idlegate.sim.reclaim_baselines import kueue_victims
from idlegate.sim.reclaim_ledger import Calm, StopLedger, calm_victims
from idlegate.sim.reclaim_patience import backlog, ending, expected_left, room_after
from idlegate.sim.reclaim_rules import Claimant, Eligible, eligible

if TYPE_CHECKING:
    from idlegate.sim.admission_snapshot import QueueSnapshot
    from idlegate.sim.admission_types import PoolState
    from idlegate.sim.protocol import Scheduler, Stage
    from idlegate.sim.queues import QueueSpec
    from idlegate.sim.reclaim_verdict import ReclaimVerdict

VICTIMS = ("least", "kueue")
"""How victims are chosen: idlegate's least work lost, or the Kueue-like baseline."""
PENDING_FOR = 300.0
"""Seconds a stop asked and not carried out counts as freeing its room (the module
docstring's *pending*)."""
FIRST = 4
"""Candidates read before the first choice (then twice as many each time)."""
SCAN = 256
"""Running tasks a claimant's room coming reads at most, oldest first (of tasks alike, the
first to end): on a pool running more, one ending soon may be missed, and the claimant
then stops what the rules choose, as without patience."""
RECHECK = 30.0
"""Seconds a queue whose stops the judge declined is not judged again (its waiting task
meanwhile starts as borrowed tasks end, as with ``reclaim: Never``)."""


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
    verdict: ReclaimVerdict | None = None
    """A ``decide: Forecast`` queue's: which case let the stops go ahead, with both
    figures (`idlegate.sim.reclaim_forecast`); None: decided by the rules alone."""


class _Unfit(NamedTuple):
    """A claimant whose task does not fit the room (`Reclaimer._first_unfit`): its place
    in the admission's order, its queue, stage, the tasks it starts at once, what they
    need, and whether its task is past its queue's wait bound."""

    order: tuple[bool, bool, int, float, int]
    queue: int
    stage: Stage
    tasks: int
    need: dict[str, int]
    due: bool


class _Spare(NamedTuple):
    """Which running tasks a claimant's choice spares: those stopped within `cooldown`
    seconds, and by the ending rule at `ratio` (0: none), a stop saving at most `soon`
    seconds (`idlegate.sim.reclaim_patience.ending`). Past the claimant's wait bound
    none of them, as the bound would break by as much as a spared task has left."""

    cooldown: float
    ratio: float
    soon: float


class Queues(Protocol):
    """What the reclaim reads of the admission (`idlegate.sim.admission.Admission`): each
    queue's usage and nominal quota (in `dims` order), priority and weighted dominant
    share, its ready tasks' demand (`snapshot.pending`), and how many tasks of a demand
    it may start in all, borrowing included."""

    used: list[list[float]]
    nominal: list[list[float]]
    priority: list[int]
    waits_since: list[dict[Stage, float]]
    bound: list[float]
    snapshot: QueueSnapshot

    def share(self, q: int) -> float: ...

    def entitled_for(self, q: int, amounts: tuple[int, ...] | None) -> tuple[int, int]: ...


class Judge(Protocol):
    """Who decides a ``decide: Forecast`` queue's stops (`idlegate.sim.reclaim_forecast.
    ForecastJudge`): the pool, the rules' stops, the claimant's queue and the time."""

    def __call__(
        self, pool: PoolState, plan: Reclaim, queue: int, now: float
    ) -> ReclaimVerdict: ...


class JudgeMaker(Protocol):
    """How a driver makes a run's judge (`idlegate.sim.reclaim_forecast.forecast_judge`):
    from a copy of the pool's scheduler, the run's seed, whether tasks draw their
    durations (`Fidelity.wave_durations`) and the no-thrash settings."""

    def __call__(self, scheduler: Scheduler, seed: int, waves: bool, calm: Calm) -> Judge: ...


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
        self.pending: dict[int, tuple[float, float, Stage, str]] = {}
        """Stops asked and not carried out: executor → (its task's start, when asked, its
        stage, the queue they are for)."""
        self._demands: dict[Stage, dict[str, int]] = {}
        """Each running stage's demand by name, made once."""
        self.claiming = [q for q, spec in enumerate(queues) if not spec.preemption.never]
        """The queues whose settings may stop a task."""
        self.judge: Judge | None = None
        """The judge of the ``decide: Forecast`` queues' stops, set by the driver (the
        simulator's engine); None: the rules decide them too (a fork's, the operator's)."""
        self.verdicts: list[ReclaimVerdict] = []
        """The judge's verdicts, declined ones included (the benchmark counts them)."""
        self.declined: dict[int, float] = {}
        """Per queue whose stops the judge declined, until when it is not judged again (the
        simulator's judge, or the operator's verdicts: `withdraw`); a copy has none."""
        self.wake = inf
        """When the patience of a claimant that waits for room (`_patient`) ends: the
        driver asks the question again then (`Admission.next_bound`); inf: none waits."""
        self.still: dict[int, str] = {}
        """Per claimant queue that does not fit, why the last question stopped nothing for
        it (its patience, a declined verdict, the budget), recorded where it is decided:
        its wait's reason says it (`idlegate.sim.admission_entries`, issue 93)."""
        self.refusals: dict[int, str] = {}
        """Per queue, why its last stop asked was refused (a PodDisruptionBudget's no: the
        operator's `refused`), until a stop is asked for it again."""

    @property
    def forecasts(self) -> bool:
        """Whether a queue's stops are decided on forecasts (``decide: Forecast``)."""
        return any(self.queues[q].preemption.decide == "Forecast" for q in self.claiming)

    def copy(self) -> Reclaimer:
        """An independent copy (a forked cluster's admission: its stops are decided by the
        rules, a replay judging none of its own)."""
        twin = object.__new__(Reclaimer)
        twin.__dict__.update(self.__dict__)
        twin.ledger = self.ledger.copy()
        twin.pending, twin.refusals = dict(self.pending), dict(self.refusals)
        twin.judge, twin.verdicts, twin.declined = None, [], {}
        return twin

    def plan(
        self, pool: PoolState, now: float, queues: Queues, claims: Sequence[tuple[int, Stage, int]]
    ) -> Reclaim | None:
        """The stops of the question at `now` (None: none): `claims` are the claiming
        queues' ready tasks of their highest priority (queue, stage, the tasks it starts
        at once); of those that do not fit, in the admission's order (`queues`: past its
        bound, within its nominal quota, priority, then weighted dominant share), the
        first whose stops are chosen, none after one whose stops were declined (the room
        a stop frees goes to it)."""
        self.wake, self.still = inf, {}
        if not self.ledger.left(now):  # (the budget spent: no choice fits)
            per = self.ledger.calm.per_minute
            spent = f"the pool's budget of {per} stop(s) a minute is spent"
            self.still = {q: spent for q, _stage, _tasks in claims}
            return None
        self._settle(pool, now)
        if not claims:
            return None
        free = dict(pool.free_resources)
        placed = pool.reclaim_nodes()
        if placed is None and pool.follows_nodes:
            return None  # (told nodes, and not where their tasks run: none chosen on one)
        nodes = None if placed is None else self._rooms(placed, free["pods"], pool.follows_nodes)
        where = _nowhere if placed is None else placed[1]
        for _start, _at, stage, _for in self.pending.values():
            for x, a in zip(self.dims, _demand(stage, len(self.dims)), strict=True):
                free[x] = free.get(x, 0) + int(a)
        unfit = self._unfit(now, queues, claims, free, nodes, where)
        for i, claimant in enumerate(unfit):
            got, waits = self._claim(pool, now, queues, claimant, free, nodes, where)
            if got is not None:
                return got
            if waits:  # (declined: the room a later claimant's stop frees would go to it)
                for other in unfit[i + 1 :]:
                    self.still[other.queue] = _behind(self.queues[claimant.queue].name)
                return None
        return None

    def _unfit(
        self,
        now: float,
        queues: Queues,
        claims: Sequence[tuple[int, Stage, int]],
        free: Mapping[str, int],
        nodes: list[dict[str, int]] | None,
        where: Callable[[int], int | None],
    ) -> list[_Unfit]:
        """The `claims` whose task does not fit the room, in the admission's order
        (`plan`)."""
        dims, used, nominal = self.dims, queues.used, queues.nominal
        unfit = []
        for q, stage, tasks in claims:
            one = _demand(stage, len(dims))
            settings = self.queues[q].preemption
            beyond = any(
                u + a * tasks > n for u, a, n in zip(used[q], one, nominal[q], strict=True)
            )
            if beyond and settings.within_queue == "Never" and settings.borrow_below is None:
                continue  # (only `reclaim`: beyond its nominal quota it stops none)
            need = {x: int(a) * tasks for x, a in zip(dims, one, strict=True) if a > 0}
            room = [free] if nodes is None else _usable(nodes, where, stage)[0]
            if not any(fits(need, r, ()) for r in room):
                due = queues.waits_since[q].get(stage, now) + queues.bound[q] <= now
                order = (not due, beyond, -queues.priority[q], queues.share(q), q)
                unfit.append(_Unfit(order, q, stage, tasks, need, due))
        return sorted(unfit)

    def _claim(
        self,
        pool: PoolState,
        now: float,
        queues: Queues,
        first: _Unfit,
        free: Mapping[str, int],
        nodes: list[dict[str, int]] | None,
        where: Callable[[int], int | None],
    ) -> tuple[Reclaim | None, bool]:
        """The stops for `first`, a claimant whose task does not fit (`_unfit`), and
        whether the claimants after it wait for it: none while its queue's stops were
        lately declined (they wait), or while running tasks give it the room within its
        patience (they do not: the room it waits for is theirs once it is served); else
        the victims chosen, judged where its queue decides so (None: none; declined:
        they wait)."""
        q, stage, need = first.queue, first.stage, first.need
        used, nominal = queues.used, queues.nominal
        borrowing = {r for r, (u, n) in enumerate(zip(used, nominal, strict=True)) if _above(u, n)}
        settings = self.queues[q].preemption
        wanted = borrowing - {q}
        if settings.within_queue == "LowerPriority":
            wanted.add(q)
        if not wanted:
            return None, False
        if now < (until := self.declined.get(q, -inf)):
            self.still[q] = _declined(until - now)
            return None, True  # (declined lately: its task waits for borrowed tasks to end)
        cooldown = 0.0 if first.due else self.ledger.calm.cooldown
        spare = _Spare(cooldown, 0.0, inf)  # (no ending rule: past its bound, or Kueue-like)
        if self.victims == "least":
            claim = (q, stage, need)
            soon, waits = self._room_coming(pool, now, queues, claim, wanted, free, nodes, where)
            if waits:  # (the room comes within its patience: the next claimant is tried)
                return None, False
            if not first.due:
                spare = _Spare(cooldown, self._ratio(queues, q), soon)
        key = None if stage.need is None else stage.need.amounts
        lent = queues.entitled_for(q, key)[1] >= first.tasks
        mine, on = (None, where) if nodes is None else _usable(nodes, where, stage)
        usage = [{x: int(u) for x, u in zip(self.dims, row, strict=True)} for row in used]
        claimant = Claimant(q, stage.job.priority, need)
        got = self._choose(pool, now, claimant, usage, wanted, lent, free, mine, on, spare)
        if got is None:
            self.still[q] = NONE_CHOSEN
        elif self.judge is not None and settings.decide == "Forecast":
            got = self._judged(pool, got, q, now)
            return got, got is None
        return got, False

    def _room_coming(
        self,
        pool: PoolState,
        now: float,
        queues: Queues,
        claim: tuple[int, Stage, Mapping[str, int]],
        wanted: set[int],
        free: Mapping[str, int],
        nodes: list[dict[str, int]] | None,
        where: Callable[[int], int | None],
    ) -> tuple[float, bool]:
        """When the running tasks (the oldest `SCAN` of `wanted`, of the queues with no
        ready task, and of the claimant's queue) give the claimant `claim` (its queue,
        stage and need) back what a stop would, and whether it waits for them: where room
        for its task comes back within what is left of its patience (its end is then
        `wake`, and why is said).

        What a stop gives back is room for the tasks its queue lacks (`_lacks`). Without
        it that room comes back as the other queues' tasks end: its own tasks' ends only
        pass room between its own tasks, unless it has fewer ready tasks than its quota
        has room for. So a stop saves at most the wait for the last of it
        (`idlegate.sim.reclaim_patience`, *ending*), and the patience waits for the first."""
        q, stage, need = claim
        rooms, on = ([free], where) if nodes is None else _usable(nodes, where, stage)
        lacks, ready = (1, True) if nodes is not None else self._lacks(queues, q, stage)
        giving, coming = [], []
        idle = {r for r, n in enumerate(queues.snapshot.waiting) if n == 0 and r != q}
        for start, executor, task in islice(pool.running_oldest(wanted | idle | {q}), SCAN):
            ends = expected_left(task.duration, now - start)
            # (its own tasks' ends give it room only where its ready tasks are fewer)
            if ends is not None and (ready or task.job.queue != q or q in wanted):
                giving.append((ends, self._demand_of(task), on(executor)))
                coming.append((ends, task))  # (one started now gives its room back too)
        soon = room_after(need, rooms, giving)
        back = room_after({x: a * lacks for x, a in need.items()}, rooms, giving)
        since = queues.waits_since[q].get(stage, now)
        patience = min(self.ledger.calm.patience, queues.bound[q])  # (a shorter bound holds)
        left = since + patience - now
        if left <= 0 or soon > left:
            return back, False
        self.wake = min(self.wake, since + patience)
        ending = [task for ends, task in coming if ends <= soon]
        own = sum(1 for task in ending if task.job.queue == q)
        mine = f", {own} of them its own queue's, counted as room coming" if own else ""
        self.still[q] = (
            f"its patience holds {left:.0f} s more, as {len(ending)} running task(s) are "
            f"expected to end within it and give the room{mine}"
        )
        return back, True

    def _ratio(self, queues: Queues, q: int) -> float:
        """The ending rule's ratio for claimant `q`'s stops: `Calm.ending` over what an
        executor-second given back is worth to it (`backlog`: its task's workflow, and its
        other waiting workflows over the executors it runs). One for every victim: their
        queues run on quota they borrow, so their own waiting workflows weigh nothing
        (`idlegate.sim.reclaim_patience`, *ending*)."""
        others = max(0, queues.snapshot.waiting[q] - 1)
        worth = backlog(others, queues.used[q][0] / LOSS_UNIT)  # (pods: the first resource)
        return self.ledger.calm.ending / worth

    def _lacks(self, queues: Queues, q: int, stage: Stage) -> tuple[int, bool]:
        """How many tasks of `stage`'s demand queue `q` lacks: those its nominal quota
        still has room for, at most its ready tasks (at least one, the claimant's); and
        whether its ready tasks are what bounds it."""
        quota = ready = inf
        for u, n, p, a in zip(
            queues.used[q],
            queues.nominal[q],
            queues.snapshot.pending[q],
            _demand(stage, len(self.dims)),
            strict=True,
        ):
            if a > 0:
                quota, ready = min(quota, (n - u) // a), min(ready, p // a)
        lacks = min(quota, ready)
        return (max(1, int(lacks)) if lacks < inf else 1), ready <= quota

    def waking(self, now: float) -> float:
        """When a claimant waiting for room stops waiting, after `now` (`wake`; inf: none)."""
        return self.wake if self.wake > now else inf

    def _judged(self, pool: PoolState, got: Reclaim, q: int, now: float) -> Reclaim | None:
        """`got` with the judge's verdict, or None where it declines (`q` is then not
        judged again for `RECHECK` seconds)."""
        assert self.judge is not None
        verdict = self.judge(pool, got, q, now)
        self.verdicts.append(verdict)
        if not verdict.stops:
            self.declined[q] = now + RECHECK
            self.still[q] = _declined(RECHECK)
            return None
        return got._replace(verdict=verdict)

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
        where: Callable[[int], int | None],
        spare: _Spare,
    ) -> Reclaim | None:
        """The victims for `claimant` among the running tasks of the `wanted` queues, but
        those `spare` spares (the cooldown and the ending rule)."""
        cool, ratio, soon, pending = spare.cooldown, spare.ratio, spare.soon, self.pending
        rows = (
            r
            for r in pool.running_newest(wanted, now)
            if r[1] not in pending
            and ((t := pool.rerun_of(r[1])) is None or now >= t + cool)
            and (r[3] or not ending(r[2].duration, now - r[0], ratio, soon))
        )
        ledger = self.ledger
        if self.victims == "kueue":
            made = [self._running(r, now, where) for r in rows]
            rules = eligible(claimant, self.queues, usage, made, lends=lends)
            return self._kueue(claimant, rules, now, free)
        made = []
        size = FIRST
        ahead = next(rows, None)  # (the next row unread: its start bounds the rest's loss)
        while True:
            while ahead is not None and len(made) < size:
                made.append(self._running(ahead, now, where))
                ahead = next(rows, None)
            rules = eligible(claimant, self.queues, usage, made, lends=lends)
            if nodes is None:
                got = calm_victims(ledger, claimant, rules, now, free=free)
            else:
                got = calm_victims(ledger, claimant, rules, now, nodes=nodes)
            if ahead is None:
                break
            if got is not None and not ahead[3]:
                floor = max(0, round((now - ahead[0]) * LOSS_UNIT))
                spared = not any(ledger.young(t, claimant, now) for t in got.tasks)
                if got.lost < floor and spared:
                    break
            size *= 2
        return None if got is None else self._reclaim(got, rules, claimant, now)

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
        return self._reclaim(got, rules, claimant, now)

    def _reclaim(
        self,
        got: Victims,
        rules: Eligible,
        claimant: Claimant,
        now: float,
    ) -> Reclaim | None:
        """The plan's stops of a choice (None: an empty one, the task fits already)."""
        if not got.tasks:
            return None
        chosen, node = {id(t) for t in got.tasks}, got.node
        spare = sorted(  # (on nodes, those on the victims' node: elsewhere they give no room)
            (t for t in rules.candidates if id(t) not in chosen and node in (None, t.node)),
            key=lambda t: (t.loss(now), t.priority, -t.start, _executor(t)),
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

    def _running(
        self,
        row: tuple[float, int, Stage, bool],
        now: float,
        where: Callable[[int], int | None],
    ) -> Running:
        """A running task as a candidate (its ledger name: the module docstring)."""
        start, executor, stage, kept = row
        job = stage.job
        return Running(
            task=(job.id, stage.index, executor, start),
            queue=job.queue,
            priority=job.priority,
            start=start,
            demand=self._demand_of(stage),
            checkpointed=kept,
            node=where(executor),
            workflow=job.id,
            admitted=job.first_start,
        )

    def _demand_of(self, stage: Stage) -> dict[str, int]:
        """What a task of `stage` holds by name (one mapping per stage: `choose_victims`
        groups a stage's tasks by it)."""
        demand = self._demands.get(stage)
        if demand is None:
            if len(self._demands) > 4096:
                self._demands.clear()
            dims = self.dims
            amounts = _demand(stage, len(dims))
            demand = {x: int(a) for x, a in zip(dims, amounts, strict=True) if a > 0}
            self._demands[stage] = demand
        return demand

    def _rooms(
        self,
        placed: tuple[Sequence[list[int]], Callable[[int], int | None], list[list[int]]],
        executors: int,
        told: bool,
    ) -> list[dict[str, int]]:
        """Each node's room as the claimants count it (the module docstring, *On nodes*):
        its free amounts and pods, with the room of the stops pending on it, or the room
        its driver says pods being stopped hold there, whichever is more; on told nodes,
        pods no more than the pool's free `executors` (milli) and those pending there."""
        rows, where, back = placed
        names, width = self.dims[1:], len(self.dims)
        held = [[0] * width for _ in rows]  # (each node's pending: its resources, then pods)
        for executor, (_start, _at, stage, _for) in self.pending.items():
            if (n := where(executor)) is not None and n < len(held):
                pods, *amounts = _demand(stage, width)
                held[n] = [h + int(a) for h, a in zip(held[n], (*amounts, pods), strict=True)]
        rooms = []
        for n, row in enumerate(rows):
            more = (
                held[n] if n >= len(back) else [max(*p) for p in zip(held[n], back[n], strict=True)]
            )
            room = [r + m for r, m in zip(row, more, strict=True)]
            pods = min(room[-1], executors + held[n][-1]) if told else room[-1]
            rooms.append({**dict(zip(names, room, strict=False)), "pods": pods})
        return rooms

    def stopped(self, plan: Reclaim, pool: PoolState, now: float, carried: bool) -> None:
        """The driver stopped `plan`'s victims (`carried`), or asked for their stops (the
        operator's evictions): the ledger records them, and those asked are pending."""
        names = []
        for q in self._index(plan.queue):  # (a stop asked for it again)
            self.refusals.pop(q, None)
        for executor, start in zip(plan.executors, plan.starts, strict=True):
            stage = pool.stage_on(executor)
            if stage is None:
                continue
            names.append((stage.job.id, stage.index, executor, start))
            if not carried:
                self.pending[executor] = (start, now, stage, plan.queue)
        self.ledger.stopped(names, now)

    def withdraw(self, plan: Reclaim, asked: float, until: float | None = None) -> None:
        """`plan`'s stops, asked at `asked` (`stopped`) and not carried out, are withdrawn
        (the operator's judge declined them, or they no longer hold): pending no more, the
        ledger forgets them, and with `until` their queue is not judged again before it."""
        names = []
        for executor in plan.executors:
            entry = self.pending.get(executor)
            if entry is not None and entry[1] == asked:
                start, _at, stage, _for = self.pending.pop(executor)
                names.append((stage.job.id, stage.index, executor, start))
        self.ledger.withdraw(names, asked)
        if until is not None:
            for q in self._index(plan.queue):
                self.declined[q] = until

    def refused(self, executor: int, queue: str, why: str) -> None:
        """The stop asked of the task on `executor` for `queue` was refused (`why`: a
        PodDisruptionBudget's no): pending no more (nothing is being stopped), and its
        queue's wait says so until a stop is asked for it again."""
        self.pending.pop(executor, None)
        for q in self._index(queue):
            self.refusals[q] = why

    def still_for(self, q: int) -> str | None:
        """Why nothing is being stopped for queue `q`'s waiting task, if it was said: the
        refusal of its last stop asked, else why the last question stopped nothing."""
        return self.refusals.get(q) or self.still.get(q)

    def _index(self, queue: str) -> Iterator[int]:
        return (i for i, spec in enumerate(self.queues) if spec.name == queue)

    def stopping_for(self, queue: str) -> int:
        """How many stops asked for `queue` are not carried out yet (its ready task waits
        for them: `idlegate.sim.admission_entries`, the `Reclaiming` reason)."""
        return sum(1 for p in self.pending.values() if p[3] == queue)

    def _settle(self, pool: PoolState, now: float) -> None:
        """Forget the pending stops whose task no longer runs, or asked too long ago."""
        pending = self.pending
        for executor, (start, at, _stage, _for) in list(pending.items()):
            if not pool.runs(executor, start) or now - at >= PENDING_FOR:
                del pending[executor]


NONE_CHOSEN = (
    "no running task the rules let it stop would give it the room now: they spare a task "
    "near its end, one stopped lately, and on nodes one whose node would not then hold it"
)
"""Why a claimant's question stopped nothing when no victims were found."""


def _behind(first: str) -> str:
    return (
        f"queue {first} comes first in the admission's order and would take the room a "
        "stop frees, so only its claim may stop a task now"
    )


def _declined(left: float) -> str:
    return (
        f"the forecast declined its stops (they would cost more than they save), and they "
        f"are not judged again for {left:.0f} s"
    )


def oldest_waiting(
    since: Mapping[Stage, float], stage: Stage, skip: Callable[[Stage], bool]
) -> Stage:
    """The claimant's task: of its queue's ready stages of `stage`'s priority, the one
    waiting longest (`since`: when each began to wait, in that order), so that the
    patience reads the longest wait and not whichever stage a group holds first (a
    queue cycling short tasks of one workflow would otherwise never stop a task for
    another workflow waiting past its bound); `stage` where none is read. `skip`: a stage
    no node could hold (`Admission._never`)."""
    priority = stage.job.priority
    for s in since:
        if s.waits and s.job.priority == priority and not skip(s):
            return s
    return stage


def _executor(task: Running) -> int:
    """The executor of a candidate `_running` made (its name: workflow, stage, executor,
    start)."""
    return int(task.task[2])  # type: ignore[index]


def _nowhere(executor: int) -> int | None:
    """No node (a pool without nodes)."""
    return None


def _usable(
    nodes: list[dict[str, int]], where: Callable[[int], int | None], stage: Stage
) -> tuple[list[dict[str, int]], Callable[[int], int | None]]:
    """The nodes `stage`'s task may use (its `Need.allowed`; the simulator's nodes bar
    none) and the node, among them, each executor's task runs on."""
    allowed = None if stage.need is None else stage.need.allowed
    if allowed is None:
        return nodes, where
    at = {n: i for i, n in enumerate(allowed)}
    return [nodes[n] for n in allowed], lambda e: None if (n := where(e)) is None else at.get(n)


def _demand(stage: Stage, dims: int) -> list[float]:
    """One task's demand in the admission's order (a pod, then the pool's resources)."""
    need = stage.need
    return [LOSS_UNIT, *([0.0] * (dims - 1))] if need is None else [LOSS_UNIT, *need.amounts]


def _above(used: Sequence[float], nominal: Sequence[float]) -> bool:
    return any(u > n for u, n in zip(used, nominal, strict=True))


__all__ = [
    "NONE_CHOSEN",
    "PENDING_FOR",
    "RECHECK",
    "VICTIMS",
    "Judge",
    "JudgeMaker",
    "Queues",
    "Reclaim",
    "Reclaimer",
    "oldest_waiting",
]
