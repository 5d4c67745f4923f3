"""A round's replays, shared and cut (`Runs`): a candidate's replay of the window runs
once for every candidate that decides alike, and stops once it cannot change the round.

**Shared replays.** Candidates that make the same decisions on a window have the same
replay: the same arrivals and the same seeds (common random numbers), so the same task
durations, the same JCTs, events and decisions, bit for bit. A replay runs one candidate,
its *lead*, and asks every other rule the round may replay (`shared`) each question
too (`_Shared`); one whose answer differs at any question leaves (it is replayed later,
itself a lead), and one that answered alike to the end has the lead's replay. Asking
costs the candidate's decisions, not the events: a rule's decisions are 6-14 % of its
replay (teams, 205 workflows: srpt 0.25 of 4.2 s, ``analytic?min_gain=0:srpt`` 0.72 of
5.2 s). On teams srpt and the idle rule over it (which never idles there) are one replay
instead of three, and srpt, which all three ask (the idle rule as its base), answers
each question once (`_Shared`: a pure rule's answer is a function of the view). Only rules share: an ONNX policy's or a planner's decisions are most
of its replay, and a scheduler the engine treats apart (a pods gate, an admission
baseline, one told the future, one asked of the whole pool) is replayed alone.

**Early cuts.** The candidate followed is replayed first (`first`). A replay of another
candidate stops once a lower bound on its mean JCT passes `CUT` beyond the *reference*:
the followed candidate's score, or if higher the lowest score of another candidate the
round has asked for. The bound is the window's JCT so far: that of the workflows
finished, the time since arrival of those arrived and unfinished, nothing for those
still to come (`Cluster.jobs_time_integral`), which only grows. A candidate past it
scores above the one followed, so it cannot beat it (`rounds.select` needs a lower
score), nor be the round's best, nor its runner-up (another candidate scores lower than
it, and is not the one chosen): the round's choice, reason and sentence are those of
the replay to its end (but with `cut_behind`, below). Its score (`Scores.cut`) is an estimate no lower than the bound:
its JCT so far over the followed candidate's at the same time of its replay, times the
followed one's score (`Runs._estimate`); it has no per-workflow JCTs (no noise test
reads them: it beats nothing). Never cut: the candidates in `keep`: the one followed,
the guard's safest (whose per-workflow JCTs the round weighs), and those the standings
have not judged yet (`ReplayRequest.exact`), so that what the standings remember of a
candidate until `far` can leave it out is its score (unless `cut_unjudged`: the
scheduler leaves them out of `keep`). Afterwards they remember the
estimate, at least `CUT` over the reference, above `drop`'s 2 %.

**Sooner, by a test.** The bound is sure but late: a replay's area so far passes the
limit near its end. With `ReplayOptions.cut_error` (and one seed) a replay that may be
cut is also cut at the first look where a sequential test on its running difference
from the followed replay says, at that error rate, that it ends past the limit
(`sequential.RunningTest`, `sequential.losing`); its score is the same estimate.

**Behind the followed one.** With `ReplayOptions.cut_behind` the reference of a replay
that may be cut is the followed candidate's score alone, with no `CUT` margin: the sure
bound stops it once its JCT so far passes the followed one's whole, and the test once it
says, at the same error rate, that it ends behind it at all (threshold 0). A candidate
that ends behind the one followed can neither beat it nor be the round's best, whatever
the others score, so no reference beyond it is needed (the first other candidate may be
cut too); it may be the round's runner-up, which then has the cut's estimate as its
score, floored just above the followed one's (`_BEHIND`: a tie is never cut, and a cut
one never ties). On teams the candidate followed and `fifo`, its runner-up 1-2 % behind,
were replayed to their ends in each large round, which no 5 % margin could stop. What
the standings remember of a candidate cut so is its estimate, which may be within 2 %
of the leader (`drop`) or not where its whole would have been.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy.portfolio.candidates import kind_of
from idlegate.policy.portfolio.rounds import Scores
from idlegate.policy.portfolio.sequential import RunningTest, losing
from idlegate.sim.admission_baselines import Admitted
from idlegate.sim.dag import summarised
from idlegate.sim.engine import Engine, JobArrival, SimResult
from idlegate.sim.history import replay_workload
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, PodsGate, Scheduler
from idlegate.sim.queues import QueueSpec, queue_index
from idlegate.sim.resources import ResourceVector

__all__ = ["CUT", "REPLAY_STAGES", "ReplayOptions", "Runs"]

REPLAY_STAGES: Final = 500
"""Most stages a replayed workflow keeps; a larger one is replayed as its summary, a chain
of at most this many stages (`sim.dag.summarised`). The former bound of every workflow, so
a replay of any workflow allowed before is the same."""
CUT: Final = 0.05
"""How far beyond the reference a replay's lower bound must be to stop it: beyond `drop`
(2 %), so that what the standings remember of it still leaves it out."""


@dataclass(frozen=True)
class ReplayOptions:
    """How a round replays its window, beyond the window, its candidates, the pool's size
    and the seed (`Runs`, `replay.replay_portfolio`): one declaration for both."""

    seeds: int = 1
    """Seeds per candidate: seed, seed + 1, ... (the score is their mean)."""
    moving_delay: float = 0.0
    """The live pool's delay for an executor moving between workflows."""
    resources: ResourceVector | None = None
    """The live pool's resources beyond its pods (None: a pods-only pool)."""
    unfinished: int = 0
    """The last this many of the window were not finished when the round began
    (`Scores.unfinished` marks them)."""
    queues: tuple[QueueSpec, ...] = ()
    """The live pool's queues, that the replay runs under (empty: one queue, no quotas)."""
    check: Callable[[], None] | None = None
    """Called before each replay; the `replay.RoundCut` it raises stops the round."""
    cut_error: float | None = None
    """A replay that may be cut is cut sooner by a sequential test at this error rate
    (`sequential.RunningTest`, with one seed; None: only by the sure bound)."""
    cut_behind: bool = False
    """A replay that may be cut is cut once it ends behind the followed one at all (the
    followed candidate's score the reference, no `CUT` margin; module docstring,
    "Behind the followed one")."""


