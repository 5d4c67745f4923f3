"""The portfolio scheduler (`PortfolioScheduler`): its records, rounds and decisions.

**Leaving out the trailing.** Each round's scores over the round's best are remembered
with the number of workflows new in that round, for the rounds since the last change of
workload and of the last `memory` new workflows. A candidate's *standing* is its mean
excess over them, weighted by the new workflows (`standings`; once it has `window` of
them). A candidate whose standing trails the leader's by more than `drop` is left out of
the rounds (`dropped`): the fewer candidates a round compares, the less likely its best
won the window by luck, and the cheaper the round. As its rounds leave the memory, a
left-out candidate comes back and is judged again, and a change of workload brings every
candidate back. The leader and the candidate followed are never left out, nor the rule
under an analytic candidate that is not (a round tries the analytic rule over its best
rule, so without one the analytic rule would vanish from the rounds).

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
(`rounds.confirmed`): consecutive rounds on a short window share most of their
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

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import numpy as np

from idlegate.policy.portfolio.arrivals import ArrivalWatch, Seen
from idlegate.policy.portfolio.candidates import (
    PLAIN_RULES,
    PLANNER,
    PortfolioConfig,
    analytic_specs,
    candidate_specs,
    kind_of,
)
from idlegate.policy.portfolio.prior import (
    features_error,
    load_prior,
    workflow_features,
    workload_features,
)
from idlegate.policy.portfolio.replay import (
    ReplayRequest,
    merged,
    modelled_seconds,
    replay_portfolio,
)
from idlegate.policy.portfolio.rounds import (
    Choice,
    Scores,
    excess,
    noise_needed,
    round_confidence,
    select,
    standing,
    won,
)
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.engine import JobArrival
from idlegate.sim.history import check_history_file, history_arrivals, load_history
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Scheduler

__all__ = ["CHANGE_MIN", "PortfolioScheduler", "SchedulerBuilder", "segments"]

CHANGE_MIN: Final = 10
"""Finished workflows on each side of a comparison that can find a change of workload."""

SchedulerBuilder = Callable[[str], Scheduler]


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
        self._prior: tuple[JobArrival, ...] = ()
        if config.history is not None:
            check_history_file(config.history)
            self._prior = tuple(history_arrivals(load_history(config.history)))
        self._rng = np.random.default_rng(0)
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
        self.choice = Choice(self._start_spec(), None, None, None, 0, "cold start")
        """Which candidate is followed and why (`Choice`)."""
        self.rounds: list[Choice] = []
        """Every round's outcome, in order."""
        self.switches = 0
        self._finished: list[JobArrival] = []
        self._work: list[float] = []
        """Log total work of each of `_finished` (the change detector's)."""
        self._stretch = 1
        """The factor on `every` and `period` (`backoff`)."""
        self._change_due = False
        """The finished workflows changed size since the last round (`change`)."""
        self._regime = 0
        """Workflows recorded since the last change of size (or the start)."""
        self._jobs: dict[int, Job] = {}
        """The running set: the jobs seen at a decision that have not left the view."""
        self._next_id = 0
        """The id after the newest job seen (the jobs of a view are in id order)."""
        self._seen = 0
        """Jobs seen arriving (ids may skip, or not start at 0: `Seen.index`)."""
        self._done_seen = 0
        self._since_round = 0
        self._last_round = -math.inf
        self._pending: tuple[float, Choice] | None = None
        self._prior_due = bool(self._prior)
        self._seeded = 0
        """Of `_finished`, those given by `seed` (the oldest)."""
        self._seed_source: str | None = None
        self._seed_due = False
        self._protected = False
        typed_start = "start" in self.config.model_fields_set  # (an option typed wins)
        self._looks = self.config.prior and not typed_start
        """The prior is looked up (at the start, and after a change seen in the arrivals)."""
        self._lookup_at: int | None = 1 if self._looks else None
        """Workflows arrived at which the prior is looked up next (None: no more)."""
        self._by_prior = True
        """No round has moved the followed candidate (the start's or the prior's) yet."""
        self._incumbent: str | None = None
        """The candidate the shipped prior found for the workflows arrived, until a round
        moves the one followed (None: none found, or a round moved it): `hold`."""
        self._named: str | None = None
        """The last lookup's candidate, moved or not, with `uncorrected`: its lead needs
        no correction (None: none, or corrected as any)."""
        self._changed = False
        """A change of workload was seen: rounds replay the workflows since (`_regime`)."""
        self._early_at = self.config.early
        """Workflows arrived (since `_since`) at which the next early round comes (None:
        no more)."""
        self._watch: ArrivalWatch[Seen] = ArrivalWatch()
        self._since: Seen | None = None
        """The first workflow of the workload arriving since the last change seen in the
        arrivals (`watch`); None: no change seen."""
        self._since_done = 0
        """Finished workflows recorded that arrived from `_since` on."""
        self._announce = False
        """The next lookup says its choice even if it keeps the candidate (after a change
        seen in the arrivals: the change is news)."""
        self._stood: list[tuple[int, dict[str, float]]] = []
        """The rounds since the last change, those of the last `memory` new workflows:
        each round's new workflows and every candidate's score over the round's best,
        minus 1 (`standings`)."""

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

    # -- records ----------------------------------------------------------------------

    @property
    def finished(self) -> tuple[JobArrival, ...]:
        """The finished workflows recorded, the last `window` (what a successor with other
        candidates is given to `record`, so it does not start cold)."""
        return tuple(self._finished)

    def record(self, finished: Iterable[JobArrival]) -> None:
        """Finished workflows (arrival, DAG, duration model) for the next rounds."""
        added = list(finished)
        if not added:
            return
        self._finished.extend(added)
        self._work.extend(_log_work(a) for a in added)
        self._since_round += len(added)
        self._regime += len(added)
        if self._since is not None:
            self._since_done += sum(1 for a in added if a.time >= self._since.time)
        self._trim()
        if self._changed_character():
            # another workload now: the followed candidate won on the old one, so the
            # margin no longer protects it, and a round comes at once, then at the first pace
            self._stretch = 1
            self._protected = False
            self._change_due = True
            self._changed = True
            self._stood.clear()

    def seed(self, finished: Sequence[JobArrival], source: str) -> None:
        """Workflows that finished before the scheduler started, on the clock of those it
        records (an operator's history sink before a restart), oldest first: they go
        before the window's own, but for those of the same name, and with `min_window` in
        the window the first round comes at once, its choice applied at once."""
        known = {a.name for a in self._finished}
        unique = {a.name: a for a in finished if a.name not in known}  # (a line written twice)
        new = list(unique.values())[-self.config.window :]
        if not new:
            return
        self._finished[:0] = new
        self._work[:0] = [_log_work(a) for a in new]
        self._seeded, self._seed_source = len(new), source
        self._regime += len(new)
        self._trim()
        self._seed_due = len(self._finished) >= self.config.min_window

    def _trim(self) -> None:
        """Keep the last `window` finished workflows."""
        extra = len(self._finished) - self.config.window
        if extra > 0:
            del self._finished[:extra]
            del self._work[:extra]
            self._seeded = max(0, self._seeded - extra)

    def _changed_character(self) -> bool:
        """True when the workflows finished since the last round (at least `CHANGE_MIN`)
        are of another size than those before them since the last change (at least as
        many): their mean log work apart by more than log `change`, i.e. a geometric
        mean `change` times larger or smaller. Marks the new ones as the regime's start.
        (A mean of logs, not a median: the median of a few workflows of a two-size mix
        jumps between the sizes.)"""
        new = min(self._since_round, len(self._work))
        regime = min(self._regime, len(self._work))
        if new < CHANGE_MIN or regime - new < CHANGE_MIN:
            return False
        recent = float(np.mean(self._work[-new:]))
        before = float(np.mean(self._work[-regime:-new]))
        if abs(recent - before) <= math.log(self.config.change):
            return False
        self._regime = new
        return True

    def _observe(self, view: ClusterView) -> None:
        """See the jobs arrived in `view` since the last decision (the running set, the
        arrival watch); record those that finished (``records=cluster``), or forget those
        that left the view (``records=fed``: `record` is given the finished ones)."""
        jobs = self._jobs
        arrived = []
        for job in reversed(view.jobs):  # the new ones are at the end (the cluster's id order)
            if job.id < self._next_id:
                break
            jobs[job.id] = job
            arrived.append(job)
        if view.jobs:
            self._next_id = max(self._next_id, view.jobs[-1].id + 1)
        first, self._seen = self._seen, self._seen + len(arrived)
        if self.config.watch:
            for i, job in enumerate(reversed(arrived)):
                seen = Seen(job.id, job.arrival, first + i)
                since = self._watch.see(seen, workflow_features(job.dag))
                if since is not None:
                    self._arrivals_changed(since)
        if self.config.records == "fed":
            if len(jobs) > len(view.jobs):  # (every job of the view is in `jobs`: some left)
                self._forget_gone(view)
            return
        done = getattr(view, "done", None)
        if done is None or len(done) == self._done_seen:
            return
        new = []
        for rec in done[self._done_seen :]:
            job = jobs.pop(rec.id, None)
            if job is not None:  # (every job that ran was seen at a decision)
                new.append(JobArrival(job.arrival, job.name, job.dag, job.payload))
        self._done_seen = len(done)
        self.record(new)

    def _forget_gone(self, view: ClusterView) -> None:
        """``records=fed``: drop from the running set the jobs `view` no longer holds
        (finished, deleted), so that it stays the view's."""
        held = {job.id for job in view.jobs}
        self._jobs = {i: job for i, job in self._jobs.items() if i in held}

    def _arrivals_changed(self, since: Seen) -> None:
        """A change of workload seen in the arrivals, from the workflow `since` (id,
        arrival) on: the candidate followed won on the old workload, so the margin no
        longer protects it, the standings are forgotten, and the start begins again on
        the new workload's workflows: the prior's lookups, then early rounds."""
        self._since = since
        self._since_done = sum(1 for a in self._finished if a.time >= since.time)
        self._stretch = 1
        self._protected = False
        self._stood.clear()
        self._by_prior = True
        self._incumbent = None
        self._lookup_at = 1 if self._looks else None
        self._early_at = self.config.early
        self._announce = True

    def _arrived(self, view: ClusterView) -> int:
        """Workflows arrived: since the change seen in the arrivals, or all seen."""
        if self._since is None:
            return len(self._finished) + len(view.jobs)
        return self._seen - self._since.index

    def _since_window(self) -> tuple[tuple[JobArrival, ...], tuple[JobArrival, ...]]:
        """(finished, running) workflows of the workload arriving: those arrived since the
        change seen in the arrivals, or all recorded and all running if none was."""
        return self._since_change(self._finished), self._since_change(self._running())

    def _since_change(self, arrivals: Sequence[JobArrival]) -> tuple[JobArrival, ...]:
        """Of `arrivals`, those arrived since the change seen in the arrivals (all if none
        was): by arrival time, as finished and running workflows alike carry it."""
        if self._since is None:
            return tuple(arrivals)
        return tuple(a for a in arrivals if a.time >= self._since.time)

    def _look_up(self, view: ClusterView) -> None:
        """Follow the prior's safest candidate for the workflows arrived (since the change
        seen in the arrivals, if one was), when their number reached `_lookup_at`; the
        next lookup at twice as many. Lookups end once a round moved the candidate or
        `min_window` have finished."""
        arrived = self._arrived(view)
        if self._lookup_at is None or arrived < self._lookup_at:
            return
        start = self._since is None
        finished = len(self._finished) if start else self._since_done
        if (
            not self._by_prior
            or finished >= self.config.min_window
            or (start and (self._prior or self._seeded))
        ):  # (a round's evidence, or a window from before the start, decides)
            self._lookup_at = None
            return
        self._lookup_at = 2 * arrived
        prior = load_prior()
        if prior is None:
            self._lookup_at = None
            return
        if start:
            dags = [a.dag for a in self._finished] + [j.dag for j in view.jobs]
        else:
            done, running = self._since_window()
            dags = [a.dag for a in (*done, *running)]
        features = workload_features(dags, view.num_executors)
        error = features_error(dags)
        found = prior.safest(features, self._followable(), error)
        self._incumbent = found
        self._named = found if self.config.uncorrected else None
        safest = found or self._start_spec()
        announce, self._announce = self._announce, False
        if safest == self.following and not announce:
            return
        moved = safest != self.following
        self.choice = Choice(
            safest, None, None, None, 0, "prior" if start else "change", at=view.now
        )
        self.rounds.append(self.choice)
        if moved:
            self._follower().reset(self._child_rng())

    def _followable(self) -> list[str]:
        """Every spec text a round of this portfolio can choose (for the prior)."""
        specs = candidate_specs(self.config)
        if "analytic" in self.config.portfolio():
            for base in [s for s in specs if kind_of(s) == "rule" and "?" not in s]:
                specs += analytic_specs(self.config, base)
        return specs

    # -- rounds -----------------------------------------------------------------------

    def needs_replay(self, now: float) -> bool:
        """Owner thread: True when a round is due (module docstring, "A round")."""
        if self._prior_due or self._seed_due or self._early_due():
            return True
        cfg = self.config
        if len(self._finished) < cfg.min_window or self._since_round == 0:
            return False
        if self._since is not None and self._since_done < cfg.min_window:
            return False  # (the new workload's early rounds choose until then)
        if self._since_round >= cfg.every * self._stretch or self._change_due:
            return True
        return cfg.period is not None and now >= self._last_round + cfg.period * self._stretch

    def _early_due(self) -> bool:
        """True when an early round is due: fewer than `min_window` finished, no prior
        window, and `_early_at` workflows arrived."""
        cfg = self.config
        if self._early_at is None:
            return False
        if self._since is not None:  # (a change seen in the arrivals: a new start)
            return (
                self._since_done < cfg.min_window
                and self._seen - self._since.index >= self._early_at
            )
        return (
            len(self._finished) < cfg.min_window
            and not self._prior
            and not self._seeded
            and self._seen >= self._early_at
        )

    def _early_request(self, view: ClusterView) -> ReplayRequest:
        """An early round's window: every workflow arrived so far, the running ones as
        `_running` gives them. It counts for no standing (its workflows are mostly
        those of the next rounds) and leaves the pace of the rounds on finished
        workflows alone."""
        self._early_at = 2 * (self._seen - (0 if self._since is None else self._since.index))
        finished, running = self._since_window()
        return ReplayRequest(
            window=(*finished, *running),
            num_executors=view.num_executors,
            moving_delay=float(getattr(view, "moving_delay", 0.0)),
            following=self.following,
            seed=int(self._rng.integers(2**31)),
            at=view.now,
            protected=self._protected,
            early=True,
            running=len(running),
            named=self._named,
        )

    def _running(self) -> list[JobArrival]:
        """The workflows still running (seen at a decision, not finished) as arrivals:
        with their duration models (``records=cluster``), or their estimates
        (``records=fed``: an operator's job carries its workflow, not a model)."""
        fed = self.config.records == "fed"
        return [
            JobArrival(j.arrival, j.name, j.dag, None if fed else j.payload)
            for j in self._jobs.values()
        ]

    def request(self, view: ClusterView) -> ReplayRequest:
        """Owner thread: the round's window (the prior history's at the first one; every
        workflow arrived at an early one)."""
        if self.config.records == "fed":  # (a job recorded finished may still be in `_jobs`)
            self._forget_gone(view)
        if not (self._prior_due or self._seed_due) and self._early_due():
            return self._early_request(view)
        new = self._since_round
        self._since_round = 0
        self._change_due = False
        self._last_round = view.now
        first = self._prior_due or self._seed_due
        running: Sequence[JobArrival] = ()
        if self._prior_due and not self._seed_due:  # (a seeded window is the more recent)
            window = self._prior[-self.config.window :]
            prior, source = len(window), "history file"
        else:
            window = tuple(self._finished)
            prior, source = self._seeded, self._seed_source if self._seeded else None
            if self._changed and self._regime < len(window):
                # (the old workload's workflows would decide for the new one: only those
                # since the change, and while they are few the running ones too)
                window = window[-self._regime :]
                prior = max(0, prior - (len(self._finished) - len(window)))
                if len(window) < self.config.min_window:
                    running = self._running()
            window, running = self._since_change(window), self._since_change(running)
        self._prior_due = self._seed_due = False
        # (a round's evidence is at most its window; a prior window is all new)
        new = len(window) if first else min(new, len(window))
        return ReplayRequest(
            window=(*window, *running),
            num_executors=view.num_executors,
            moving_delay=float(getattr(view, "moving_delay", 0.0)),
            following=self.following,
            seed=int(self._rng.integers(2**31)),
            at=view.now,
            reason="prior history" if first else "best",
            protected=self._held(),
            stood=tuple(self._stood) if self._confirms(len(window)) else (),
            new=new,
            dropped=self.dropped(),
            prior=prior,
            source=source,
            running=len(running),
            named=self._named,
        )

    def _held(self) -> bool:
        """True if the margin protects the candidate followed in a round on finished
        workflows: it won a round outright, or (`hold`) it is the shipped prior's and no
        round has moved it. The prior's choice is evidence from ten tuning seeds of the
        workloads alike; without the margin, the first rounds on 40 finished workflows,
        fourteen candidates at one standard error, leave it on a lead of 1-2 % that is
        luck (push, 100 workflows, seed 2001: a 1.7 % lead of sjf-cp, 3.5 % lost)."""
        return self._protected or (self.config.hold and self._on_prior)

    def _confirms(self, window: int) -> bool:
        """True if a switch in a round on `window` finished workflows must hold over the
        rounds before it (`confirm`): the window is short of `window`, and the prior's
        candidate is followed (one a round chose leaves on a round's evidence alone)."""
        return self.config.confirm and window < self.config.window and self._on_prior

    @property
    def _on_prior(self) -> bool:
        """True while the candidate followed is the one the shipped prior found and no
        round has moved it (`hold`, `confirm`)."""
        return self._incumbent is not None and self.following == self._incumbent

    def standings(self) -> dict[str, float]:
        """Per candidate with at least `window` new workflows of evidence in the rounds
        remembered (since the last change, the last `memory` workflows), its mean score
        over each round's best, minus 1, weighted by each round's new workflows."""
        seen: dict[str, int] = {}
        for new, scored in self._stood:
            for c in scored:
                seen[c] = seen.get(c, 0) + new
        return {c: standing(self._stood, c) for c, n in seen.items() if n >= self.config.window}

    def dropped(self) -> frozenset[str]:
        """The candidates left out of the next round: those whose standing trails the
        leader's by more than `drop`, but for the leader, the one followed, and the rule
        under any analytic candidate that stays."""
        standing = self.standings()
        if self.config.drop is None or not standing:
            return frozenset()
        leader = min(standing, key=standing.__getitem__)
        # (against the leader's standing, not 0: each round's best is a lucky one)
        lead = standing[leader] + self.config.drop
        out = {c for c, v in standing.items() if v > lead} - {self.following, leader}
        # (a round tries the analytic rule over its best rule: with every rule left out,
        # an analytic candidate that stays would not be tried at all)
        stays = (standing.keys() - out) | {self.following}
        for spec in map(SchedulerSpec.parse, sorted(stays)):
            if spec.kind == "analytic" and spec.base is not None:
                out.discard(spec.base.format(label=False))
        return frozenset(out)

    def replay(self, request: ReplayRequest) -> Choice:
        """Any one thread: replay the window under every candidate; the choice."""
        started = time.thread_time()
        cfg = self.config
        specs = [s for s in candidate_specs(cfg) if s not in request.dropped]
        scores = self._replay(request, specs)
        if "analytic" in cfg.portfolio():
            rules = {s: v for s, v in scores.means.items() if kind_of(s) == "rule"}
            if rules:
                base = min(rules, key=rules.__getitem__)
                more = self._replay(
                    request, [s for s in analytic_specs(cfg, base) if s not in request.dropped]
                )
                scores = merged(scores, more)
        followed = request.following
        if followed not in scores.means and SchedulerSpec.parse(followed).kind == "analytic":
            # (the analytic rule over an earlier round's best rule: without its own score
            # a round would switch away from it on no evidence)
            scores = merged(scores, self._replay(request, [followed]))
        chosen, runner_up, why = select(
            scores.means,
            request.following,
            cfg.margin,
            protected=request.protected,
            jcts=scores.jcts,
            confidence=cfg.confidence,
            correct=self._correct(request),
            stood=request.stood,
            new=request.new,
            named=request.named,
        )
        reason = "prior history" if request.reason == "prior history" else why
        best = min(scores.means, key=scores.means.__getitem__)
        noise = None
        if why == "noise":
            race = (scores.means, request.following, cfg.confidence, self._correct(request))
            z = round_confidence(*race, best, request.named)
            noise = noise_needed(scores.jcts, request.following, best, z)
        means = scores.means
        return Choice(
            candidate=chosen,
            score=means[chosen],
            runner_up=runner_up,
            runner_up_score=None if runner_up is None else means[runner_up],
            workflows=scores.workflows,
            reason=reason,
            best=best,
            scores=dict(means),
            at=request.at,
            modelled_seconds=modelled_seconds(scores),
            cpu_seconds=time.thread_time() - started,
            prior=request.prior,
            source=request.source,
            new=request.new,
            left_out=tuple(sorted(request.dropped)),
            previous=request.following,
            margin=cfg.margin if request.protected else None,
            noise=noise,
            early=request.early,
            running=request.running,
        )

    def _correct(self, request: ReplayRequest) -> bool:
        """True if `request`'s round corrects the noise rule for its challengers
        (`correction`: every round, or the early ones)."""
        correction = self.config.correction
        return correction == "all" or (correction == "early" and request.early)

    def _replay(self, request: ReplayRequest, specs: Sequence[str]) -> Scores:
        for spec in specs:
            if spec not in self._replayers:
                self._replayers[spec] = self._build(spec)
        return replay_portfolio(
            request.window,
            {s: self._replayers[s] for s in specs},
            request.num_executors,
            request.seed,
            seeds=self.config.seeds,
            moving_delay=request.moving_delay,
        )

    def adopt(self, choice: Choice) -> None:
        """Owner thread: follow `choice` from the next decision on."""
        kept = choice.candidate == self.following
        self.rounds.append(choice)
        self.choice = choice
        self._stand(choice)
        outright = won(choice.scores, choice.candidate)
        self._protected = outright or (self._protected and kept)
        if not kept:
            self._by_prior = False
            self._incumbent = None
        if kept and choice.early:
            return  # (the pace is that of the rounds on finished workflows)
        if kept:
            self._stretch = min(self._stretch * 2, self.config.backoff)
        else:
            self._stretch = 1
            self.switches += 1
            self._follower().reset(self._child_rng())

    def _stand(self, choice: Choice) -> None:
        """Remember `choice`'s scores over its best for the standings (`standings`); a
        candidate that failed counts as 100 % behind."""
        if choice.new <= 0 or not any(map(math.isfinite, choice.scores.values())):
            return
        self._stood.append((choice.new, excess(choice.scores)))
        while sum(n for n, _ in self._stood[1:]) >= self.config.memory:
            del self._stood[0]

    # -- the run's account ------------------------------------------------------------

    def took_effect(self, choice: Choice) -> float:
        """When `choice` began to be followed: the prior history's round at once, another
        round after its replay's delay (`replay_delay`, else its modelled CPU seconds)."""
        if choice.reason in ("prior history", "prior", "change"):
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

    # -- the decision -----------------------------------------------------------------

    def decide(self, view: ClusterView) -> Action:
        self._observe(view)
        if self._lookup_at is not None:
            self._look_up(view)
        if self.config.replayer == "inline":
            self._replay_inline(view)
        if view.free_executors <= 0:  # (nothing to decide; an ONNX follower cannot say so)
            return WAIT
        return self._follower().decide(view)

    def _replay_inline(self, view: ClusterView) -> None:
        """The simulator's worker: a round's choice applies `delay` seconds after it starts."""
        now = view.now
        if self._pending is not None and now >= self._pending[0]:
            self.adopt(self._pending[1])
            self._pending = None
        if self._pending is not None or not self.needs_replay(now):
            return
        request = self.request(view)
        choice = self.replay(request)
        delay = self.config.replay_delay
        if delay is None:
            delay = choice.modelled_seconds
        if request.reason == "prior history" or delay == 0:
            self.adopt(choice)
        else:
            self._pending = (now + delay, choice)


def segments(followed: Sequence[tuple[float, str]], end: float) -> list[tuple[float, float, str]]:
    """(from, to, candidate) stretches of `followed` ((time, candidate) from which each was
    followed, `PortfolioScheduler.followed_from`) up to `end`, empty ones left out."""
    out = []
    for (t0, candidate), (t1, _) in zip(followed, [*followed[1:], (end, "")], strict=True):
        if min(t1, end) > t0:
            out.append((t0, min(t1, end), candidate))
    return out


def _log_work(arrival: JobArrival) -> float:
    return math.log(max(arrival.dag.total_work, 1e-9))
