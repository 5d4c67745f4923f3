"""The portfolio scheduler (`PortfolioScheduler`): its records, rounds and decisions.

What it does at each scheduling event, in order, is `PortfolioScheduler.decide`; what a
round decides and why, `decision.play_round`; what it remembers between decisions, the
objects of `state`.

**The start.** With ``history=PATH`` (a history file, `sim.history`) the first round
replays the last `window` workflows of that file at the first decision, and its choice
applies at once (it stands for what the operator knew before it started). A driver may
instead `seed` the window with the workflows that finished before it started (an
operator's history sink before a restart): with at least `min_window` of them the first
round replays the window at once, its choice applied at once; the rounds' `Choice` says
how many of the window's workflows came from there (`prior`, `source`). Otherwise:

* the shipped prior (`prior`, ``prior=true``, unless `start` is given): at the first
  decision, and each time the workflows arrived double, they are looked up (their DAGs
  and the pool's size) among the workloads of the suite, and the scheduler follows the
  candidate that is safest on the nearest ones (a `Choice` with reason ``prior``), or
  `start` when none is near;
* early rounds (`early`): once 8 workflows have arrived, and each time their number
  doubles, a round replays every workflow arrived, the running ones with their
  duration models (``records=fed``: their estimates); the noise rule (`rounds.select`)
  keeps the prior's candidate unless another beats it beyond the window's noise;

until `min_window` workflows have finished and the rounds on finished workflows begin.

**After a change of workload** (`change`) a round replays only the workflows finished
since the change, and while they are fewer than `min_window` the running ones too: the
old workload's workflows would otherwise choose for the new one. A change seen in the
workflows *arriving* (`watch`, `arrivals.ArrivalWatch`) is acted on at once, as at
the start: the prior is looked up for the workflows arrived since the change (a `Choice`
with reason ``change``) and again each time they double, early rounds replay them
(finished or running) at `early`, twice, four times as many arrivals, and the rounds on
finished workflows wait until `min_window` of them have finished.

**A switch on a short window** (`confirm`). While a round's window holds fewer than
`window` finished workflows and the prior's candidate is followed, a switch `select`
makes stands only if the standings agree, this round counted with its new workflows
(`rounds.confirmed`, `decision.play_round` step 4e): consecutive rounds on a short window share most of their
workflows, but each replay draws their durations anew, and one draw can reverse the
last round's verdict (else reason ``unconfirmed``).

**Delivered quality.** A round runs in a worker, so decisions never wait for it: the
followed candidate decides meanwhile. With ``replayer=inline`` (the simulator) `decide`
runs the round itself and its choice takes effect at the first decision at or after
t + d, d the round's modelled CPU seconds (`replay_delay`, or if None `modelled_seconds`:
the replayed events and decisions at the measured cost of each candidate kind,
benchmarks/brain_cost.py), as `planning_delay` models the planner's worker. So a figure
from the simulator is what a cluster whose worker needs that long would get. With
``replayer=worker`` `decide` only follows, and a driver's worker calls the steps:

    if brain.needs_replay(now):               # owner thread
        request = brain.request(view)         # owner thread: the window (cheap)
        choice = brain.replay(request)        # ANY one thread
        brain.adopt(choice)                   # owner thread

**Records.** Whatever `records` says, the scheduler sees the jobs arriving in the views
it decides on (the cluster appends each with the next id): they are counted (the
start's lookups and early rounds), watched (`watch`) and kept while running. With
``records=cluster`` (the default) it records every job that finishes there (its DAG,
arrival and duration model: in the simulator the model stands in for the measured
durations). With
``records=fed`` (the operator's jobs carry their workflow objects, not models) it
records only what its driver gives `record` (`JobArrival` values, e.g.
`sim.history.history_arrivals` of an operator's history records), and a job that left
the view (finished, deleted) is no longer running.

Deterministic: the replays' seeds and the followers' resets come from the run's
Generator (`reset`), so the same seed gives the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Final, Literal

import numpy as np

from idlegate.policy.drf import effective_executors, pool_resources
from idlegate.policy.portfolio.arrivals import Seen
from idlegate.policy.portfolio.candidates import (
    PLAIN_RULES,
    PLANNER,
    PortfolioConfig,
    analytic_specs,
    candidate_specs,
    kind_of,
)
from idlegate.policy.portfolio.decision import play_round, replayed
from idlegate.policy.portfolio.present import Present, from_present
from idlegate.policy.portfolio.prior import (
    features_error,
    load_prior,
    workflow_features,
    workload_features,
)
from idlegate.policy.portfolio.replay import ReplayRequest, trim
from idlegate.policy.portfolio.rounds import Choice, won
from idlegate.policy.portfolio.runs import ReplayOptions, Runs
from idlegate.policy.portfolio.state import (
    CHANGE_MIN,
    Arrivals,
    Credit,
    RoundPace,
    Standings,
    Start,
    Trust,
    Window,
    segments,
)
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.admission_view import PoolView
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival
from idlegate.sim.history import check_history_file, history_arrivals, load_history
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Scheduler
from idlegate.sim.queues import QueueSpec
from idlegate.sim.rollout import planning_fork

__all__ = ["CHANGE_MIN", "PortfolioScheduler", "SchedulerBuilder", "segments"]

SchedulerBuilder = Callable[[str], Scheduler]

JUDGE_MIN: Final = 8
"""Workflows arrived before a lookup of the prior judges them unlike any it knows, or
outside a learned candidate's training range: one, two or four workflows of a workload
the prior knows are often beyond its reach (one `argo-shapes` pod of 1.96, one of
`mixed`'s workflows 2.5 from their own), and their features have no standard error yet.
Before, a lookup that finds nothing follows `start`, as the early rounds begin at 8."""


class PortfolioScheduler:
    """`portfolio`: follows the candidate its replays of the recent past find best
    (module docstring)."""

    def __init__(
        self, config: PortfolioConfig, build: SchedulerBuilder, *, name: str = "portfolio"
    ) -> None:
        self.config = config
        self.name = name
        self._build = build
        start = self._start_spec()
        self._followers: dict[str, Scheduler] = {start: build(start)}
        """The followed candidates' instances (owner thread), by spec text."""
        self._replayers: dict[str, Scheduler] = {}
        """The replay's instances (the worker's alone), by spec text."""
        self._history: tuple[JobArrival, ...] = ()
        """The history file's workflows (``history=``)."""
        if config.history is not None:
            check_history_file(config.history)
            self._history = tuple(history_arrivals(load_history(config.history)))
        self._rng = np.random.default_rng(0)
        self.rebuildable = False
        """True when another process can build it again from its `config` alone: its
        candidates are built by `idlegate.policy.make_scheduler` (which sets it;
        `policy.apart`)."""
        self.reset_state()

    def __repr__(self) -> str:
        return f"PortfolioScheduler({self.name!r}, {self.config!r})"

    def _start_spec(self) -> str:
        start = self.config.start
        specs = {"learned": "learned:default", "trained": f"learned:{self.config.policy}"}
        if start in specs:
            return specs[start]
        if start == "planner":
            return PLANNER
        return start if start in PLAIN_RULES else SchedulerSpec.parse(start).format()

    # -- state ------------------------------------------------------------------------

    def reset_state(self) -> None:
        """Forget the run: no record, follow `start` (or the prior history's choice)."""
        cfg = self.config
        self.choice = Choice(self._start_spec(), None, None, None, 0, "cold start")
        """Which candidate is followed and why (`Choice`)."""
        self.rounds: list[Choice] = []
        """Every round's outcome, in order."""
        self.switches = 0
        self._window = Window()
        self._arrivals = Arrivals()
        looks = cfg.prior and "start" not in cfg.model_fields_set  # (an option typed wins)
        self._start = Start(
            looks=looks,
            lookup_at=1 if looks else None,
            early_at=cfg.early,
            history_due=bool(self._history),
        )
        self._trust = Trust()
        self._pace = RoundPace()
        self._standings = Standings()
        self._credit = Credit(cfg.hourly, (cfg.hourly or 0.0) / 4)
        self._queues: tuple[QueueSpec, ...] = ()
        """The pool's queues when it last decided (empty: one queue, no quotas)."""

    def reset(self, rng: Any) -> None:
        """Start of a run: seeds and followers' streams come from `rng` (the run's)."""
        self._rng = rng
        self.reset_state()
        self._follower().reset(self._child_rng())

    @property
    def following(self) -> str:
        """The spec text of the candidate followed (`choice`'s)."""
        return self.choice.candidate

    def _child_rng(self) -> np.random.Generator:
        return np.random.default_rng(int(self._rng.integers(2**63)))

    def _follower(self) -> Scheduler:
        spec = self.following
        if spec not in self._followers:
            self._followers[spec] = self._build(spec)
        return self._followers[spec]

    # -- the decision -----------------------------------------------------------------

    def decide(self, view: ClusterView) -> Action:
        """One scheduling event: what the brain does, in order (each step's rules are in
        the function it names).

        1. **See** (`_see`): the workflows arrived in `view` join the running set and the
           arrival watch, and a change of workload seen there begins the start again
           (`_arrivals_changed`); the finished ones join the window (`record`), and a
           change of size there brings a round at once.
        2. **Start** (`_look_up`): until a round's evidence decides, the workflows arrived
           are looked up in the shipped prior at 1, 2, 4 … of them, and its safest
           candidate for them is followed.
        3. **Round** (`_replay_inline`; with ``replayer=worker`` the driver's worker):
           when one is due (`needs_replay`) its window is taken (`request`), replayed and
           chosen (`decision.play_round`: what a round decides and why), and followed
           from when it would take effect (`adopt`).
        4. **Follow**: the candidate followed decides.
        """
        self._see(view)
        if self._start.lookup_at is not None:
            self._look_up(view)
        if self.config.replayer == "inline":
            self._replay_inline(view)
        if view.free_executors <= 0:  # (nothing to decide; an ONNX follower cannot say so)
            return WAIT
        return self._follower().decide(view)

    def _replay_inline(self, view: ClusterView) -> None:
        """The simulator's worker: a round's choice applies `delay` seconds after it starts."""
        now, pace = view.now, self._pace
        if pace.pending is not None and now >= pace.pending[0]:
            self.adopt(pace.pending[1])
            pace.pending = None
        if pace.pending is not None or not self.needs_replay(now):
            return
        request = self.request(view)
        choice = self.replay(request)
        delay = self.config.replay_delay
        if delay is None:
            delay = choice.modelled_seconds
        if request.reason == "prior history" or delay == 0:
            self.adopt(choice)
        else:
            pace.pending = (now + delay, choice)

    # -- 1. see -----------------------------------------------------------------------

    @property
    def finished(self) -> tuple[JobArrival, ...]:
        """The finished workflows recorded, the last `window` (what a successor with other
        candidates is given to `record`, so it does not start cold)."""
        return tuple(self._window.finished)

    def record(self, finished: Iterable[JobArrival]) -> None:
        """Finished workflows (arrival, DAG, duration model) for the next rounds."""
        added = list(finished)
        if not added:
            return
        since = self._arrivals.since
        if since is not None:
            self._arrivals.since_done += sum(1 for a in added if a.time >= since.time)
        self._window.add(added, self.config.window)
        if self._window.changed_size(self.config.change, self.config.change_noise):
            # another workload now: the followed candidate won on the old one, so the
            # margin no longer protects it, and a round comes at once, then at the first pace
            self._pace.stretch = 1
            self._trust.forget()
            self._pace.change_due = True
            self._window.changed = True
            self._standings.stood.clear()

    def seed(self, finished: Sequence[JobArrival], source: str) -> None:
        """Workflows that finished before the scheduler started, on the clock of those it
        records (an operator's history sink before a restart), oldest first: they go
        before the window's own, but for those of the same name, and with `min_window` in
        the window the first round comes at once, its choice applied at once."""
        known = {a.name for a in self._window.finished}
        unique = {a.name: a for a in finished if a.name not in known}  # (a line written twice)
        new = list(unique.values())[-self.config.window :]
        if not new:
            return
        self._window.prepend(new, source, self.config.window)
        self._start.seed_due = len(self._window.finished) >= self.config.min_window

    def _see(self, view: ClusterView) -> None:
        """See the jobs arrived in `view` since the last decision (the running set, the
        arrival watch); record those that finished (``records=cluster``), or forget those
        that left the view (``records=fed``: `record` is given the finished ones)."""
        arrivals = self._arrivals
        # (asked through a queue's view, the portfolio still follows the pool's workload:
        # another queue's jobs arrive between its questions, with lower ids than those seen)
        view = _pool(view)
        self._queues = _queues_of(view)
        arrived = arrivals.arrived(view.jobs)
        if self.config.watch:
            first = arrivals.seen - len(arrived)
            for i, job in enumerate(arrived):
                seen = Seen(job.id, job.arrival, first + i)
                since = arrivals.watch.see(seen, workflow_features(job.dag))
                if since is not None:
                    self._arrivals_changed(since)
        if self.config.records == "fed":
            if len(arrivals.jobs) > len(view.jobs):  # (every job of the view is in it: some left)
                self._forget_gone(view)
            return
        done = getattr(view, "done", None)
        if done is None or len(done) == arrivals.done_seen:
            return
        new = []
        for rec in done[arrivals.done_seen :]:
            if rec.id in arrivals.jobs:  # (every job that ran was seen at a decision)
                job = arrivals.jobs.pop(rec.id)
                new.append(self._arrival(job, job.payload))
        arrivals.done_seen = len(done)
        self.record(new)

    def _forget_gone(self, view: ClusterView) -> None:
        """``records=fed``: drop from the running set the jobs `view` no longer holds
        (finished, deleted), so that it stays the view's."""
        held = {job.id for job in view.jobs}
        jobs = self._arrivals.jobs
        self._arrivals.jobs = {i: job for i, job in jobs.items() if i in held}

    def _arrivals_changed(self, since: Seen) -> None:
        """A change of workload seen in the arrivals, from the workflow `since` (id,
        arrival) on: the candidate followed won on the old workload, so the margin no
        longer protects it, the standings are forgotten, and the start begins again on
        the new workload's workflows: the prior's lookups, then early rounds."""
        self._arrivals.since = since
        self._arrivals.since_done = sum(1 for a in self._window.finished if a.time >= since.time)
        self._pace.stretch = 1
        self._trust.forget()
        self._standings.stood.clear()
        self._trust.by_prior = True
        self._trust.incumbent = None
        start = self._start
        start.lookup_at = 1 if start.looks else None
        start.early_at = self.config.early
        start.announce = True

    def _running(self) -> list[JobArrival]:
        """The workflows still running (seen at a decision, not finished) as arrivals:
        with their duration models (``records=cluster``), or their estimates
        (``records=fed``: an operator's job carries its workflow, not a model)."""
        fed = self.config.records == "fed"
        return [self._arrival(j, None if fed else j.payload) for j in self._arrivals.jobs.values()]

    def _arrival(self, job: Job, durations: Any) -> JobArrival:
        """`job` as a replay's arrival, in the queue it is in (the pool's `_queues`), so a
        replay under the pool's queues places it there again."""
        queue, queues = None, self._queues
        if queues and 0 <= job.queue < len(queues):
            queue = queues[job.queue].name
        return JobArrival(
            job.arrival, job.name, job.dag, durations, queue=queue, priority=job.priority
        )

    def _since_window(self) -> tuple[tuple[JobArrival, ...], tuple[JobArrival, ...]]:
        """(finished, running) workflows of the workload arriving: those arrived since the
        change seen in the arrivals, or all recorded and all running if none was."""
        since = self._arrivals.since_change
        return since(self._window.finished), since(self._running())

    # -- 2. start ---------------------------------------------------------------------

    def _look_up(self, view: ClusterView) -> None:
        """Follow the prior's safest candidate for the workflows arrived (since the change
        seen in the arrivals, if one was), when their number reached `lookup_at`; the
        next lookup at twice as many. Lookups end once a round moved the candidate or
        `min_window` have finished."""
        start, arrivals, trust = self._start, self._arrivals, self._trust
        # (a pool of several queues is looked up as the pool, each queue's workflows and
        # its whole size, among the prior's entries measured under queues: `prior.Prior`)
        queued = len(self._queues) > 1
        if queued:
            view = _pool(view)
        fresh = arrivals.since is None
        arrived = len(self._window.finished) + len(view.jobs) if fresh else arrivals.since_count()
        if start.lookup_at is None or arrived < start.lookup_at:
            return
        finished = len(self._window.finished) if fresh else arrivals.since_done
        if (
            not trust.by_prior
            or finished >= self.config.min_window
            or (fresh and (self._history or self._window.seeded))
        ):  # (a round's evidence, or a window from before the start, decides)
            start.lookup_at = None
            return
        start.lookup_at = 2 * arrived
        prior = load_prior()
        if prior is None:
            start.lookup_at = None
            return
        if fresh:
            dags = [a.dag for a in self._window.finished] + [j.dag for j in view.jobs]
        else:
            done, running = self._since_window()
            dags = [a.dag for a in (*done, *running)]
        features = workload_features(dags, effective_executors(view, dags))
        error = features_error(dags)
        judged = arrived >= JUDGE_MIN
        untrained = self._untrained(features, error) if judged else frozenset()
        allowed = [s for s in self._followable() if s not in untrained]
        found = prior.safest(features, allowed, error, queued)
        trust.incumbent = found
        trust.named = found if self.config.uncorrected else None
        reason: Literal["prior", "change", "unlike"] = "prior" if fresh else "change"
        fallback = None
        if found is None and self.config.unlike == "safest" and judged:
            # (like no workload it knows: its pick for the nearest would be a guess)
            fallback = prior.safest_overall(allowed, queued)
            reason = "unlike" if fresh else reason  # (after a change, the change is the news)
        if found or fallback:
            trust.safe = found or fallback
        safest = found or fallback or self._start_spec()
        announce, start.announce = start.announce, False
        if safest == self.following and not announce:
            return
        moved = safest != self.following
        if moved:
            trust.since = None if safest == trust.safe else view.now
        self.choice = Choice(safest, None, None, None, 0, reason, at=view.now)
        self.rounds.append(self.choice)
        if moved:
            self._follower().reset(self._child_rng())

    def _untrained(self, features: Sequence[float], error: float) -> frozenset[str]:
        """The shipped learned policy, when workflows of `features` (standard error
        `error`) are outside the range it was trained on (`trained_range`); else none."""
        prior = load_prior() if self.config.trained_range else None
        if prior is None or prior.learned is None or prior.learned.holds(features, error):
            return frozenset()
        return frozenset({"learned:default"})

    def _window_untrained(self, window: Sequence[JobArrival], pool: int) -> frozenset[str]:
        """`_untrained` for a round's window on a pool of `pool` executors."""
        if not window or not self.config.trained_range:
            return frozenset()
        dags = [a.dag for a in window]
        return self._untrained(workload_features(dags, pool), features_error(dags))

    def _followable(self) -> list[str]:
        """Every spec text a round of this portfolio can choose (for the prior)."""
        specs = candidate_specs(self.config)
        if "analytic" in self.config.portfolio():
            for base in [s for s in specs if kind_of(s) == "rule" and "?" not in s]:
                specs += analytic_specs(self.config, base)
        return specs

    # -- 3. rounds --------------------------------------------------------------------

    def needs_replay(self, now: float) -> bool:
        """Owner thread: True when a round is due (`replay`'s module, "A round")."""
        start, window, cfg = self._start, self._window, self.config
        if start.history_due or start.seed_due:
            return True
        if not self._credit.covers(now):
            return False  # (the rounds spent their credit: `hourly`)
        if self._early_due():
            return True
        if len(window.finished) < cfg.min_window or window.since_round == 0:
            return False
        if self._arrivals.since is not None and self._arrivals.since_done < cfg.min_window:
            return False  # (the new workload's early rounds choose until then)
        pace = self._pace
        if window.since_round >= cfg.every * pace.stretch or pace.change_due:
            return True
        return cfg.period is not None and now >= pace.last_round + cfg.period * pace.stretch

    def _early_due(self) -> bool:
        """True when an early round is due: fewer than `min_window` finished, no prior
        window, and `early_at` workflows arrived."""
        cfg, start, arrivals = self.config, self._start, self._arrivals
        if start.early_at is None:
            return False
        if arrivals.since is not None:  # (a change seen in the arrivals: a new start)
            return arrivals.since_done < cfg.min_window and arrivals.since_count() >= start.early_at
        return (
            len(self._window.finished) < cfg.min_window
            and not self._history
            and not self._window.seeded
            and arrivals.seen >= start.early_at
        )

    def request(self, view: ClusterView) -> ReplayRequest:
        """Owner thread: the round's window and what it weighs (the prior history's at the
        first one; every workflow arrived at an early one)."""
        if self.config.records == "fed":  # (a job recorded finished may still be in `jobs`)
            self._forget_gone(view)
        start, window = self._start, self._window
        if not (start.history_due or start.seed_due) and self._early_due():
            return self._early_request(view)
        new = window.since_round
        window.since_round = 0
        self._pace.change_due = False
        self._pace.last_round = view.now
        first = start.history_due or start.seed_due
        running: Sequence[JobArrival] = ()
        heavy = 0
        source: str | None
        if start.history_due and not start.seed_due:  # (a seeded window is the more recent)
            replayed = self._history[-self.config.window :]
            prior, source = len(replayed), "history file"
        else:
            replayed = tuple(window.finished)
            prior, source = window.seeded, window.source if window.seeded else None
            if window.changed and window.regime < len(replayed):
                # (the old workload's workflows would decide for the new one: only those
                # since the change, and while they are few the running ones too)
                replayed = replayed[-window.regime :]
                prior = max(0, prior - (len(window.finished) - len(replayed)))
                if len(replayed) < self.config.min_window:
                    running = self._running()
            added: Sequence[JobArrival] = ()
            if self.config.heavy and replayed:
                added = self._heavier(replayed, running)
            if self.config.unfinished and not first:  # (a history's clock is not the run's)
                running = (*running, *self._unfinished((*running, *added)))
            since = self._arrivals.since_change
            replayed, running, added = since(replayed), since(running), since(added)
            running, heavy = (*running, *added), len(added)
        start.history_due = start.seed_due = False
        # (a round's evidence is at most its window; a prior window is all new)
        new = len(replayed) if first else min(new, len(replayed))
        on_prior = self._trust.on_prior(self.following)
        confirms = self.config.confirm and len(replayed) < self.config.window and on_prior
        request = replace(
            self._request_on(view, replayed, running),
            reason="prior history" if first else "best",
            protected=self._held(),
            stood=self._standings.rounds() if confirms else (),
            new=new,
            dropped=self.dropped(),
            prior=prior,
            source=source,
            heavy=heavy,
            exact=self._standings.unjudged(self._followable(), self.config.min_window),
        )
        return self._trimmed(request)

    def _trimmed(self, request: ReplayRequest) -> ReplayRequest:
        """`request` trimmed to the round's `budget` (`replay.trim`), counting the
        candidates it will replay (the analytic rule's thresholds among them; with
        `budget_rested` those resting too, so that resting saves CPU rather than buying a
        larger window)."""
        cfg, out = self.config, request.dropped
        if cfg.budget_rested and cfg.rest is not None and out:
            out &= self.dropped(resting=False)
        out |= request.untrained
        candidates = sum(1 for s in candidate_specs(cfg) if s not in out)
        if "analytic" in cfg.portfolio():
            candidates += len(analytic_specs(cfg, "srpt"))
        return trim(request, max(1, candidates), cfg.budget)

    def _heavier(
        self, finished: Sequence[JobArrival], running: Sequence[JobArrival]
    ) -> tuple[JobArrival, ...]:
        """The workflows still running, but for those of `running`, whose work exceeds
        every one of `finished` (`heavy`): a rule that caps a huge job's share finishes it
        last, so without them a window of finished workflows leaves out the very job
        that decides between capping and not (a production trace's job of tens of
        thousands of tasks), and its replays lead back to the rules that job makes slow."""
        largest = max(a.dag.total_work for a in finished)
        names = {a.name for a in running}
        return tuple(
            a for a in self._running() if a.dag.total_work > largest and a.name not in names
        )

    def _unfinished(self, taken: Sequence[JobArrival]) -> tuple[JobArrival, ...]:
        """The workflows unfinished (running or waiting) but those `taken`, up to `window`
        of them, those waiting longest first (`unfinished`): the ones a rule that starves
        large workflows holds back, whose remaining work no finished workflow shows."""
        names = {a.name for a in taken}
        left = sorted((a for a in self._running() if a.name not in names), key=lambda a: a.time)
        return tuple(left[: self.config.window])

    def _early_request(self, view: ClusterView) -> ReplayRequest:
        """An early round's window: every workflow arrived so far, the running ones as
        `_running` gives them. It counts for no standing (its workflows are mostly
        those of the next rounds) and leaves the pace of the rounds on finished
        workflows alone."""
        self._start.early_at = 2 * self._arrivals.since_count()
        finished, running = self._since_window()
        request = self._request_on(view, finished, running)
        return self._trimmed(replace(request, protected=self._trust.protected, early=True))

    def _request_on(
        self,
        view: ClusterView,
        finished: Sequence[JobArrival],
        running: Sequence[JobArrival],
    ) -> ReplayRequest:
        """The request of a round on `finished` then `running` workflows, with what every
        kind of round sets; the caller replaces what only its kind sets."""
        whole = (*finished, *running)
        # (a queue's view is sized to the queue's entitlement; the replay runs the pool's
        # queues on the whole pool, as the pool does)
        pool = _pool(view)
        return ReplayRequest(
            window=whole,
            num_executors=pool.num_executors,
            moving_delay=float(getattr(pool, "moving_delay", 0.0)),
            following=self.following,
            seed=int(self._rng.integers(2**31)),
            at=view.now,
            running=len(running),
            named=self._trust.named,
            untrained=self._window_untrained(
                whole, effective_executors(pool, [a.dag for a in whole])
            ),
            resources=pool_resources(pool),
            queues=_queues_of(pool),
            present=self._present(view),
            safe=self._trust.safe if self.config.guard is not None else None,
            remembered=self._standings.rounds(),
            since=self._trust.since,
        )

    def _present(self, view: ClusterView) -> Cluster | None:
        """A fork of the pool for the round's present check (`present`); None without the
        check, or on a view that is not the whole pool (a queue's: nothing to fork)."""
        if not self.config.present or not isinstance(view, Cluster | PoolView) or not view.jobs:
            return None
        return planning_fork(view)

    def _held(self) -> bool:
        """True if the margin protects the candidate followed in a round on finished
        workflows: it won a round outright, or (`hold`) it is the shipped prior's and no
        round has moved it. The prior's choice is evidence from ten tuning seeds of the
        workloads alike; without the margin, the first rounds on 40 finished workflows,
        fourteen candidates (before srpt's cap) at one standard error, leave it on a lead of 1-2 % that is
        luck (push, 100 workflows, seed 2001: a 1.7 % lead of sjf-cp, 3.5 % lost)."""
        trust = self._trust
        return trust.protected or (self.config.hold and trust.on_prior(self.following))

    def standings(self) -> dict[str, float]:
        """Per candidate with at least `window` new workflows of evidence in the rounds
        remembered (since the last change, the last `memory` workflows), its mean score
        over each round's best, minus 1, weighted by each round's new workflows."""
        return self._standings.of(self.config.window)

    def dropped(self, *, resting: bool = True) -> frozenset[str]:
        """The candidates left out of the next round (`state.Standings.dropped`; `resting`
        false: those `rest` leaves out left in)."""
        cfg = self.config
        out = self._standings.dropped(
            self.following,
            window=cfg.window,
            drop=cfg.drop,
            early=cfg.min_window,
            far=cfg.far,
            rest=cfg.rest if resting else None,
        )
        safe = self._trust.safe if cfg.guard is not None else None
        return out - {safe} if safe else out  # (the guard weighs every round against it)

    def replay(self, request: ReplayRequest, check: Callable[[], None] | None = None) -> Choice:
        """Any one thread: the round of `request` (`decision.play_round`), its replays
        shared and cut (`runs.Runs`: the candidate followed first; it, the guard's safest
        and those of `request.exact` never cut); `check` is called before each replay and may cut the round
        (`replay.RoundCut`)."""
        first, shared = replayed(request, self.config)
        runs = Runs(
            request.window,
            self._replayer,
            request.num_executors,
            request.seed,
            ReplayOptions(
                seeds=self.config.seeds,
                moving_delay=request.moving_delay,
                resources=request.resources,
                unfinished=request.running,
                queues=request.queues,
                check=check,
                cut_error=self.config.cut_error,
                cut_behind=self.config.cut_behind,
            ),
            first=first,
            shared=shared,
            keep=self._kept(request),
        )
        return play_round(
            request, self.config, lambda _, specs: runs.scores(specs), self._from_present
        )

    def _kept(self, request: ReplayRequest) -> frozenset[str]:
        """The candidates a round never cuts: the one followed, the guard's safest, and
        those the standings have not judged yet (`request.exact`) unless `cut_unjudged`."""
        kept = frozenset(s for s in (request.following, request.safe) if s is not None)
        cfg = self.config
        return kept if cfg.cut_unjudged and cfg.cut_error is not None else kept | request.exact

    def _replayer(self, spec: str) -> Scheduler:
        """The replay's instance of `spec`, built once (the worker's alone)."""
        if spec not in self._replayers:
            self._replayers[spec] = self._build(spec)
        return self._replayers[spec]

    def _from_present(self, request: ReplayRequest, specs: Sequence[str]) -> Present | None:
        """`specs` rolled out from `request.present` (`present.from_present`)."""
        if request.present is None:
            return None
        schedulers = {s: self._replayer(s) for s in specs}
        samples = self.config.present_samples
        return from_present(request.present, request.window, schedulers, samples, request.seed)

    def adopt(self, choice: Choice) -> None:
        """Owner thread: follow `choice` from the next decision on. An outright win earns
        the margin's protection, a switch ends the prior's hold, and the pace backs off
        after a round on finished workflows that switched nothing."""
        kept = choice.candidate == self.following
        if choice.workflows:
            self._credit.spend(choice.modelled_seconds, choice.at)
        self.rounds.append(choice)
        self.choice = choice
        self._standings.remember(choice, self.config.memory)
        trust, pace = self._trust, self._pace
        trust.protected = won(choice.scores, choice.candidate) or (trust.protected and kept)
        if not kept:
            trust.by_prior = False
            trust.incumbent = None
            at = self.took_effect(choice)
            trust.since = None if choice.candidate == trust.safe else at
        if kept and choice.early:
            return  # (the pace is that of the rounds on finished workflows)
        if kept:
            cfg, most = self.config, self.config.backoff
            if cfg.backoff_full is not None and choice.workflows - choice.running >= cfg.window:
                most = cfg.backoff_full  # (a round on a full window: `backoff_full`)
            pace.stretch = min(pace.stretch * 2, most)
        else:
            pace.stretch = 1
            self.switches += 1
            self._follower().reset(self._child_rng())

    # -- the run's account ------------------------------------------------------------

    def took_effect(self, choice: Choice) -> float:
        """When `choice` began to be followed: the prior history's round at once, another
        round after its replay's delay (`replay_delay`, else its modelled CPU seconds)."""
        if choice.reason in ("prior history", "prior", "unlike", "change"):
            return choice.at
        delay = self.config.replay_delay
        return choice.at + (choice.modelled_seconds if delay is None else delay)

    def followed_from(self) -> list[tuple[float, str]]:
        """(time, candidate) of the run so far: the cold start's candidate from 0, then each
        round's from when it took effect (a round that kept its candidate included)."""
        return [(0.0, self._start_spec())] + [
            (self.took_effect(c), c.candidate) for c in self.rounds
        ]

    def time_followed(self, end: float) -> dict[str, float]:
        """Seconds of the clock up to `end` that each candidate was followed, longest first."""
        spans: dict[str, float] = {}
        for t0, t1, candidate in segments(self.followed_from(), end):
            spans[candidate] = spans.get(candidate, 0.0) + t1 - t0
        return dict(sorted(spans.items(), key=lambda kv: -kv[1]))

    def account(self, end: float) -> dict[str, Any]:
        """What the run followed and why (``simulate``'s report): the cold start's candidate,
        the seconds each candidate was followed up to `end`, every round's `Choice`."""
        return {
            "start": self._start_spec(),
            "switches": self.switches,
            "time_followed": self.time_followed(end),
            "rounds": [c.to_dict() for c in self.rounds],
        }


def _pool(view: ClusterView) -> ClusterView:
    """The pool a queue's view (`sim.admission_view.QueueView`) narrows; any other view
    is the pool's own."""
    return getattr(view, "whole", view)


def _queues_of(view: ClusterView) -> tuple[QueueSpec, ...]:
    """The queues of the pool of `view` (its admission's; empty without one)."""
    admission = getattr(view, "admission", None)
    return tuple(admission.queues) if admission is not None else ()
