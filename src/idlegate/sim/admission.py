"""The admission stage: whose ready tasks may start now, in front of the pool's policy.

Pure and clock-free, like `idlegate.sim.cluster`, which consults it (``Cluster.admission``)
in both clocks: the simulator's engine and the operator's core. With no admission (one
queue, no quotas) the cluster runs exactly as before. With one, at every question of a
decision round it computes which runnable stages the policy may see and how many tasks
each may start, then hides the others from ``job.runnable`` for that question: every
rule, the learned policy and the portfolio decide unchanged among what it allows.

Semantics (mode ``queues``, idlegate's; the queues are `idlegate.sim.queues.QueueSpec`):

* *Usage* U_q is the demand (a pod each, plus what the pool counts beyond pods) of the
  queue's running tasks. A queue is *hungry* while it has a runnable stage.
* A queue's *claim* on the cohort is max(U_q, min(N_q, U_q + P_q), N_q − L_q) (N:
  nominal, L: lending limit, all of N when absent; P: the demand of its ready tasks not
  started): idle quota is lent, and comes back, as far as its owner's ready tasks need
  it, by not starting further borrowed tasks. Running tasks are never stopped (no
  preemption).
* A task of queue q with demand a may start *within its nominal quota* if U_q + a ≤ N_q,
  and *borrowing* if U_q + a ≤ N_q + B_q (B: borrowing limit) and Σ_{r≠q} claim_r + U_q + a
  fits the cohort (the pool's capacity, or the quotas' sum if smaller), on every resource
  a quota names. Whether it fits the free resources (and a node) stays the cluster's rule.
* Order: (1) a *wait-bound* stage first (below); (2) the stages that may start within
  their nominal quota, of every queue together, the policy choosing among them; (3) only
  when there are none, borrowing, one task per question, for the queue of highest
  priority, then lowest weighted dominant share (max over resources of U_q / cohort, over
  its weight). Within a queue, only the stages of its workflows of the highest priority.
* *The wait bound.* A stage's oldest ready task has waited since its stage became runnable
  or its previous task started, whichever is later (a stage's tasks queue in order; a
  deliberate idle slot counts as waiting). Past its queue's bound the task is *overdue*:
  an idle slot it is in ends, and it starts before anything else as soon as it fits
  within its queue's entitlement (the forced decision raises its job's cap by what it
  starts). If it is entitled but the free resources do not hold it, room is reserved as
  EASY backfilling reserves it for its head job: another task starts only if it leaves
  that room free or its estimated end is before the *shadow time* (when the running
  tasks' estimated ends free the room). If its queue is at its entitlement, the queue's
  other stages wait behind it. So without preemption an overdue task waits past its
  bound at most until the running tasks free its room.

Baselines, for `compare` (``admission?mode=…:BASE``):

* ``kueue``: a workflow is admitted whole (Kueue's Workload): it reserves its widest
  stage's demand (all its tasks at once, at most its queue's nominal quota) against its
  queue's nominal quota plus what it may borrow, in arrival order with later ones
  admitted when the head does not fit (BestEffortFIFO); its tasks start only within its
  reservation, in the policy's order. Generous to Kueue: a reservation of every pod of a
  workflow could never admit one wider than its quota.
* ``drf``: plain dominant-resource fairness across queues: one task per question, for
  the queue with a startable stage of the lowest weighted dominant share; no quotas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import inf
from typing import TYPE_CHECKING, Any

from idlegate.errors import IdlegateError
from idlegate.sim.protocol import Action, Decision, Job, Launch, Scheduler, Stage, launchable
from idlegate.sim.queues import QueueSpec, queue_index
from idlegate.sim.resources import MILLI, ResourceVector

if TYPE_CHECKING:
    from idlegate.sim.cluster import Cluster

MODES = ("queues", "kueue", "drf")


@dataclass
class Ledger:
    """What the admission saw, per queue, for the figures (`idlegate.sim.queue_metrics`)."""

    waits: list[list[float]]
    """Seconds each started task of the queue waited (the module's wait), in start order."""
    overdue: list[tuple[int, float, float]] = field(default_factory=list)
    """(queue, bound time, start) of every task started past its bound."""
    borrowed: list[list[float]] = field(default_factory=list)
    """Per queue and resource, unit-seconds used beyond its nominal quota."""
    lent: list[list[float]] = field(default_factory=list)
    """Per queue and resource, unit-seconds of its idle nominal quota others used."""
    contended: float = 0.0
    """Seconds with two or more queues holding ready tasks that wait."""
    jain_area: float = 0.0
    """∫ Jain's index of the waiting queues' weighted dominant shares over `contended`."""


class Admission:
    """A pool's queues and what they use: the module docstring's stage, consulted by the
    cluster at every question (`open`, `decide_once`, `room`, `may_go_on`)."""

    def __init__(
        self,
        queues: Sequence[QueueSpec],
        capacity: ResourceVector,
        resource_names: Sequence[str],
        mode: str = "queues",
    ) -> None:
        if mode not in MODES:
            raise IdlegateError(f"admission mode {mode!r} is unknown; use {', '.join(MODES)}")
        if not queues:
            raise IdlegateError("an admission needs at least one queue")
        self.queues = tuple(queues)
        self.mode = mode
        self.dims = ("pods", *resource_names)
        dims = self.dims

        def per(limit: Mapping[str, int] | None, default: float) -> list[float]:
            return [limit[d] if limit is not None and d in limit else default for d in dims]

        self.nominal = [per(q.nominal, inf) for q in queues]
        self.borrow = [per(q.borrowing_limit, inf) for q in queues]
        self.keep = [
            [
                n - lend if n != inf and lend != inf else 0.0
                for n, lend in zip(self.nominal[i], per(q.lending_limit, inf), strict=True)
            ]
            for i, q in enumerate(queues)
        ]
        self.set_capacity(capacity)
        self.weight = [q.weight for q in queues]
        self.priority = [q.priority for q in queues]
        self.bound = [q.wait_bound for q in queues]
        self.bounded = any(b < inf for b in self.bound)
        self.used = [[0.0] * len(dims) for _ in queues]
        self.since: dict[Stage, float] = {}
        """Each waiting stage's oldest ready task: when it began to wait."""
        self.reserved: dict[Job, list[float]] = {}
        """Kueue mode: the admitted workflows' reservations."""
        self._widths: dict[Job, list[float]] = {}
        """Kueue mode: each waiting workflow's reservation, worked out once."""
        self.ledger = Ledger(
            waits=[[] for _ in queues],
            borrowed=[[0.0] * len(dims) for _ in queues],
            lent=[[0.0] * len(dims) for _ in queues],
        )
        self._last = 0.0
        self._waiting: list[bool] = [False] * len(queues)
        self._pending: list[list[float]] = [[0.0] * len(dims) for _ in queues]
        """Per queue, the demand of its ready tasks not started (what a hungry queue
        claims back of its nominal quota)."""
        self._visible: dict[Stage, int] | None = None
        """The open question's visible stages and how many tasks each may start."""
        self._forced: Decision | None = None
        self._at: tuple[float, int, int, int] | None = None

    def index(self, name: str | None) -> int:
        """The queue a workflow naming `name` joins (`idlegate.sim.queues.queue_index`)."""
        return queue_index(self.queues, name)

    def settle(self, now: float) -> Ledger:
        """The ledger, integrated up to `now`."""
        self._tick(now)
        return self.ledger

    # -- what running tasks use ------------------------------------------------------

    def demand(self, stage: Stage) -> list[float]:
        """One task's demand, in `dims` order (a pod, then the pool's other resources)."""
        need = stage.need
        if need is None:
            return [MILLI, *([0.0] * (len(self.dims) - 1))]
        return [MILLI, *need.amounts]

    def use(self, stage: Stage, tasks: int, now: float) -> None:
        """`tasks` more (or, negative, fewer) of `stage`'s tasks run from `now` on."""
        self._tick(now)
        used = self.used[stage.job.queue]
        for i, a in enumerate(self.demand(stage)):
            used[i] += a * tasks

    def _tick(self, now: float) -> None:
        """Integrate borrowing, lending and fairness over the time since the last change."""
        dt = now - self._last
        if dt <= 0:
            return
        self._last = now
        ledger, used, nominal = self.ledger, self.used, self.nominal
        over = [
            [max(0.0, u - n) if n != inf else 0.0 for u, n in zip(used[q], nominal[q], strict=True)]
            for q in range(len(used))
        ]
        total = [sum(col) for col in zip(*over, strict=True)]
        idle = [
            [max(0.0, n - u) if n != inf else 0.0 for u, n in zip(used[q], nominal[q], strict=True)]
            for q in range(len(used))
        ]
        idle_total = [sum(col) for col in zip(*idle, strict=True)]
        for q in range(len(used)):
            for i in range(len(self.dims)):
                ledger.borrowed[q][i] += over[q][i] * dt / MILLI
                if idle_total[i] > 0:
                    ledger.lent[q][i] += total[i] * idle[q][i] / idle_total[i] * dt / MILLI
        waiting = [q for q, w in enumerate(self._waiting) if w]
        if len(waiting) >= 2:
            shares = [self.share(q) for q in waiting]
            squares = sum(s * s for s in shares)
            jain = 1.0 if squares == 0 else sum(shares) ** 2 / (len(shares) * squares)
            ledger.contended += dt
            ledger.jain_area += jain * dt

    def set_capacity(self, capacity: ResourceVector) -> None:
        """The pool's capacity is now `capacity` (a pool that follows its nodes: read, or
        changed): the cohort is the quotas' sum, or that capacity if smaller."""
        self.capacity = [float(capacity[d]) for d in self.dims]
        self.cohort = [
            min(cap, sum(n[i] for n in self.nominal)) for i, cap in enumerate(self.capacity)
        ]

    def share(self, q: int) -> float:
        """Queue q's weighted dominant share: max over resources of U_q / cohort, / weight."""
        s = max((u / c for u, c in zip(self.used[q], self.cohort, strict=True) if c > 0), default=0)
        return s / self.weight[q]

    # -- the question ----------------------------------------------------------------

    def open(self, cluster: Cluster) -> bool:
        """Work out the present question (cached until the state changes): True if a stage
        may start now. The cluster's `can_schedule` with an admission."""
        now = cluster.now
        key = (now, cluster.decisions, cluster.free_executors, len(cluster.jobs))
        if self._at == key and self._visible is not None:
            return bool(self._visible) or self._forced is not None
        self._observe(cluster, now)
        self._at = key
        self._forced, self._visible = None, {}
        if cluster.free_executors == 0 or cluster.beyond:
            return False
        if self.mode == "kueue":
            self._visible = self._kueue(cluster)
        elif self.mode == "drf":
            self._visible = self._drf(cluster)
        else:
            self._visible = self._queues(cluster, now)
        return bool(self._visible) or self._forced is not None

    def _observe(self, cluster: Cluster, now: float) -> None:
        """Note stages that began to wait, end overdue idle slots, and which queues wait."""
        self._tick(now)
        since = self.since
        waiting = [False] * len(self.queues)
        left: dict[tuple[int, Any], tuple[Stage, int]] = {}
        for job in cluster.jobs:
            if job.runnable:
                q = job.queue
                waiting[q] = True
                for stage in job.runnable:
                    if stage not in since:
                        since[stage] = now
                    key = (q, None if stage.need is None else stage.need.amounts)
                    seen = left.get(key)
                    tasks = stage.available - stage.launched
                    left[key] = (stage, tasks if seen is None else seen[1] + tasks)
        pending = [[0.0] * len(self.dims) for _ in self.queues]
        for (q, _), (stage, tasks) in left.items():
            pending[q] = [
                p + a * tasks for p, a in zip(pending[q], self.demand(stage), strict=True)
            ]
        self._pending = pending
        if not self.bounded:
            self._waiting = waiting
            return
        for stage, t in list(since.items()):
            job = stage.job
            if stage.idle_until is not None and now - t >= self.bound[job.queue]:
                cluster.idle_expired(stage, now)  # (a deliberate wait ends at the bound)
                waiting[job.queue] = True
        self._waiting = waiting

    def next_bound(self) -> float:
        """The next time a waiting task passes its bound (inf: none will), for the driver's
        timer: an overdue task that fits starts then even if nothing else happens."""
        since = self.since
        for stage in [s for s in since if s.job.finish is not None or s.launched >= s.available]:
            del since[stage]
        if not self.bounded:
            return inf
        now, bound = self._last, self.bound
        times = [t + bound[s.job.queue] for s, t in self.since.items()]
        return min((t for t in times if t > now), default=inf)

    def room(self, stage: Stage) -> int:
        """How many tasks of `stage` the open question lets start (a decision's cap is cut to it)."""
        if self._forced is not None and self._forced.stage is stage:
            return stage.available - stage.launched if stage.gang else 1
        visible = self._visible
        return 0 if visible is None else visible.get(stage, 0)

    # -- idlegate's queues -------------------------------------------------------------

    def _entitled(self, q: int, a: list[float], claims: list[float] | None) -> tuple[int, int]:
        """(tasks of demand `a` queue q may start within its nominal quota, within all it
        may use, borrowing included); `claims` is the cohort's Σ claim_r without q."""
        used, nominal, borrow = self.used[q], self.nominal[q], self.borrow[q]
        within = total = 1 << 30
        for i, need in enumerate(a):
            if need <= 0:
                continue
            u = used[i]
            if nominal[i] != inf:
                within = min(within, int(max(0.0, nominal[i] - u) // need))
            top = nominal[i] + borrow[i] - u
            if claims is not None and self.cohort[i] != inf:
                top = min(top, self.cohort[i] - claims[i] - u)
            if top != inf:
                total = min(total, int(max(0.0, top) // need))
        return within, max(total, within)

    def _claims(self) -> list[list[float]]:
        """Per queue, Σ of the other queues' claims on the cohort, per resource."""
        claim = [
            [
                max(u, min(n, u + p), k) if n != inf else u
                for u, n, k, p in zip(
                    self.used[q], self.nominal[q], self.keep[q], self._pending[q], strict=True
                )
            ]
            for q in range(len(self.queues))
        ]
        total = [sum(col) for col in zip(*claim, strict=True)]
        return [[t - c for t, c in zip(total, claim[q], strict=True)] for q in range(len(claim))]

    def _queues(self, cluster: Cluster, now: float) -> dict[Stage, int]:
        free = cluster.free_executors
        claims = self._claims()
        nominal: dict[Stage, int] = {}
        borrow: dict[int, dict[Stage, int]] = {}
        overdue: list[tuple[float, Stage, int, int]] = []
        entitled: dict[tuple[int, Any], tuple[int, int]] = {}
        since, bound = self.since, self.bound
        pod = [MILLI, *([0.0] * (len(self.dims) - 1))]
        full = [  # (every task takes a pod: a queue with room for none shows no stage)
            self._entitled(q, pod, claims[q])[1] == 0 and bound[q] == inf
            for q in range(len(self.queues))
        ]
        for job in cluster.jobs:
            q = job.queue
            if full[q] or not job.runnable:
                continue
            for stage in job.runnable:
                key = (q, None if stage.need is None else stage.need.amounts)
                got = entitled.get(key)
                if got is None:
                    got = entitled[key] = self._entitled(q, self.demand(stage), claims[q])
                within, total = got
                need = stage.available - stage.launched if stage.gang else 1
                t = since.get(stage, now)
                if now - t >= bound[q]:
                    overdue.append((t, stage, total, need))
                if within >= need:
                    nominal[stage] = within
                elif total >= need:
                    borrow.setdefault(q, {})[stage] = need
        overdue.sort(key=lambda o: (o[0], o[1].job.id, o[1].index))
        blocked: set[int] = set()
        reserve: tuple[Stage, float] | None = None
        for _t, stage, total, need in overdue:
            q = stage.job.queue
            if total < need:
                blocked.add(q)  # (its queue's own tasks must end first: none overtakes it)
                continue
            if reserve is None and launchable(stage, free):
                self._forced = Decision(stage, max(stage.job.cap, stage.job.held + need))
                return {}
            if reserve is None:
                reserve = (stage, self._shadow(cluster, stage, need))
                blocked.add(q)
        for q in blocked:
            borrow.pop(q, None)
        visible = {s: n for s, n in nominal.items() if s.job.queue not in blocked}
        if not visible and borrow:
            order = sorted(borrow, key=lambda q: (-self.priority[q], self.share(q), q))
            visible = self._fill(order[0], borrow[order[0]], order[1:], claims)
        visible = _top_priority(visible)
        if reserve is not None:
            visible = self._backfill(cluster, visible, *reserve)
        return {s: n for s, n in visible.items() if launchable(s, free)}

    def _fill(
        self, q: int, stages: dict[Stage, int], rivals: list[int], claims: list[list[float]]
    ) -> dict[Stage, int]:
        """Borrowing by progressive filling: each of queue q's `stages` may start the tasks
        that keep its weighted dominant share at most the next rival's (at least one), of
        what it may borrow."""
        out = {}
        rival = rivals[0] if rivals and self.priority[rivals[0]] == self.priority[q] else None
        level = 0.0 if rival is None else self.share(rival) * self.weight[q]
        rooms: dict[Any, int] = {}
        for stage, need in stages.items():
            key = None if stage.need is None else stage.need.amounts
            room = rooms.get(key)
            if room is None:
                a = self.demand(stage)
                room = self._entitled(q, a, claims[q])[1]
                if rival is not None:
                    fair = [
                        int((level * c - u) // x)
                        for u, c, x in zip(self.used[q], self.cohort, a, strict=True)
                        if x > 0 and c != inf
                    ]
                    room = min(room, *fair) if fair else room
                rooms[key] = room
            out[stage] = max(need, room)
        return out

    def _shadow(self, cluster: Cluster, stage: Stage, need: int) -> float:
        """When the running tasks' estimated ends first leave room for `need` tasks of
        `stage` in the free resources (EASY's shadow time); inf if they never do."""
        want = [a * need for a in self.demand(stage)]
        free = self._free(cluster)
        if all(f >= w for f, w in zip(free, want, strict=True)):
            return cluster.now
        ends = sorted(
            (max(cluster.now, start + s.duration), s) for _e, s, start in cluster.running_tasks()
        )
        for end, s in ends:
            free = [f + a for f, a in zip(free, self.demand(s), strict=True)]
            if all(f >= w for f, w in zip(free, want, strict=True)):
                return end
        return inf

    def _free(self, cluster: Cluster) -> list[float]:
        free = cluster.free_resources
        return [float(free[d]) for d in self.dims]

    def _backfill(
        self, cluster: Cluster, visible: dict[Stage, int], reserved: Stage, shadow: float
    ) -> dict[Stage, int]:
        """Of `visible`, what may start beside the reservation for `reserved`."""
        want = self.demand(reserved)
        free = self._free(cluster)
        out = {}
        for stage, n in visible.items():
            if cluster.now + stage.duration <= shadow:
                out[stage] = n
                continue
            a = self.demand(stage)
            spare = min(
                (int((f - w) // x) for f, w, x in zip(free, want, a, strict=True) if x > 0),
                default=n,
            )
            need = stage.available - stage.launched if stage.gang else 1
            if spare >= need:
                out[stage] = min(n, spare)
        return out

    # -- the baselines -----------------------------------------------------------------

    def _kueue(self, cluster: Cluster) -> dict[Stage, int]:
        reserved = self.reserved
        for job in list(reserved):
            if job.finish is not None:
                del reserved[job]
                self._widths.pop(job, None)
        held = [[0.0] * len(self.dims) for _ in self.queues]
        for job, r in reserved.items():
            held[job.queue] = [h + x for h, x in zip(held[job.queue], r, strict=True)]
        pending = [j for j in cluster.jobs if j not in reserved]
        hungry = {j.queue for j in pending}
        widths = self._widths
        for borrowing in (False, True):
            others: dict[int, list[float]] = {}
            for job in pending:
                if job in reserved:
                    continue
                q = job.queue
                got = widths.get(job)
                r = got if got is not None else widths.setdefault(job, self._width(job))
                top = [
                    n + (b if borrowing else 0)
                    for n, b in zip(self.nominal[q], self.borrow[q], strict=True)
                ]
                if any(h + x > t for h, x, t in zip(held[q], r, top, strict=True)):
                    continue
                if borrowing:
                    if q not in others:
                        others[q] = self._others(q, held, hungry)
                    if any(
                        c != inf and o + h + x > c
                        for o, h, x, c in zip(others[q], held[q], r, self.cohort, strict=True)
                    ):
                        continue
                    others.clear()  # (what is held changed)
                reserved[job] = r
                held[q] = [h + x for h, x in zip(held[q], r, strict=True)]
        free = cluster.free_executors
        visible = {}
        for job, r in reserved.items():
            use = [0.0] * len(self.dims)
            for s in job.stages:
                if s.executors:
                    use = [u + x * s.executors for u, x in zip(use, self.demand(s), strict=True)]
            for stage in job.runnable:
                a = self.demand(stage)
                n = min(int((x - u) // d) for x, u, d in zip(r, use, a, strict=True) if d > 0)
                need = stage.available - stage.launched if stage.gang else 1
                if n >= need and launchable(stage, free):
                    visible[stage] = n
        return visible

    def _others(self, q: int, held: list[list[float]], hungry: set[int]) -> list[float]:
        """Kueue mode: the cohort's claims of the queues but q, per resource."""
        return [
            sum(
                max(held[p][i], self.nominal[p][i] if p in hungry else self.keep[p][i])
                for p in range(len(self.queues))
                if p != q and self.nominal[p][i] != inf
            )
            for i in range(len(self.dims))
        ]

    def _width(self, job: Job) -> list[float]:
        """Kueue mode: a workflow's reservation, its widest stage's demand (all its tasks),
        at most its queue's nominal quota (as a user sizes a workflow's parallelism to fit
        it: a larger request would wait for the whole cohort to be idle)."""
        q = job.queue
        top = [min(n, c) for n, c in zip(self.nominal[q], self.cohort, strict=True)]
        widest = [0.0] * len(self.dims)
        for s in job.stages:
            widest = [max(w, a * s.tasks) for w, a in zip(widest, self.demand(s), strict=True)]
        return [min(w, t) for w, t in zip(widest, top, strict=True)]

    def _drf(self, cluster: Cluster) -> dict[Stage, int]:
        free = cluster.free_executors
        by_queue: dict[int, dict[Stage, int]] = {}
        for job in cluster.jobs:
            for stage in job.runnable:
                if launchable(stage, free):
                    need = stage.available - stage.launched if stage.gang else 1
                    by_queue.setdefault(job.queue, {})[stage] = need
        if not by_queue:
            return {}
        q = min(by_queue, key=lambda q: (self.share(q), q))
        return _top_priority(by_queue[q])

    # -- the cluster's hooks -----------------------------------------------------------

    def decide_once(
        self, cluster: Cluster, scheduler: Scheduler, now: float
    ) -> tuple[Action, list[Launch]]:
        """Ask `scheduler` the open question with only the visible stages runnable (or
        make the wait bound's decision without it) and apply the answer."""
        forced, visible = self._forced, self._visible or {}
        if forced is not None:
            return forced, self._apply(cluster, forced, now)
        saved: dict[Job, list[Stage]] = {}
        for job in cluster.jobs:
            if job.runnable and any(s not in visible for s in job.runnable):
                saved[job] = job.runnable
                job.runnable = [s for s in job.runnable if s in visible]
        try:
            return cluster.answer(scheduler, now, lambda d, t: self._apply(cluster, d, t))
        finally:
            for job, runnable in saved.items():
                left = job.runnable
                job.runnable = [s for s in runnable if s not in visible or s in left]
                cluster.touch(job)

    def _apply(self, cluster: Cluster, decision: Decision, now: float) -> list[Launch]:
        """Apply `decision`, its cap lowered to what the question lets its stage start."""
        stage, job = decision.stage, decision.stage.job
        room = self.room(stage)
        if decision.idle_delay == 0 and room and decision.parallelism_cap > job.held + room:
            decision = Decision(stage, job.held + room)
        launches = cluster.apply(decision, now)
        self._at = None
        if launches:
            self.started(stage, len(launches), now)
        return launches

    def started(self, stage: Stage, tasks: int, now: float) -> None:
        """`tasks` of `stage`'s waiting tasks started at `now`: their waits, in the ledger."""
        q = stage.job.queue
        t = self.since.get(stage, now)
        waits = self.ledger.waits[q]
        waits.append(now - t)
        waits.extend([0.0] * (tasks - 1))
        bound = self.bound[q]
        if now - t >= bound:
            self.ledger.overdue.append((q, t + bound, now))
        if stage.launched < stage.available:
            self.since[stage] = now
        else:
            self.since.pop(stage, None)

    def may_go_on(self, stage: Stage, now: float) -> bool:
        """An executor whose task of `stage` ended may start the stage's next task without a
        question: not while a task is overdue, nor for a queue that borrows while another
        waits (nor, in ``drf``, while another waits): the round decides those."""
        self._at = None
        if self.mode == "kueue":
            return True
        bound, q = self.bound, stage.job.queue
        if self.bounded and any(now - t >= bound[s.job.queue] for s, t in self.since.items()):
            return False
        others = any(w for p, w in enumerate(self._waiting) if p != q)
        if self.mode == "drf" or not others:
            return not others
        # (only a queue owed quota, one under its nominal quota with ready tasks, takes
        # back what a borrowing one would go on with)
        others = any(
            self._waiting[p]
            and any(u < n for u, n in zip(self.used[p], self.nominal[p], strict=True))
            for p in range(len(self.queues))
            if p != q
        )
        used, nominal = self.used[q], self.nominal[q]
        borrowing = any(u > n for u, n in zip(used, nominal, strict=True))
        return not (borrowing and others)

    def fork(self, jobs: dict[Job, Job]) -> Admission:
        """A copy for a forked cluster, whose jobs are `jobs`' values."""
        twin = object.__new__(Admission)
        twin.__dict__.update(self.__dict__)
        twin.used = [list(u) for u in self.used]
        twin.since = {
            jobs[s.job].stages[s.index]: t for s, t in self.since.items() if s.job in jobs
        }
        twin.reserved = {jobs[j]: r for j, r in self.reserved.items() if j in jobs}
        twin._widths = {}
        zeros = [[0.0] * len(self.dims) for _ in self.queues]
        twin.ledger = Ledger(
            waits=[[] for _ in self.queues], borrowed=zeros, lent=[list(z) for z in zeros]
        )
        twin._visible, twin._forced, twin._at = None, None, None
        return twin


def _top_priority(visible: dict[Stage, int]) -> dict[Stage, int]:
    """Of each queue's visible stages, those of its workflows of the highest priority."""
    if all(s.job.priority == 0 for s in visible):
        return visible
    top: dict[int, int] = {}
    for s in visible:
        q = s.job.queue
        top[q] = max(top.get(q, s.job.priority), s.job.priority)
    return {s: n for s, n in visible.items() if s.job.priority == top[s.job.queue]}


class Admitted:
    """BASE behind an admission mode (``admission?mode=kueue:fifo``): the simulator's
    engine unwraps it as it unwraps a `PodsGate` and admits the workload's queues by
    `mode` (``none``: one queue, today's pool, whatever queues the workload has)."""

    def __init__(self, scheduler: Scheduler, mode: str) -> None:
        if mode not in (*MODES, "none"):
            raise IdlegateError(
                f"admission mode {mode!r} is unknown; use {', '.join((*MODES, 'none'))}"
            )
        self.scheduler = scheduler
        self.mode = mode
        inner = getattr(scheduler, "name", type(scheduler).__name__)
        self.name = f"admission?mode={mode}:{inner}"

    def reset(self, rng: Any) -> None:
        self.scheduler.reset(rng)

    def decide(self, view: Any) -> Action:
        return self.scheduler.decide(view)
