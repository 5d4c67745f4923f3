"""The admission stage: whose ready tasks may start now, in front of the pool's policy.

Pure and clock-free, like `idlegate.sim.cluster`, which asks it (``Cluster.admission``)
in both clocks: the simulator's engine and the operator's core. With no admission (one
queue, no quotas) the cluster runs exactly as before. With one, each question of a
decision round is one cycle of the numbered pipeline below (as Kueue's scheduling cycle:
snapshot, nominate, order, admit): the admission reads the pool (`PoolState`) and answers
with a plan (`idlegate.sim.admission_plan.AdmissionPlan`: what may start, each queue's
caps, why the rest waits); the cluster asks its policy with the plan's views
(`idlegate.sim.admission_view`) and applies the answer within the plan. The admission
changes nothing of the pool and calls nothing of it back; every rule, the learned policy
and the portfolio decide unchanged among what a view shows.

Semantics (mode ``queues``, idlegate's; the queues are `idlegate.sim.queues.QueueSpec`):

* *Usage* U_q is the demand (a pod each, plus what the pool counts beyond pods) of the
  queue's running tasks. A queue is *hungry* while it has a runnable stage.
* A queue's *claim* on the cohort is max(U_q, min(N_q, U_q + P_q), N_q − L_q) (N:
  nominal, L: lending limit, all of N when absent; P: the demand of its ready tasks not
  started): idle quota is lent, and comes back, as far as its owner's ready tasks need
  it, by not starting further borrowed tasks; running tasks are stopped only where a
  queue's ``preemption`` allows (the reclaim phase, 0 below).
* A task of queue q with demand a may start *within its nominal quota* if U_q + a ≤ N_q,
  and *borrowing* if U_q + a ≤ N_q + B_q (B: borrowing limit) and Σ_{r≠q} claim_r + U_q + a
  fits the cohort (the pool's capacity as the cluster last told it, `set_capacity`, or
  the quotas' sum if smaller), on every resource a quota names. Whether it fits the free
  resources (and a node) stays the cluster's rule.

A question's cycle (`Cluster.decide_once`; 1 to 7 are the admission's phases, `open`,
whose names are the code's; 8 and 9 the cluster's). 0, ``reclaim``, comes first where a
queue's ``preemption`` allows a stop (`idlegate.sim.reclaim_plan`): a plan of stops alone,
applied by the cluster, and the question is asked again (`reopen`).

1. ``snapshot``: read the jobs that changed (their runnable stages by shape, the demand
   of their ready tasks, when each stage began to wait). A deliberate idle slot ends at
   its queue's wait bound: the admission names those past it (`idle_over`), the cluster
   ends them (`Cluster.idle_expired`) and the snapshot reads their jobs again.
2. ``claims``: each queue's claim, and per queue the others' claims on the cohort.
3. ``entitlement``: per queue and shape, the tasks it may start within its nominal quota
   and in all (borrowing included); a shape its queue may not start has its reason here
   (`Reason.BORROWING_LIMIT`, `Reason.COHORT_FULL`). Kept per queue until its claims or
   the others' move.
4. ``wait bound``: a stage's oldest ready task has waited since its stage became runnable
   or its previous task started, whichever is later (a deliberate idle slot counts as
   waiting). Past its queue's bound the task is *overdue*: it starts before anything
   else as soon as it fits within its queue's entitlement (the *forced* decision, made
   without the policy, raises its job's cap by what it starts). If it is entitled but the
   free resources do not hold it, room is reserved as EASY backfilling reserves it for
   its head job: another task starts only if it leaves that room free or its estimated
   end is before the *shadow time* (when the running tasks' estimated ends free the
   room). If its queue is at its entitlement, the queue's other stages wait behind it
   (`Reason.RESERVATION`). A task no node of the pool could hold even empty
   (`Cluster.never_fits`) is never overdue: it reserves nothing (`Reason.NO_NODE_FITS`).
5. ``serve``: the queues served, in order: those with a stage startable within their
   nominal quota, by priority then lowest weighted dominant share (max over resources of
   U_q / cohort, over its weight); only when there are none, the one borrowing queue of
   highest priority, then lowest share, which may start the tasks that keep its share
   at most the next rival's (progressive filling, at least one task). Another queue's
   stage beyond its nominal quota waits (`Reason.QUOTA`).
6. ``priority``: within a served queue, only the stages of its workflows of the highest
   priority among those it may start (`Reason.PRIORITY`). Phases 4 to 6 end in the
   question's `plan`: the forced decision, or the queues served and the shapes each may
   start with their tasks; the holds they wrote; the reservation; and what to stop first
   (`AdmissionPlan.stop`: the reclaim phase's alone).
7. ``fit``: of those, what the reservation leaves (`Reason.RESERVATION`) and what the
   free executors and resources hold (`Reason.NO_NODE_FITS`, `Reason.FREE_RESOURCES`);
   read per stage (`AdmissionPlan.room`), as the phase decides per stage.
8. ``ask`` (the cluster): the forced decision is applied without the policy. Else the
   policy is asked of the plan's views (`views`), one served queue after another until
   it answers: for queue q a `QueueView` whose jobs are q's, showing the stages the plan
   lets start (`runnable(job)`), and whose pool is q's entitlement now (nominal, or in
   the borrowing phase its usage plus what it may borrow, at most the pool), so a rule's
   caps and shares are over what the queue may use and a flood in one queue cannot
   shrink another's workflows' caps. One queue with no quota is shown the whole pool (a
   `PoolView`: its jobs, the pool), so it runs as no queues, bit for bit. The baselines,
   ``pooled`` and a scheduler that forks the pool (``needs_cluster``, the lookahead
   planner) are shown the `PoolView` once; a fork is of the pool as it is, its copy of
   the admission holding back what this one does.
9. ``apply`` (the cluster, `Cluster.decide_once`): the answer's cap is cut to the tasks
   the plan lets its stage start; a stage it lets none start is refused
   (`IllegalDecisionError`, nothing changes); what started is told to the admission
   (`use`, `started`). The next question opens a new cycle.

Why scoped views rather than one question over every queue's allowed stages: a rule's
caps come from the jobs and the pool it is shown (fair's ceil(K / n)); shown the whole
pool, a steady team's workflows were capped by the flood's count (ρ 4.75 with fair on a
flood of 100, 0.75 scoped: docs/queues.md), and the team alone on its quota, which ρ
compares with, is exactly what the view shows.

Why a plan and views rather than the jobs' stages hidden while the policy is asked: the
jobs stay the pool's truth for every index (the shapes, shares and orders
`Cluster.touch` keeps, the snapshot), so a question touches no job it did not change, a
fork copies the pool as it is, and a reader of the plan reads what was decided, not a
state put back after it. A policy reads a job's stages through its view
(`ClusterView.runnable`); an index over the pool answers the first job in its order with
a stage shown that fits, as a pass over the shown stages would.

The API a driver reads (the operator's status, conditions, Events, metrics, lint):

* `Cluster.admission_result()` (`result`): one `AdmissionResult` per question (made once,
  kept while the state is the same), read from the holds the phases wrote as they
  decided (`idlegate.sim.admission_entries`): per queue (`QueueResult`) an `Entry` per
  workflow with a stage that waits, in the order the admission will start them (a
  position each for those not started), with what it may start or each stage's `Verdict`
  (its `Reason`, the limit that held it, a sentence), its usage, borrowed and lent
  amounts, share and oldest wait; `AdmissionResult.of(job)` is one workflow's entry and
  `hold_of(stage)` one stage's. Nothing works a reason or a position out again.
* A pool without queues is read through the same code: `Admission.alone` is its one
  queue with no quota (its entries; its decisions too while a workflow of a priority
  other than 0 is in it: `idlegate.sim.queued`).
* What it is told: `touch` (a job changed: the cluster's `touch` calls it), `use` and
  `started` (tasks started or ended), `set_capacity` (the cluster's `capacity_changed`, on
  every capacity a driver tells it: nodes read, added, removed). A driver that changes a
  job's `queue` or `priority` after `add_job` touches it (`Cluster.touch`).

Baselines, for `compare` (``admission?mode=…:BASE``, `idlegate.sim.admission_baselines`):

* ``kueue``: a workflow is admitted whole (Kueue's Workload): it reserves its widest
  stage's demand (all its tasks at once, at most its queue's nominal quota) against its
  queue's nominal quota plus what it may borrow, in arrival order with later ones
  admitted when the head does not fit (BestEffortFIFO); its tasks start only within its
  reservation, in the policy's order. Generous to Kueue: a reservation of every pod of a
  workflow could never admit one wider than its quota.
* ``drf``: plain dominant-resource fairness across queues: one task per question, for
  the queue with a startable stage of the lowest weighted dominant share; no quotas.
* ``pooled``: idlegate's queues with the policy asked of the whole pool (every queue's
  allowed stages at once, caps over every workflow and the pool's size): the admission
  before the policy was scoped to the queue, for the figures of docs/queues.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import inf
from typing import TYPE_CHECKING, Any

from idlegate.errors import IdlegateError
from idlegate.sim import admission_baselines as baselines
from idlegate.sim.admission_baselines import MODES
from idlegate.sim.admission_entries import (
    BLOCKED,
    PRIORITY,
    Entries,
    first_limit,
    forced_hold,
    quota_holds,
    reserved_hold,
)
from idlegate.sim.admission_ledger import Usage
from idlegate.sim.admission_plan import BORROW, CLOSED, NOMINAL, AdmissionPlan, Reserve
from idlegate.sim.admission_result import MANY, AdmissionResult, Reason, Verdict
from idlegate.sim.admission_snapshot import Group, QueueSnapshot, group_of, need_of
from idlegate.sim.admission_view import PoolView, QueueView, Views
from idlegate.sim.protocol import Decision, Job, Stage, launchable
from idlegate.sim.queues import QueueSpec, check_counted
from idlegate.sim.reclaim_ledger import Calm
from idlegate.sim.reclaim_plan import VICTIMS, Reclaimer, oldest_waiting
from idlegate.sim.resources import MILLI, ResourceVector

if TYPE_CHECKING:
    from idlegate.sim.admission_types import PoolState


class Admission(Usage, Entries, Views):
    """A pool's queues and what they use: the module docstring's stage, asked by the
    cluster at every question (`idle_over`, `open`, `plan`, `views`, `may_go_on`), told
    what changed (`touch`, `use`, `started`, `set_capacity`), read by `result`. It reads
    the pool (`PoolState`) and changes nothing of it."""

    def __init__(
        self,
        queues: Sequence[QueueSpec],
        capacity: ResourceVector,
        resource_names: Sequence[str],
        mode: str = "queues",
        victims: str = "least",
        calm: Calm | None = None,
    ) -> None:
        if mode not in MODES:
            raise IdlegateError(f"admission mode {mode!r} is unknown; use {', '.join(MODES)}")
        if not queues:
            raise IdlegateError("an admission needs at least one queue")
        self.queues = tuple(queues)
        self.mode = mode
        self.ours = mode in ("queues", "pooled")
        """idlegate's queues (``pooled``: with the policy asked of the whole pool)."""
        if victims not in VICTIMS:
            raise IdlegateError(f"victims {victims!r} is unknown; use {', '.join(VICTIMS)}")
        reclaims = self.ours and any(not q.preemption.never for q in queues)
        dims = ("pods", *resource_names)
        self.reclaimer = Reclaimer(queues, dims, victims, calm) if reclaims else None
        """The reclaim phase (`idlegate.sim.reclaim_plan`; None: no queue may stop a task)."""
        self.dims = ("pods", *resource_names)
        dims = self.dims
        check_counted(self.queues, dims)

        def per(limit: Mapping[str, int] | None, default: float) -> list[float]:
            return [limit[d] if limit is not None and d in limit else default for d in dims]

        self.nominal = [per(q.nominal, inf) for q in queues]
        self.named = [any(n[i] != inf for n in self.nominal) for i in range(len(dims))]
        """Per resource, whether a quota names it: the cohort is shared on those alone (on
        another, the others' claims are their usage, and the cohort's room is the pool's
        free amount, which the cluster's own fit rule keeps)."""
        self.borrow = [per(q.borrowing_limit, inf) for q in queues]
        self.keep = [
            [
                n - lend if n != inf and lend != inf else 0.0
                for n, lend in zip(self.nominal[i], per(q.lending_limit, inf), strict=True)
            ]
            for i, q in enumerate(queues)
        ]
        self.capacity: list[float] = []
        """The pool's capacity, in `dims` order (`set_capacity`)."""
        self.cohort: list[float] = []
        """What the queues share: the pool's capacity, or the quotas' sum if smaller."""
        self.set_capacity(capacity)
        self.weight = [q.weight for q in queues]
        self.priority = [q.priority for q in queues]
        self.bound = [q.wait_bound for q in queues]
        self.bounded = any(b < inf for b in self.bound)
        self.start_usage([[0.0] * len(dims) for _ in queues])
        self.waits_since: list[dict[Stage, float]] = [{} for _ in queues]
        """Per queue, each waiting stage's oldest ready task: when it began to wait, in
        that order (times only grow: a stage is put back at the end when it is set again)."""
        self.snapshot = QueueSnapshot(len(queues), len(dims), self.demand)
        self.reserved: dict[Job, list[float]] = {}
        """Kueue mode: the admitted workflows' reservations."""
        self.widths: dict[Job, list[float]] = {}
        """Kueue mode: each waiting workflow's reservation, worked out once."""
        self.last_tick = 0.0
        self._waiting: list[bool] = [False] * len(queues)
        self.cluster_asked: PoolState | None = None
        self._claim = [[0.0] * len(dims) for _ in queues]
        """Each queue's claim on the cohort (phase 2), kept from the queues that changed."""
        self._claim_sum = [0.0] * len(dims)
        self._changed: set[int] = set(range(len(queues)))
        """Queues whose usage or waiting work changed since their claim was worked out."""
        self._ent: list[dict[Any, tuple[int, int]]] = [{} for _ in queues]
        """Per queue, phase 3's (within nominal, in all) tasks by demand, while it holds."""
        self._tops: list[list[tuple[float, float]] | None] = [None] * len(queues)
        """Per queue, `tops`, while its claims hold (as `_ent`)."""
        self._stale: set[int] = set(range(len(queues)))
        """Queues whose phase 3 is to work out again (their claims or the others' moved)."""
        self._within: dict[int, dict[Group, int]] = {}
        """Phase 3, kept while it holds: the queues with shapes they may start within their
        nominal quota, each shape's tasks."""
        self._beyond: dict[int, dict[Group, int]] = {}
        """Phase 3: the queues with shapes they may start borrowing, the tasks a start needs."""
        self._full: list[bool] = [False] * len(queues)
        """Phase 3: per queue, whether it has room for no pod (none of its stages shows)."""
        self.limits = [(None, {}) for _ in queues]
        self.quota = quota_holds(queues)
        self._views: dict[int, tuple[tuple[Any, tuple[float, ...]], QueueView]] = {}
        """Each queue's view, while the pool and its entitlement are the same."""
        self._pool_view: PoolView | None = None
        """The whole pool's view (kept, as the queues' are, while the pool is the same)."""
        self._idle_at: tuple[float, int, int, int] | None = None
        """The state `idle_over` last found none at (`_key`)."""
        self._reset_question()

    def _reset_question(self) -> None:
        self._at: tuple[float, int, int, int] | None = None
        self._result: tuple[Any, AdmissionResult] | None = None
        self._open = False
        self.asked = False
        """Whether phases 2 to 6 ran for the open question."""
        self.plan: AdmissionPlan = CLOSED
        """The open question's answer (`idlegate.sim.admission_plan`)."""
        self._first = 0
        """Of the plan's queues served, the first with a stage that may start (`open`)."""

    @classmethod
    def alone(cls, capacity: ResourceVector, resource_names: Sequence[str]) -> Admission:
        """The one queue of a pool without queues (no quota, no bound): its entries, and
        its decisions while a workflow of a priority other than 0 waits in the pool
        (`idlegate.sim.queued`)."""
        alone = cls((QueueSpec("default"),), capacity, resource_names)
        alone.counts = False  # (its ledger is nobody's: a pool without queues has no figures)
        return alone

    def set_capacity(self, capacity: ResourceVector) -> None:
        """The pool's capacity is now `capacity` (pods included): the cluster tells it on
        every change (`Cluster.set_capacity`: a pool that follows its nodes starts at none
        and grows as they are read), so the cohort quotas borrow from is the pool's now."""
        self.capacity = [float(capacity[d]) for d in self.dims]
        self.cohort = [
            min(cap, sum(n[i] for n in self.nominal)) for i, cap in enumerate(self.capacity)
        ]
        self._at = None
        if hasattr(self, "_changed"):  # (not while it is built)
            self._changed.update(range(len(self.queues)))
            self._claim = [[-1.0] * len(self.dims) for _ in self.queues]  # (all read again)
            self.moved()  # (the shares are of the cohort)

    def touch(self, job: Job) -> None:
        """`job` changed (`Cluster.touch`): the snapshot reads it again."""
        self.snapshot.touch(job)
        self._at = self._idle_at = None

    # -- phase 1: the snapshot ---------------------------------------------------------

    def _observe(self, pool: PoolState, now: float) -> None:
        """Read the jobs that changed, and note which queues wait."""
        self._tick(now)
        if self.cluster_asked is not pool:  # (attached to a pool with jobs: read them all)
            self.cluster_asked = pool
            for job in pool.jobs:
                self.snapshot.touch(job)
        self._note(self.snapshot.refresh(), now)

    def idle_over(self, pool: PoolState) -> list[Stage]:
        """Phase 1's stages in a deliberate idle slot whose wait began past their queue's
        bound ago: a deliberate wait ends at the bound, so the cluster ends their slots
        (`Cluster.idle_expired`) before it opens the question (the same again until they
        are ended)."""
        key = _key(pool)
        if not self.bounded or self._idle_at == key:
            return []
        now = pool.now
        self._observe(pool, now)
        over = []
        for q, since in enumerate(self.waits_since):
            bound = self.bound[q]
            for stage, t in since.items():
                if now - t < bound:
                    break
                if stage.idle_until is not None:
                    over.append(stage)
        if not over:
            self._idle_at = key  # (none at this state: none until it changes)
        return over

    def _note(self, jobs: list[Job], now: float) -> None:
        """Of `jobs` (read again), the stages that began to wait, and those done waiting,
        and which of their queues wait."""
        snapshot = self.snapshot
        if snapshot.changed:
            waiting, counts = self._waiting, snapshot.waiting
            for q in snapshot.changed:
                waiting[q] = counts[q] > 0
            self._changed.update(snapshot.changed)
            snapshot.changed.clear()
        for job in jobs:
            since = self.waits_since[job.queue]
            for stage in job.stages:
                if job.finish is not None or stage.launched >= stage.available:
                    since.pop(stage, None)
            if job.finish is not None:
                for other in self.waits_since:  # (a job moved between queues)
                    for stage in job.stages:
                        other.pop(stage, None)
                continue
            for stage in job.runnable:
                if stage not in since:
                    since[stage] = now

    def next_bound(self) -> float:
        """When a waiting task next passes its bound or a reclaim's claimant stops waiting
        (`Reclaimer.waking`; inf: never), for the driver's timer: a round runs then."""
        now = self.last_tick
        best = inf if self.reclaimer is None else self.reclaimer.waking(now)
        if not self.bounded:
            return best
        for q, since in enumerate(self.waits_since):
            bound = self.bound[q]
            if bound == inf:
                continue
            for stage, t in list(since.items()):
                if not stage.waits:
                    del since[stage]
                elif t + bound > now:
                    best = min(best, t + bound)
                    break
        return best

    # -- the question ----------------------------------------------------------------

    def open(self, pool: PoolState) -> bool:
        """Work out the present question (cached until the state changes): True if a stage
        may start now. The cluster's `can_schedule` with an admission."""
        now = pool.now
        key = (now, pool.decisions, pool.free_executors, len(pool.jobs))  # (`_key`, inline)
        if self._at == key:
            return self._open
        self._observe(pool, now)
        self._reset_question()
        self._at = key
        if self.reclaimer is not None and not pool.beyond and self._reclaim(pool, now):
            return True
        if pool.free_executors == 0 or pool.beyond:
            return False
        if self.mode == "kueue" or self.mode == "drf":
            rule = baselines.kueue if self.mode == "kueue" else baselines.drf
            visible = rule(self, pool)
            self.plan = AdmissionPlan(visible=visible)
            self._open = bool(visible)
        else:
            self._question(pool, now)
            plan = self.plan
            served = plan.served
            first = None
            if served:
                first = next((i for i, q in enumerate(served) if self._startable(pool, q)), None)
            self._first = len(served) if first is None else first
            self._open = plan.forced is not None or first is not None
        return self._open

    def _reclaim(self, pool: PoolState, now: float) -> bool:
        """Phase 0: the stops `reclaim_plan` chooses for the claiming queues' ready tasks of
        their highest priority, in phase 5's order, as the plan; False: none."""
        assert self.reclaimer is not None
        self._update_claims()
        claims = []
        for q in self.reclaimer.claiming:
            groups = self.snapshot.groups[q]
            if self._waiting[q] and groups:
                top = next(iter(groups[max(groups, key=lambda k: k.priority)]))
                stage = oldest_waiting(self.waits_since[q], top, self._never)
                if not self._never(stage):
                    claims.append((q, stage, need_of(stage)))
        got = claims and self.reclaimer.plan(pool, now, self, claims)
        if got:
            self.plan = AdmissionPlan(stop=got.executors, reclaim=got)
        self._open = bool(got)
        return self._open

    def reopen(self) -> None:  # (a plan's stops were applied, or handed to the driver)
        self._at = None

    def _question(self, pool: PoolState, now: float) -> None:
        """Phases 2 to 6 of the module docstring (7 is read per stage: `AdmissionPlan.room`):
        the open question's `plan`."""
        self.asked = True
        # 2. claims
        self._update_claims()
        # 3. entitlement
        bound, free = self.bound, pool.free_executors
        if self._stale:
            for q in self._stale:
                self._verdict(q)
            self._stale.clear()
        full, nominal, borrow = self._full, self._within, self._beyond
        # 4. wait bound
        blocked: dict[int, Stage] = {}
        holds: dict[int, Verdict] = {}
        reserve: Reserve | None = None
        if self.bounded:
            overdue = []
            for q, since in enumerate(self.waits_since):
                if full[q]:
                    continue
                for stage, t in since.items():
                    if now - t < bound[q]:
                        break
                    if stage.job.finish is None and stage in stage.job.runnable:
                        if self._never(stage):
                            continue
                        need = need_of(stage)
                        total = self.entitled_for(q, group_of(stage).amounts)[1]
                        overdue.append((t, stage, total, need))
            overdue.sort(key=lambda o: (o[0], o[1].job.id, o[1].index))
            for _t, stage, total, need in overdue:
                q = stage.job.queue
                if total < need:
                    self._block(blocked, holds, q, stage)  # (its own tasks must end first)
                    continue
                if reserve is None and free > 0 and launchable(stage, free):
                    forced = Decision(stage, max(stage.job.cap, stage.job.held + need))
                    first = forced_hold(self.queues[q].name)
                    self.plan = AdmissionPlan(forced, first, blocked=blocked, holds=holds)
                    return
                if reserve is None:
                    reserve = self._reserve(pool, stage, need)
                    self._block(blocked, holds, q, stage)
        # 5. serve
        served = [q for q in nominal if q not in blocked] if nominal else []
        rooms: dict[int, dict[Group, int]] = {}
        phase: dict[int, str] = {}
        quota: tuple[Verdict, ...] = ()  # (the queues start within theirs: `self.quota`)
        if served:
            served.sort(key=lambda q: (-self.priority[q], self.share(q), q))
            rooms = {q: nominal[q] for q in served}
            phase = dict.fromkeys(served, NOMINAL)
        elif borrow:
            order = sorted(
                (q for q in borrow if q not in blocked),
                key=lambda q: (-self.priority[q], self.share(q), q),
            )
            if order:
                q = order[0]
                served = [q]
                rooms = {q: self._fill(q, borrow[q], order[1:])}
                phase = {q: BORROW}
                quota = quota_holds(self.queues, f"queue {self.queues[q].name} borrows first")
        # 6. priority
        allowed: dict[int, frozenset[Group]] = {}
        tops: dict[int, int] = {}
        ranked_out: dict[int, dict[Group, Verdict]] = {}
        for q in served:
            allowed[q] = frozenset(rooms[q])
            top = tops[q] = max(key.priority for key in rooms[q])
            if all(k.priority == top for k in rooms[q]):
                continue
            name = self.queues[q].name
            ranked_out[q] = {
                k: Verdict(Reason.PRIORITY, PRIORITY, (name, top, k.priority))
                for k in rooms[q]
                if k.priority != top
            }
            rooms[q] = {k: r for k, r in rooms[q].items() if k.priority == top}
        if not served and not blocked and reserve is None:
            self.plan = CLOSED  # (nothing may start, nothing held by phases 4 to 6)
            return
        self.plan = AdmissionPlan(
            served=tuple(served),
            phase=phase,
            rooms=rooms,
            allowed=allowed,
            top=tops,
            blocked=blocked,
            holds=holds,
            reserve=reserve,
            reserve_hold=None if reserve is None else reserved_hold(reserve.stage, self.queues),
            ranked_out=ranked_out,
            quota=quota,
        )

    def _block(
        self, blocked: dict[int, Stage], holds: dict[int, Verdict], q: int, stage: Stage
    ) -> None:
        """Phase 4: queue q's task of `stage`, past its wait bound, goes first in it."""
        if q not in blocked:
            blocked[q] = stage
            words = (self.queues[q].name, stage.job.name, stage.name)
            holds[q] = Verdict(Reason.RESERVATION, BLOCKED, words)

    def _update_claims(self) -> None:
        """Phase 2: the claims of the queues that changed; if any claim moved, every
        queue's entitlement is worked out again (it depends on the others' claims)."""
        changed = self._changed
        if not changed:
            return
        pending, moved = self.snapshot.pending, False
        for q in changed:
            row = [
                (max(u, min(n, u + p), k) if n != inf else u) if named else 0.0
                for u, n, k, p, named in zip(
                    self.used[q], self.nominal[q], self.keep[q], pending[q], self.named, strict=True
                )
            ]
            if row != self._claim[q]:
                self._claim[q], moved = row, True
            self._ent[q].clear()
            self._tops[q] = None
            self._stale.add(q)
        changed.clear()
        if moved:
            # (summed again, not moved by differences: milli-bytes exceed a float's integers)
            self._claim_sum = [sum(col) for col in zip(*self._claim, strict=True)]
            for q in range(len(self.queues)):
                self._ent[q].clear()
                self._tops[q] = None
            self._stale.update(range(len(self.queues)))

    def _verdict(self, q: int) -> None:
        """Phase 3 for queue q: its shapes it may start within its nominal quota (with
        the tasks), those it may start borrowing (with the tasks a start needs), and
        whether it has room for no pod at all (no stage of it shows, bound or not); the
        holds of the shapes it may not start at all (`limits`)."""
        own, top = self.tops(q)[0]
        none = own < MILLI and top < MILLI  # (`entitled_for(q, None)`: room for no pod)
        full = none and self.bound[q] == inf
        nominal: dict[Group, int] = {}
        borrow: dict[Group, int] = {}
        held: dict[Group, Verdict] = {}
        if not full:
            for key, stages in self.snapshot.groups[q].items():
                need = need_of(next(iter(stages)))
                within, total = self.entitled_for(q, key.amounts)
                if within >= need:
                    nominal[key] = within
                elif total >= need:
                    borrow[key] = need
                else:
                    held[key] = self._limit(q, key.amounts, need)
        self.limits[q] = (self._limit(q, None, 1) if none else None, held)
        self._full[q] = full
        for kept, shapes in ((self._within, nominal), (self._beyond, borrow)):
            if shapes:
                kept[q] = shapes
            else:
                kept.pop(q, None)

    def _limit(self, q: int, amounts: tuple[int, ...] | None, need: int) -> Verdict:
        """Phase 3's hold of `need` tasks of a demand of `amounts` queue q may not start."""
        a = [MILLI, *(amounts or [0.0] * (len(self.dims) - 1))]
        name, used, nominal, borrow = (
            self.queues[q].name,
            self.used[q],
            self.nominal[q],
            self.borrow[q],
        )
        return first_limit(name, self.dims, used, nominal, borrow, a, self.tops(q), need)

    def entitled_for(self, q: int, amounts: tuple[int, ...] | None) -> tuple[int, int]:
        """(tasks of a demand of `amounts` (None: a pod only) queue q may start within its
        nominal quota, within all it may use, borrowing included), once a question."""
        cache = self._ent[q]
        got = cache.get(amounts)
        if got is None:
            a = [MILLI, *(amounts or [0.0] * (len(self.dims) - 1))]
            got = cache[amounts] = self._tasks(q, a)
        return got

    def tops(self, q: int) -> list[tuple[float, float]]:
        """Per resource, (room within q's nominal quota, room in all it may use; the
        second with the cohort's claims, phase 2's), once while its claims hold."""
        got = self._tops[q]
        if got is not None:
            return got
        used, nominal, borrow = self.used[q], self.nominal[q], self.borrow[q]
        mine, total, cohort = self._claim[q], self._claim_sum, self.cohort
        out = self._tops[q] = []
        for i in range(len(used)):
            u = used[i]
            top = nominal[i] + borrow[i] - u
            if cohort[i] != inf and self.named[i]:  # (the others' claims: all but its own)
                top = min(top, cohort[i] - (total[i] - mine[i]) - u)
            out.append((nominal[i] - u, top))
        return out

    def _tasks(self, q: int, a: Sequence[float]) -> tuple[int, int]:
        within = total = MANY
        for need, (own, top) in zip(a, self.tops(q), strict=True):
            if need <= 0:
                continue
            if own != inf:
                within = min(within, int(max(0.0, own) // need))
            if top != inf:
                total = min(total, int(max(0.0, top) // need))
        return within, max(total, within)

    def _fill(self, q: int, groups: dict[Group, int], rivals: list[int]) -> dict[Group, int]:
        """Borrowing by progressive filling: each of queue q's shapes may start the tasks
        that keep its weighted dominant share at most the next rival's (at least one), of
        what it may borrow."""
        out = {}
        rival = rivals[0] if rivals and self.priority[rivals[0]] == self.priority[q] else None
        level = 0.0 if rival is None else self.share(rival) * self.weight[q]
        for key, need in groups.items():
            room = self.entitled_for(q, key.amounts)[1]
            if rival is not None:
                a = [MILLI, *(key.amounts or [0.0] * (len(self.dims) - 1))]
                fair = [
                    int((level * c - u) // x)
                    for u, c, x in zip(self.used[q], self.cohort, a, strict=True)
                    if x > 0 and c != inf
                ]
                room = min(room, *fair) if fair else room
            out[key] = max(need, room)
        return out

    def _reserve(self, pool: PoolState, stage: Stage, need: int) -> Reserve:
        """Phase 4's reservation of room for `need` tasks of `stage`."""
        free = self._free(pool)
        shadow = self._shadow(pool, stage, need, free)
        return Reserve(stage, shadow, pool.now, tuple(free), tuple(self.demand(stage)))

    def _shadow(self, pool: PoolState, stage: Stage, need: int, free: list[float]) -> float:
        """When the running tasks' estimated ends first leave room for `need` tasks of
        `stage` in the `free` resources (EASY's shadow time); inf if they never do."""
        want = [a * need for a in self.demand(stage)]
        if all(f >= w for f, w in zip(free, want, strict=True)):
            return pool.now
        ends = sorted(  # (by end alone: stages do not order, equal ends keep the executors')
            ((max(pool.now, start + s.duration), s) for _e, s, start in pool.running_tasks()),
            key=lambda end: end[0],
        )
        for end, s in ends:
            free = [f + a for f, a in zip(free, self.demand(s), strict=True)]
            if all(f >= w for f, w in zip(free, want, strict=True)):
                return end
        return inf

    def _never(self, stage: Stage) -> bool:
        """No node could hold `stage`'s task even empty: it waits for one, holding nothing."""
        pool = self.cluster_asked
        return pool is not None and pool.never_fits(stage)

    def refused(self, stage: Stage) -> str | None:
        """Why the open question lets no task of `stage` start, as a clause of the
        cluster's refusal of a decision naming it (None: the queues do not refuse it; a
        baseline's hidden stage is the policy's own to try)."""
        if not self.ours:
            return None
        hold = self.hold_of(stage)
        return "its queue lets none of its tasks start" if hold is None else hold.message

    def started(self, stage: Stage, tasks: int, now: float) -> None:
        """`tasks` of `stage`'s waiting tasks started at `now`: their waits, in the ledger."""
        q = stage.job.queue
        since = self.waits_since[q]
        t = since.pop(stage, now)
        if self.counts:
            waits = self.ledger.waits[q]
            waits.append(now - t)
            waits.extend([0.0] * (tasks - 1))
            if now - t >= (bound := self.bound[q]):
                self.ledger.overdue.append((q, t + bound, now))
        if stage.launched < stage.available:
            since[stage] = now  # (at the end: the order stays the times')

    def may_go_on(self, stage: Stage, now: float) -> bool:
        """An executor whose task of `stage` ended may start the stage's next task without a
        question: not while a task is overdue, nor for a queue that borrows while another
        waits (nor, in ``drf``, while another waits): the round decides those."""
        self._at = None
        if self.mode == "kueue":
            return True
        bound, q = self.bound, stage.job.queue
        if self.bounded and any(
            now - next((t for s, t in since.items() if not self._never(s)), inf) >= bound[p]
            for p, since in enumerate(self.waits_since)
        ):
            return False
        waiting = self._waiting
        others = waiting.count(True) > waiting[q]  # (another queue waits)
        if self.mode == "drf" or not others:
            return not others
        if not self.over[q]:  # (q does not borrow: it goes on)
            return True
        # (only a queue owed quota, one under its nominal quota with ready tasks, takes
        # back what a borrowing one would go on with)
        under = self.under
        return not any(waiting[p] and under[p] for p in range(len(waiting)) if p != q)

    # -- the result ----------------------------------------------------------------------

    def result(self, cluster: PoolState | None = None) -> AdmissionResult:
        """The present question's `AdmissionResult` (the module docstring), of `cluster`
        (None: the one last asked). It opens the question if the state changed since,
        as the next round would (`Cluster.admission_result` first ends the idle slots
        past their bound, as a round does); the phases' verdicts are read, not worked
        out again (`idlegate.sim.admission_entries.Entries.result_of`)."""
        cluster = cluster if cluster is not None else self.cluster_asked
        if cluster is None:
            return self.result_of(None, None)
        self._present(cluster)
        key = cluster.order_key
        kept = self._result
        if kept is not None and kept[0] == (self._at, key) and kept[1].now == cluster.now:
            return kept[1]  # (the same question: made once, however many read it)
        made = self.result_of(cluster, key)
        self._result = ((self._at, key), made)
        return made

    def _present(self, cluster: PoolState) -> None:
        """The present question opened, its phases run even with no executor free (the
        reasons need them)."""
        self.open(cluster)
        if not self.asked:
            self._question(cluster, cluster.now)

    # -- a copy --------------------------------------------------------------------------

    def fork(self, jobs: dict[Job, Job]) -> Admission:
        """A copy for a forked cluster, whose jobs are `jobs`' values: the same usage and
        waits, a snapshot read from the copies (the ledger starts empty)."""
        twin = object.__new__(Admission)
        twin.__dict__.update(self.__dict__)
        twin.start_usage([list(u) for u in self.used])
        twin.waits_since = [
            {jobs[s.job].stages[s.index]: t for s, t in since.items() if s.job in jobs}
            for since in self.waits_since
        ]
        twin.snapshot = QueueSnapshot(len(self.queues), len(self.dims), twin.demand, jobs.values())
        twin.reserved = {jobs[j]: r for j, r in self.reserved.items() if j in jobs}
        twin.widths = {}
        twin._waiting = list(self._waiting)
        twin.cluster_asked = None
        twin._claim = [list(c) for c in self._claim]
        twin._changed = set(range(len(self.queues)))
        twin._ent = [{} for _ in self.queues]
        twin._tops = [None] * len(self.queues)
        twin._stale = set(range(len(self.queues)))
        twin._within, twin._beyond = {}, {}
        twin._full = [False] * len(self.queues)
        twin.limits = [(None, {}) for _ in self.queues]
        twin._views = {}
        twin._pool_view = None
        twin._idle_at = None
        twin.reclaimer = None if self.reclaimer is None else self.reclaimer.copy()
        twin._reset_question()
        return twin


def _key(pool: PoolState) -> tuple[float, int, int, int]:
    """What a question is of: it stands while these are the same (and nothing was touched)."""
    return (pool.now, pool.decisions, pool.free_executors, len(pool.jobs))