@dataclass
class _Replay:
    """One candidate's replay so far: per workflow its JCT summed over the seeds replayed."""

    total: np.ndarray
    seeds: int = 0
    """Seeds replayed to their end."""
    events: int = 0
    decisions: int = 0
    failed: str | None = None
    bound: float | None = None
    """Cut: its score, at least the lower bound of its mean JCT (`Runs._estimate`)."""

    @property
    def open(self) -> bool:
        return self.failed is None and self.bound is None


class Runs:
    """One round's replays of `window` on `num_executors` from `seed`, as `options` say
    (None: `ReplayOptions()`):
    `scores` of any candidates, each replayed once in the round (module docstring: shared replays,
    early cuts). `build` gives the replay's instance of a spec text (one per text)."""

    def __init__(
        self,
        window: Sequence[JobArrival],
        build: Callable[[str], Scheduler],
        num_executors: int,
        seed: int,
        options: ReplayOptions | None = None,
        *,
        first: str | None = None,
        shared: Sequence[str] = (),
        keep: frozenset[str] = frozenset(),
    ) -> None:
        # a workflow of thousands of stages costs a replay per stage, and what a round weighs
        # is its completion time: its summary (`sim.dag.summarised`) tells about as much
        shown = [
            a
            if a.dag.num_stages <= REPLAY_STAGES
            else replace(a, dag=summarised(a.dag, REPLAY_STAGES), durations=None)
            for a in window
        ]
        options = options or ReplayOptions()
        queues = options.queues
        workload = replay_workload(
            shown, num_executors, moving_delay=options.moving_delay, resources=options.resources
        )
        self._workload = replace(workload, queues=tuple(queues)) if queues else workload
        n = len(self._workload.jobs)
        # (the replay orders the window by arrival, stably: `times` and `late` in that order)
        order = sorted(range(n), key=lambda i: window[i].time)
        self._names = _queue_names([window[i] for i in order], queues) if len(queues) > 1 else None
        self._times = np.array([window[i].time for i in order], dtype=float)
        self._late = np.array([i >= n - options.unfinished for i in order], dtype=bool)
        self._build, self._seed, self._seeds = build, seed, options.seeds
        self._check = options.check
        self._cut_error = options.cut_error if options.seeds == 1 else None
        self._behind = options.cut_behind
        self._test: RunningTest | None = None
        self._first = first
        self._shared = tuple(dict.fromkeys(shared))
        self._keep = keep
        self._replays: dict[str, _Replay] = {}
        self._asked: set[str] = set()

    def scores(self, specs: Sequence[str]) -> Scores:
        """The replays of `specs` (those replayed before in the round as they were): each
        candidate's mean JCT, per-workflow JCTs, decisions and failure, and the events of
        their replays, each counted as if replayed alone (shared or not). `check` is
        called before each replay; the `replay.RoundCut` it raises stops the round."""
        self._asked.update(specs)
        if self._first is not None:  # (the reference of the cuts, before any other)
            self._complete(self._first)
        for spec in specs:
            self._complete(spec)
        n = len(self._workload.jobs)
        means: dict[str, float] = {}
        decisions: dict[str, int] = {}
        failed: dict[str, str] = {}
        jcts: dict[str, np.ndarray] = {}
        events = 0
        for spec in specs:
            r = self._replays[spec]
            events += r.events
            decisions[spec] = r.decisions
            if r.failed is not None:
                failed[spec], means[spec] = r.failed, math.inf
            elif r.bound is not None:
                means[spec] = r.bound
            else:
                means[spec] = float(np.mean(r.total)) / self._seeds
                jcts[spec] = r.total / self._seeds
        cut = tuple(s for s in specs if self._replays[s].bound is not None)
        return Scores(
            means, n, events, decisions, failed, jcts, self._late, self._times, self._names, cut
        )

    def _complete(self, spec: str) -> None:
        """Replay `spec` on every seed (it may share a replay, be cut or fail)."""
        r = self._replay(spec)
        while r.open and r.seeds < self._seeds:
            self._run(spec, r.seeds)

    def _replay(self, spec: str) -> _Replay:
        if spec not in self._replays:
            self._replays[spec] = _Replay(np.zeros(len(self._workload.jobs)))
        return self._replays[spec]

    def _run(self, lead: str, s: int) -> None:
        """One replay on seed `seed` + `s` led by `lead`, shared with the rules of `shared`
        at the same point, cut past the reference if `lead` may be cut."""
        if self._check is not None:
            self._check()
        scheduler = self._build(lead)
        mine = self._replay(lead)
        limit = self._limit(lead)
        # (behind the followed one: its score stays above it, whatever the estimate)
        floor = self._floor(lead, limit)
        shadows: dict[str, Scheduler] = {}
        if _sharable(lead, scheduler):
            so_far = float(mine.total.sum())
            for spec in self._shared:
                r = self._replay(spec)
                alike = r.open and r.seeds == s and spec != lead
                if limit is not None:  # (cut with the lead: one that may be, as far along)
                    alike = alike and spec not in self._keep and float(r.total.sum()) == so_far
                if alike and _sharable(spec, other := self._build(spec)) and other is not scheduler:
                    shadows[spec] = other
        asked = _Shared(scheduler, shadows) if shadows else scheduler
        test = self._running_test() if limit is not None else None
        try:
            result = _simulate(self._workload, asked, self._seed + s, limit, test)
            # (a replay runs until every workflow finished)
            if isinstance(result, SimResult) and result.unfinished:
                raise IdlegateError(f"{result.unfinished} workflow(s) never finished")
        except Exception as exc:  # a failing candidate loses the round, the others go on
            mine.failed = f"{type(exc).__name__}: {exc}"
            return
        finally:
            if isinstance(asked, _Shared):
                asked.close()
        for spec in [lead, *(asked.alike if isinstance(asked, _Shared) else ())]:
            r = self._replay(spec)
            r.events += result.events
            r.decisions += result.decisions
            if isinstance(result, _Cut):
                r.bound = max(self._estimate(r, result), floor)
                continue
            for record in result.records:  # (record ids are the replay's arrival order)
                r.total[record.id] += record.jct
            r.seeds += 1

    def _limit(self, lead: str) -> float | None:
        """The window's JCT so far past which `lead`'s replay on its next seed stops (its
        seeds before counted), or None: it is kept, or no reference is known yet."""
        first = self._first
        if lead in self._keep or first is None or lead == first:
            return None
        reference = self._exact(first)
        mine = self._replay(lead)
        n = len(mine.total)
        if self._behind:  # (the followed one's score, without margin, strictly above it)
            if reference is None or not math.isfinite(reference):
                return None
            return (1 + _BEHIND) * reference * n * self._seeds - float(mine.total.sum())
        others = [
            v
            for c in self._asked - {first, lead}
            if c in self._replays and (v := self._exact(c)) is not None
        ]
        if reference is None or not others:
            return None
        reference = max(reference, min(others))
        if not math.isfinite(reference):
            return None
        return (1 + CUT) * reference * n * self._seeds - float(mine.total.sum())

    def _floor(self, lead: str, limit: float | None) -> float:
        """The least score of `lead` cut behind the followed one (`cut_behind`): the
        limit's, strictly above the followed one's score (0: no such floor)."""
        if not self._behind or limit is None:
            return 0.0
        mine = self._replay(lead)
        return (limit + float(mine.total.sum())) / (len(mine.total) * self._seeds)

    def _running_test(self) -> RunningTest | None:
        """The sequential test against the followed candidate's replay (`cut_error`), once
        that replay is complete (None: no test)."""
        if self._test is None and self._cut_error is not None and self._first is not None:
            followed = self._replays.get(self._first)
            if followed is not None and followed.open and followed.seeds == self._seeds:
                arrived = np.array([a.time for a in self._workload.jobs], dtype=float)
                self._test = RunningTest.of(arrived, followed.total, self._cut_error)
        return self._test

    def _estimate(self, replay: _Replay, cut: _Cut) -> float:
        """The score of `replay`, cut at `cut`: its JCT so far over the followed
        candidate's at the same time of its replay, times the followed one's score, and
        at least its lower bound (the followed one's JCT so far is at most its whole).
        What the standings remember of it, as far behind as it ran."""
        n = len(replay.total)
        bound = (float(replay.total.sum()) + cut.area) / (n * self._seeds)
        followed = self._replays[self._first] if self._first is not None else None
        if followed is None or followed.seeds < self._seeds or not followed.open:
            return bound
        jcts = followed.total / self._seeds
        arrived = np.array([a.time for a in self._workload.jobs], dtype=float)
        so_far = float(np.clip(cut.at - arrived, 0.0, jcts).sum())
        if so_far <= 0:
            return bound
        return max(bound, cut.area / so_far * float(jcts.mean()))

    def _exact(self, spec: str) -> float | None:
        """`spec`'s score if it was replayed to its end on every seed (inf: it failed)."""
        r = self._replays.get(spec)
        if r is None or r.bound is not None:
            return None
        if r.failed is not None:
            return math.inf
        if r.seeds < self._seeds:
            return None
        return float(np.mean(r.total)) / self._seeds


