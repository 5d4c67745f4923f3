"""What the portfolio scheduler remembers between decisions, in five small objects.

* `Window`: the finished workflows a round replays, and the change of size among them;
* `Arrivals`: the workflows seen arriving, those still running, and the change of
  workload seen in them (`arrivals.ArrivalWatch`);
* `Start`: where the start stands: the shipped prior's next lookup, the next early
  round, a first round due on a history;
* `Trust`: what protects the candidate followed against a challenger's lead, and what
  the shipped prior named;
* `RoundPace`: when the next round on finished workflows comes, and a choice waiting for its
  replay's delay;
* `Standings`: each candidate's excess over the rounds' best, remembered across rounds
  (what leaves the trailing out and confirms a switch on a short window).

**Leaving out the trailing** (`Standings.dropped`). Each round's scores over the
round's best are remembered with the number of workflows new in that round, for the
rounds since the last change of workload and of the last `memory` new workflows. A
candidate's *standing* is its mean excess over them, weighted by the new workflows
(once it has `window` of them). A candidate whose standing trails the leader's by more
than `drop` is left out of the rounds: the fewer candidates a round compares, the less
likely its best won the window by luck, and the cheaper the round. One trailing by more
than `far` is left out once it has `min_window` workflows of evidence: on a heavy-tailed
trace most rules run several times the leader's JCT in every round, and replaying them
until `window` workflows of evidence is most of each round's cost. As its rounds leave
the memory, a left-out candidate comes back and is judged again, and a change of
workload brings every candidate back. The leader and the candidate followed are never
left out, nor the rule under an analytic candidate that is not (a round tries the
analytic rule over its best rule, so without one the analytic rule would vanish from the
rounds).

**Resting the clear losers** (`rest`, `Standings.rested`). Without waiting for `drop`'s
`window` workflows of evidence, a candidate that lost each of the last n ≥ `REST_AFTER`
rounds that scored it by more than `rest` of the round's best is left out of the next n
rounds (it is replayed less often the longer it keeps losing, and comes back to be
judged again), but the last round's runner-up and the one followed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from idlegate.policy.portfolio.arrivals import ArrivalWatch, Seen
from idlegate.policy.portfolio.rounds import Choice, excess, standing
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.engine import JobArrival
from idlegate.sim.protocol import Job

__all__ = [
    "CHANGE_MIN",
    "Arrivals",
    "RoundPace",
    "Standings",
    "Start",
    "Trust",
    "Window",
    "segments",
]

REST_AFTER: Final = 2
"""Rounds in a row a candidate must lose by `rest` before it rests (`Standings.rested`)."""
CHANGE_MIN: Final = 10
"""Finished workflows on each side of a comparison that can find a change of workload."""


@dataclass
class Window:
    """The finished workflows recorded, the last `window` of them (oldest first)."""

    finished: list[JobArrival] = field(default_factory=list)
    work: list[float] = field(default_factory=list)
    """Log total work of each of `finished` (the change of size's measure)."""
    seeded: int = 0
    """Of `finished`, those given before the start (`PortfolioScheduler.seed`; the oldest)."""
    source: str | None = None
    """Where the seeded ones came from (``history sink``)."""
    since_round: int = 0
    """Recorded since the last round on finished workflows."""
    regime: int = 0
    """Recorded since the last change of size (or the start)."""
    changed: bool = False
    """A change of size was seen: rounds replay the workflows since (`regime`)."""

    def add(self, added: Sequence[JobArrival], size: int) -> None:
        """`added` finished, newest last; keep the last `size`."""
        self.finished.extend(added)
        self.work.extend(_log_work(a) for a in added)
        self.since_round += len(added)
        self.regime += len(added)
        self.trim(size)

    def prepend(self, older: Sequence[JobArrival], source: str, size: int) -> None:
        """`older` finished before the start (seeded from `source`), before the window's
        own; keep the last `size`."""
        self.finished[:0] = older
        self.work[:0] = [_log_work(a) for a in older]
        self.seeded, self.source = len(older), source
        self.regime += len(older)
        self.trim(size)

    def trim(self, size: int) -> None:
        """Keep the last `size` finished workflows."""
        extra = len(self.finished) - size
        if extra > 0:
            del self.finished[:extra]
            del self.work[:extra]
            self.seeded = max(0, self.seeded - extra)

    def changed_size(self, change: float, noise: float | None = None) -> bool:
        """True when the workflows finished since the last round (at least `CHANGE_MIN`)
        are of another size than those before them since the last change (at least as
        many): their mean log work apart by more than log `change`, i.e. a geometric
        mean `change` times larger or smaller, and (`noise`) by more than `noise`
        standard errors of that difference. Marks the new ones as the regime's start.
        (A mean of logs, not a median: the median of a few workflows of a two-size mix
        jumps between the sizes.)

        Why the standard errors: a production trace's jobs range from one task-second to
        millions (a spread of log work near 3), so the mean log work of ten such
        workflows wanders by a factor of 3 and more between two draws of the same
        workload; without them every few rounds "saw" a change and replayed only the
        20-30 workflows since. A workload's own change (TPC-H's jobs, then pods of
        minutes) is tens of standard errors."""
        new = min(self.since_round, len(self.work))
        regime = min(self.regime, len(self.work))
        if new < CHANGE_MIN or regime - new < CHANGE_MIN:
            return False
        recent_work = np.asarray(self.work[-new:])
        before_work = np.asarray(self.work[-regime:-new])
        apart = abs(float(np.mean(recent_work)) - float(np.mean(before_work)))
        if apart <= math.log(change):
            return False
        if noise is not None:
            error = math.sqrt(
                float(np.var(recent_work, ddof=1)) / len(recent_work)
                + float(np.var(before_work, ddof=1)) / len(before_work)
            )
            if apart <= noise * error:
                return False
        self.regime = new
        return True


@dataclass
class Arrivals:
    """The workflows seen arriving at decisions: the running set and the arrival watch."""

    jobs: dict[int, Job] = field(default_factory=dict)
    """The running set: the jobs seen at a decision that have not left the view."""
    next_id: int = 0
    """The id after the newest job seen (the jobs of a view are in id order)."""
    seen: int = 0
    """Jobs seen arriving (ids may skip, or not start at 0: `Seen.order`)."""
    done_seen: int = 0
    """Of the view's finished records, those already recorded."""
    watch: ArrivalWatch[Seen] = field(default_factory=ArrivalWatch)
    since: Seen | None = None
    """The first workflow of the workload arriving since the last change seen in the
    arrivals; None: no change seen."""
    since_done: int = 0
    """Finished workflows recorded that arrived from `since` on."""

    def arrived(self, jobs: Sequence[Job]) -> list[Job]:
        """The jobs of a view (id order) not seen before, oldest first; they join the
        running set and the count."""
        new = []
        for job in reversed(jobs):  # the new ones are at the end (the cluster's id order)
            if job.id < self.next_id:
                break
            self.jobs[job.id] = job
            new.append(job)
        new.reverse()
        if new:
            self.next_id = max(self.next_id, new[-1].id + 1)
        self.seen += len(new)
        return new

    def since_change(self, arrivals: Sequence[JobArrival]) -> tuple[JobArrival, ...]:
        """Of `arrivals`, those arrived since the change seen in the arrivals (all if none
        was): by arrival time, as finished and running workflows alike carry it."""
        if self.since is None:
            return tuple(arrivals)
        return tuple(a for a in arrivals if a.time >= self.since.time)

    def since_count(self) -> int:
        """Workflows seen arriving since the change seen in the arrivals (all if none)."""
        return self.seen - (0 if self.since is None else self.since.order)


@dataclass
class Start:
    """Where the start stands (again after a change seen in the arrivals)."""

    looks: bool
    """The prior is looked up (``prior=true`` and no `start` given)."""
    lookup_at: int | None
    """Workflows arrived at which the prior is looked up next (None: no more)."""
    early_at: int | None
    """Workflows arrived (since `Arrivals.since`) at which the next early round comes
    (None: no more)."""
    history_due: bool = False
    """The first round replays the history file's window (``history=``)."""
    seed_due: bool = False
    """The first round replays the seeded window (`PortfolioScheduler.seed`)."""
    announce: bool = False
    """The next lookup says its choice even if it keeps the candidate (after a change
    seen in the arrivals: the change is news)."""


@dataclass
class Trust:
    """What protects the candidate followed against a challenger's lead."""

    protected: bool = False
    """It won a round outright: the margin protects it (`rounds.won`)."""
    by_prior: bool = True
    """No round has moved the followed candidate (the start's or the prior's) yet."""
    incumbent: str | None = None
    """The candidate the shipped prior found for the workflows arrived, until a round
    moves the one followed (None: none found, or a round moved it): `hold`."""
    named: str | None = None
    """The last lookup's candidate, moved or not, with `uncorrected`: its lead needs no
    correction (None: none, or corrected as any)."""

    safe: str | None = None
    """The shipped prior's safest candidate for the workflows arrived, the last lookup's,
    that the guard on regret keeps to (`PortfolioConfig.guard`; None: no lookup found one)."""
    since: float | None = None
    """When the candidate followed, if not `safe`, began to be followed (the guard's
    "workflows it has affected" arrived since)."""

    def on_prior(self, following: str) -> bool:
        """True while `following` is the one the shipped prior found and no round has
        moved it (`hold`, `confirm`)."""
        return self.incumbent is not None and following == self.incumbent

    def forget(self) -> None:
        """A change of workload: the followed candidate won on the old one."""
        self.protected = False


@dataclass
class RoundPace:
    """When the next round on finished workflows comes."""

    stretch: int = 1
    """The factor on `every` and `period` (`backoff`)."""
    last_round: float = -math.inf
    change_due: bool = False
    """The finished workflows changed size since the last round (`change`)."""
    pending: tuple[float, Choice] | None = None
    """A round's choice and when it takes effect (``replayer=inline``)."""


@dataclass
class Credit:
    """The rounds' CPU credit (`PortfolioConfig.hourly`): modelled seconds, refilled at
    `hourly` per hour of the scheduler's clock up to `cap`, spent by each round."""

    hourly: float | None
    """Modelled seconds per hour (None: no bound, every round may run)."""
    cap: float
    """The most it holds (a quarter of an hour's)."""
    left: float = math.inf
    """What it held at `at` (inf: full, as at the start)."""
    at: float = 0.0
    last: float = 0.0
    """The last round's modelled seconds: what the next is expected to cost."""

    def held(self, now: float) -> float:
        """The credit at `now`."""
        if self.hourly is None:
            return math.inf
        return min(self.cap, self.left + max(0.0, now - self.at) * self.hourly / 3600.0)

    def covers(self, now: float) -> bool:
        """True when a round may start at `now`: the credit covers the last round's cost
        (or holds all it can)."""
        held = self.held(now)
        return held >= min(self.last, self.cap)

    def spend(self, seconds: float, now: float) -> None:
        """A round of `seconds` modelled at `now`."""
        self.left, self.at, self.last = self.held(now) - seconds, now, seconds


@dataclass
class Standings:
    """The rounds remembered (module docstring, "Leaving out the trailing")."""

    stood: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    """The rounds since the last change, those of the last `memory` new workflows: each
    round's new workflows and every candidate's score over the round's best, minus 1."""
    runner_up: str | None = None
    """The last round's runner-up (never rested)."""

    def remember(self, choice: Choice, memory: int) -> None:
        """`choice`'s scores over its best; a candidate that failed counts as 100 %
        behind."""
        if choice.workflows:
            self.runner_up = choice.runner_up
        if choice.new <= 0 or not any(map(math.isfinite, choice.scores.values())):
            return
        self.stood.append((choice.new, excess(choice.scores)))
        while sum(n for n, _ in self.stood[1:]) >= memory:
            del self.stood[0]

    def of(self, window: int) -> dict[str, float]:
        """Per candidate with at least `window` new workflows of evidence in the rounds
        remembered, its mean score over each round's best, minus 1, weighted by each
        round's new workflows."""
        seen: dict[str, int] = {}
        for new, scored in self.stood:
            for c in scored:
                seen[c] = seen.get(c, 0) + new
        return {c: standing(self.stood, c) for c, n in seen.items() if n >= window}

    def dropped(
        self,
        following: str,
        *,
        window: int,
        drop: float | None,
        early: int,
        far: float | None,
        rest: float | None = None,
    ) -> frozenset[str]:
        """The candidates left out of the next round: those whose standing trails the
        leader's by more than `drop` (with `window` new workflows of evidence), or by
        more than `far` (with `early` of them), or that rest (`rested`), but for the
        leader, the one `following`, and the rule under any analytic candidate that
        stays."""
        known = self.of(window)
        out = _trailing(known, drop)
        if far is not None:
            known = self.of(early)
            out |= _trailing(known, far)
        if rest is not None:
            out |= self.rested(rest) - {self.runner_up}
            known = self.of(early) | self.of(window)
        out -= {following}
        # (a round tries the analytic rule over its best rule: with every rule left out,
        # an analytic candidate that stays would not be tried at all)
        stays = (known.keys() - out) | {following}
        for spec in map(SchedulerSpec.parse, sorted(stays)):
            if spec.kind == "analytic" and spec.base is not None:
                out.discard(spec.base.format(label=False))
        return frozenset(out)

    def rested(self, rest: float) -> set[str]:
        """The candidates that lost each of the last n ≥ `REST_AFTER` rounds that scored
        them by more than `rest` (their score over the round's best, minus 1), when fewer
        than n rounds remembered have passed since the last of them: left out for as many
        rounds as they lost in a row."""
        out = set()
        for c in {c for _, scored in self.stood for c in scored}:
            scored = [i for i, (_, s) in enumerate(self.stood) if c in s]
            since = len(self.stood) - 1 - scored[-1]
            lost = 0
            for i in reversed(scored):
                if self.stood[i][1][c] <= rest:
                    break
                lost += 1
            if lost >= REST_AFTER and since < lost:
                out.add(c)
        return out

    def rounds(self) -> tuple[tuple[int, Mapping[str, float]], ...]:
        return tuple(self.stood)

    def unjudged(self, specs: Iterable[str], early: int) -> frozenset[str]:
        """Of `specs`, those with fewer than `early` new workflows of evidence: a round
        that counts for the standings replays them to their end, so that what they
        remember of them is their score, as `far` needs (`runs.Runs`, "Early cuts")."""
        judged = self.of(early)
        return frozenset(s for s in specs if s not in judged)


def _trailing(standings: Mapping[str, float], by: float | None) -> set[str]:
    """The candidates of `standings` more than `by` behind its leader, the leader kept."""
    if by is None or not standings:
        return set()
    leader = min(standings, key=standings.__getitem__)
    # (against the leader's standing, not 0: each round's best is a lucky one)
    lead = standings[leader] + by
    return {c for c, v in standings.items() if v > lead} - {leader}


def _log_work(arrival: JobArrival) -> float:
    return math.log(max(arrival.dag.total_work, 1e-9))


def segments(followed: Sequence[tuple[float, str]], end: float) -> list[tuple[float, float, str]]:
    """(from, to, candidate) stretches of `followed` ((time, candidate) from which each was
    followed, `PortfolioScheduler.followed_from`) up to `end`, empty ones left out."""
    out = []
    for (t0, candidate), (t1, _) in zip(followed, [*followed[1:], (end, "")], strict=True):
        if min(t1, end) > t0:
            out.append((t0, min(t1, end), candidate))
    return out