class _Shared:
    """`lead` asked each question, and every one of `shadows` too: those that answer
    otherwise leave; at the end those left (`alike`) made every decision `lead` made.

    A pure rule (`pure`: its answer a function of the view) that several of them ask,
    itself or as the `base` a rule wraps (the idle rule over srpt at each threshold, and
    srpt), answers each question once (`_Once`): on teams the replay the candidate
    followed leads asked srpt three times a question, most of the replay's cost. `close`
    gives the wrapping rules their own base back."""

    def __init__(self, lead: Scheduler, shadows: dict[str, Scheduler]) -> None:
        self.name = getattr(lead, "name", type(lead).__name__)
        self.question = 0
        """The questions asked so far (what `_Once` remembers its answer for)."""
        self._lead = lead
        self._shadows = dict(shadows)
        self._asks: dict[int, Callable[[ClusterView], Action]] = {}
        """Per member (by id), what it is asked through: a `_Once` for a pure rule."""
        self._bases: list[tuple[Any, Scheduler]] = []
        """The wrapping members whose `base` is a `_Once` now, with their own base."""
        onces: dict[str, _Once] = {}
        members = [lead, *shadows.values()]
        keys = [_pure_key(m) or _pure_key(getattr(m, "base", None)) for m in members]
        for member, key in zip(members, keys, strict=True):
            if key is None or keys.count(key) < 2:
                continue
            if _pure_key(member) == key:
                once = onces.setdefault(key, _Once(member, self))
                self._asks[id(member)] = once.decide
            else:
                base = member.base  # type: ignore[attr-defined]
                once = onces.setdefault(key, _Once(base, self))
                self._bases.append((member, base))
                member.base = once  # type: ignore[attr-defined]
        for once in onces.values():
            once.share_evaluations([m for m, _ in self._bases if m.base is once])

    def close(self) -> None:
        """The wrapping members' own bases back (the replay ended)."""
        for member, base in self._bases:
            member.base = base
        self._bases.clear()

    def _ask(self, member: Scheduler, view: ClusterView) -> Action:
        ask = self._asks.get(id(member))
        return member.decide(view) if ask is None else ask(view)

    @property
    def alike(self) -> list[str]:
        return list(self._shadows)

    def reset(self, rng: Any) -> None:
        """Each gets the run's stream as it is now, as its own replay would give it."""
        streams = {spec: copy.deepcopy(rng) for spec in self._shadows}
        self._lead.reset(rng)
        for spec, shadow in self._shadows.items():
            shadow.reset(streams[spec])

    def decide(self, view: ClusterView) -> Action:
        self.question += 1
        action = self._ask(self._lead, view)
        for spec, shadow in list(self._shadows.items()):
            try:
                other: Action | None = self._ask(shadow, view)
            except Exception:  # (it fails where the lead did not: replayed alone, it fails there)
                other = None
            if not _same(action, other):
                del self._shadows[spec]
        return action


class _Once:
    """A pure `rule` that a shared replay's members ask: it answers each of `shared`'s
    questions once, and repeats that answer (an exception too) to the others.

    As the base of wrapping rules alike but for their threshold (the idle rule at each
    `min_gain`: the same `evaluation_key`), it also works out their evaluation of its
    answer once (`shared_evaluation`, which such a rule asks its base for when it has
    one): on teams' largest rounds the replay the candidate followed leads asked it
    twice a question."""

    def __init__(self, rule: Scheduler, shared: _Shared) -> None:
        self.name = getattr(rule, "name", type(rule).__name__)
        self._rule, self._shared = rule, shared
        self._asked = -1
        self._answer: Action | Exception = WAIT
        self._evaluations: dict[int, _OnceEvaluation] = {}
        """Per wrapping member (by id) whose evaluation another shares, the one they share."""

    def share_evaluations(self, wrapping: Sequence[Any]) -> None:
        """Of `wrapping` (rules over this base), those with the same `evaluation_key`
        share one evaluation of each question and decision (`shared_evaluation`)."""
        groups: dict[str, list[Any]] = {}
        for member in wrapping:
            key = getattr(member, "evaluation_key", None)
            if isinstance(key, str) and callable(getattr(member, "evaluate", None)):
                groups.setdefault(key, []).append(member)
        for members in groups.values():
            if len(members) < 2:
                continue
            once = _OnceEvaluation(members[0].evaluate, self._shared)
            for member in members:
                self._evaluations[id(member)] = once

    def shared_evaluation(self, member: Any, view: ClusterView, decision: Decision) -> Any:
        """`member.evaluate(view, decision)`, worked out once for the members that share
        it (`share_evaluations`), each then applying its own threshold."""
        once = self._evaluations.get(id(member))
        return member.evaluate(view, decision) if once is None else once.evaluate(view, decision)

    def reset(self, rng: Any) -> None:
        self._rule.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        if self._asked != self._shared.question:
            self._asked = self._shared.question
            try:
                self._answer = self._rule.decide(view)
            except Exception as exc:  # (each member asked fails as it would alone)
                self._answer = exc
        if isinstance(self._answer, Exception):
            raise self._answer
        return self._answer


class _OnceEvaluation:
    """One evaluation that rules alike but for their threshold share (`_Once`): worked out
    once per question and decision."""

    def __init__(self, evaluate: Callable[[ClusterView, Decision], Any], shared: _Shared) -> None:
        self._evaluate, self._shared = evaluate, shared
        self._asked: tuple[int, Decision] | None = None
        self._answer: Any = None

    def evaluate(self, view: ClusterView, decision: Decision) -> Any:
        asked = (self._shared.question, decision)
        # (the same decision object: their base answered once, `_Once`)
        if self._asked is None or self._asked[0] != asked[0] or self._asked[1] is not decision:
            self._asked = asked
            try:
                self._answer = self._evaluate(view, decision)
            except Exception as exc:  # (each rule asked fails as it would alone)
                self._answer = exc
        if isinstance(self._answer, Exception):
            raise self._answer
        return self._answer


def _pure_key(rule: Any) -> str | None:
    """What tells a pure rule (`_Shared`) from another: its type and parameters (None:
    not a pure rule)."""
    if rule is None or getattr(rule, "pure", False) is not True:
        return None
    return repr(rule)


def _same(a: Action, b: Action | None) -> bool:
    """True if `a` and `b` are the same answer (the same stage, cap and idle slot)."""
    if a is b:
        return True
    return (
        isinstance(a, Decision)
        and isinstance(b, Decision)
        and a.stage is b.stage
        and a.parallelism_cap == b.parallelism_cap
        and a.idle_delay == b.idle_delay
    )


def _sharable(spec: str, scheduler: Scheduler) -> bool:
    """True for a rule the engine runs as it is (module docstring, "Shared replays")."""
    return (
        kind_of(spec) == "rule"
        and not isinstance(scheduler, Admitted | PodsGate)
        and not callable(getattr(scheduler, "foresee", None))
        and not getattr(scheduler, "needs_cluster", False)
    )


@dataclass(frozen=True)
class _Cut:
    """A replay stopped: the window's JCT so far (`area`), and what it cost until then."""

    area: float
    at: float
    """The replay's clock when it stopped."""
    events: int
    decisions: int


_SLACK: Final = 1e-9
"""Relative slack on the limit (the area's float sums; the cut's own margin is `CUT`)."""
_BEHIND: Final = 4 * _SLACK
"""With `cut_behind`, the margin past the followed one's score of the limit: past the
slack, so that a candidate that ties the followed one is never cut."""


def _simulate(
    workload: Any,
    scheduler: Scheduler,
    seed: int,
    limit: float | None,
    test: RunningTest | None = None,
) -> SimResult | _Cut:
    """`sim.engine.simulate` of `scheduler`, stopped as soon as the window's JCT so far
    reaches `limit` (None: never), or `test` says at one of its looks that it will end
    past it (`sequential.losing`). Between arrivals that JCT grows at the number of
    workflows unfinished a second, less as they finish, so the run steps to the next
    arrival, look or to when it would reach the limit if none finished, whichever first:
    a run stepped so is the same run (`Engine.run`)."""
    engine = Engine.for_workload(workload, scheduler, seed)
    if engine.cluster.admission is not None:  # (a replay's JCTs are read, not its queues')
        engine.cluster.admission.counts = False
    if limit is None:
        engine.run()
        return engine.result(workload.name, scheduler.name, seed)
    cluster = engine.cluster
    arrivals = sorted({a.time for a in workload.jobs})
    looks = test.times if test is not None else ()
    differences: list[float] = []
    i = 0
    while engine.peek() < math.inf:
        now = cluster.now
        area = cluster.jobs_time_integral
        if area >= limit * (1 - _SLACK):
            return _Cut(area, now, engine.events, cluster.decisions)
        # (every look passed; the run steps to each, but for a jump over an empty pool,
        # whose area is the same all along, or below the clock's resolution)
        while test is not None and len(differences) < len(looks) and now >= looks[len(differences)]:
            differences.append(test.difference(len(differences) + 1, area))
            if losing(differences, limit / test.whole - 1, test.error):
                return _Cut(area, now, engine.events, cluster.decisions)
        if not cluster.jobs:  # (nothing unfinished: on to the next arrivals)
            engine.run(engine.peek())
            continue
        while i < len(arrivals) and arrivals[i] <= now:
            i += 1
        until = now + (limit - area) / len(cluster.jobs)
        if i < len(arrivals):
            until = min(until, arrivals[i])
        if len(differences) < len(looks):
            until = min(until, looks[len(differences)])
        # (a step below the clock's resolution: on to the next event)
        engine.run(until if until > now else engine.peek())
    return engine.result(workload.name, scheduler.name, seed)


def _queue_names(
    window: Sequence[JobArrival], queues: Sequence[QueueSpec]
) -> tuple[str, ...] | None:
    """The queue each of `window` is replayed in (`sim.queues.queue_index` of the queue it
    names); None if one names a queue the pool lacks (the replay fails then anyway)."""
    try:
        return tuple(queues[queue_index(queues, a.queue)].name for a in window)
    except IdlegateError:
        return None
