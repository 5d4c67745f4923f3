"""Intervals that hold what they say: the replays' interval widened by how past forecasts did.

The replays' 10th–90th percentile interval (`sim.forecast`) only spreads over what the
replays draw (task durations, invented arrivals); what they cannot draw (arrivals not
invented, the policy the portfolio switches to, a failure) makes it too narrow. So each
forecast, once its workflow started (or finished), gives a score, how far outside its
interval the actual fell, per second the forecast looked ahead:

    score = max(low − actual, actual − high) ÷ max(median − made_at, FLOOR)

(negative inside). A new interval is widened by the `COVERAGE` quantile Q of the last
`WINDOW` scores, in proportion to how far ahead it looks: [low − Q·ahead, high + Q·ahead]
(Q < 0 narrows it, never past the median). This is conformalized quantile regression
(Romano, Patterson and Candès, 2019) with the score scaled by the lead time; with
exchangeable scores it covers `COVERAGE` of the actuals whatever the replays missed.
Before `MIN_SCORES` scores there is no quantile to take: a calibration made with a
`prior` widens by it instead (`START_PRIOR`, `FINISH_PRIOR`: the quantile the scores of
the training runs gave), else the replays' interval is given as it is. A finish
calibration follows its start's (`after`): before its own scores, the finish of a
workflow still waiting is widened by the start's margin over the start's lead and by its
own prior over the rest (`Calibration.widen`'s `start`), since a finish is a start plus a
run and is as far off as its start was.

A live pool's (the operator's, whose replays draw from its own task times:
`sim.task_times`, `calibrations(live=True)`) has no prior fitted anywhere: what the
simulator's runs gave is not what a cluster's pool does, so it widens by its own scores,
from the `LIVE_MIN_SCORES`-th. Before them (a cold pool: a burst's forecasts are all made
at once, before any of them can have come out) its start widens by what its own tasks
say (`cold_margin`), and its finish by that over its wait (the replays' own spread over
its run). Its tasks end within the first minute of a burst, long before its workflows
do, and each is a forecast of the pool's that came out: its time against what the tasks
before it predicted (`sim.task_times.TaskTimes.told`), a score as a workflow's is, per
second predicted. A start is the end of the tasks ahead of it, off per second ahead by
as much as they are when they err together (what the replays' interval does not draw:
they draw each task apart), so the widening is those scores' `COVERAGE` quantile, taken
with its own uncertainty: its upper bound at `CONFIDENCE` (`upper_quantile`, from the
11th task scored; before, the stated wide default `LIVE_COLD`, not a measurement). Few
tasks give a wide bound, many the quantile itself: it shrinks as the pool's evidence
arrives, from nothing fitted on another pool.

A cold live pool's forecasts also share one error that no score has measured yet: the
pool's average task time, known from its few ended tasks, is off by one amount for every
workflow behind them. Its replays draw that error (`sim.task_times.LiveTimes.begin`, a
normal draw with the average's standard error s, on the log of the stretch), one draw
per replay, so their spread holds it only in part: the truth lies from their median by
s·√(1 + 1/R) (R replays), their own spread holds s·√(1 − 1/R), and fewer replays run
where events are dear (a pool that follows its nodes, within `sim.forecast.SECONDS`).
So a start is widened by the part the replays left out, s·√(2/R) (their variances'
difference), at the interval's top's level (`shared_margin`), on top of its prior or its
scores' quantile: the standard error shrinks as the pool's tasks end, and with more
replays this part goes (`Calibration.shared`). It is sampling error only: a burst whose
first tasks to end are quicker than the rest leaves the average low by more
(docs/research/forecasts.md, "The error a cold burst shares").

That error is one draw per refresh, the same for all its forecasts: large at a cold
burst's first refresh, small once many tasks ended. Scores carrying it do not transfer
from one burst to the next (on the live benchmark a cold burst's point forecasts, good
by chance, left small scores that held 56 % of the warm burst's starts). So a forecast
is scored as its refresh would have made it knowing the pool's typical stretch as the
pool knows it at the score (`rescaled`, `Calibration.record`'s `typical`: each time
ahead scaled by the ratio of the two, `sim.task_times.LiveTimes.typical`): its score is
what the replays missed besides that error, and each new forecast adds its own
refresh's unspread part (`shared`) to the scores' quantile as to the prior. A pool
that learns no task times scores at a ratio of 1, as before; a record read back after a
restart keeps no typical stretch of its refresh, and is scored as made.

A live pool's scores are taken per lead band (`banded`, `band`: leads within a doubling
of each other, from `FLOOR`): a burst's forecasts are made at once and its tail, the
longest leads, is the part that later arrivals overtake, so its misses per second of lead
are not those of the forecasts near the front. Pooled, the window's 80 % quantile lands in
the tail's cluster (on the live benchmark, the warm pool's replays' interval held 37 % of
its starts and, widened by the cold burst's pooled scores, 99 %: docs/research/forecasts.md,
"Scores per lead band"), and widens every lead by it. Taken in its own band (Mondrian
conformal prediction: exchangeable within a band), a forecast is widened by how forecasts
that looked as far ahead did; a band with fewer than `least` scores takes them all, as
before. `idlegate forecast evaluate`'s calibrations are not banded (its figures are as
they were).

Pure: the operator keeps one per pool and forecast kind (start, finish) and records each
forecast as its workflow starts and ends, as `evaluation.forecast_eval` does in a run.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from statistics import NormalDist

from idlegate.sim.forecast import Span
from idlegate.sim.task_times import HIGH, TaskTimes

COVERAGE = 0.8
"""The share of actuals the widened interval is to hold (the 80 % interval)."""
WINDOW = 200
"""Scores kept: the most recent, so that the widening follows a pool that changes."""
MIN_SCORES = 20
"""Scores needed before any widening."""
LIVE_MIN_SCORES = 4
"""`MIN_SCORES` of a live pool (`calibrations`' `live`), which has no prior to fall back on:
the fewest scores whose conformal quantile exists, ⌈(n + 1) · 0.8⌉ ≤ n (with 4, the largest
of them: the least a pool's own forecasts can say of how far off they are, at once)."""
FLOOR = 5.0
"""Seconds: the least lead time a score is divided by, and an interval widened by (a
forecast of now: a start a second or two later, as the pool's next decision makes it,
would otherwise score as a miss of whole seconds per second ahead and widen every
interval after it). 5 s, fitted with the priors on training seeds (with them, 1 s
held 76 % of tpch's starts on seeds 0-3, 5 s 81 %, 10 s 85 %)."""


START_PRIOR = 0.3
"""Q of a start forecast before `MIN_SCORES` scores (a cold start: a new pool, a flood
that arrives at once): per second ahead, fitted on seeds 0-99 of the four workloads of
docs/research/forecasts.md, none of the held-out ones."""
START_PRIOR_INVENTED = 0.25
"""`START_PRIOR` of a pool whose replays invent arrivals (`sim.forecast_arrivals`): they
spread already over part of what the prior stands for (the arrivals not seen), and 0.3
on top held 89.5 % of teams' starts on training seeds 0-1 (per queue); 0.25 held 83.9 %,
0.2 79.0 %, with tpch's (Poisson, seeds 0-3) 81.2 %, 79.2 % and 79.2 %. 0.25 for the
finishes, which take the start's margin over their wait (`Calibration.widen`): on teams
they held 81.4 % at 0.25, 75.4 % at 0.2."""
LIVE_COLD = 0.25
"""Q of a live pool's start before its own `LIVE_MIN_SCORES` scores and before its tasks
bound one (`cold_margin`): a quarter of the lead on each side of the replays' interval.
Not fitted on any run: it is the accuracy issue 80 asks of a live pool's start (within
25 % of its wait), stated as the interval a pool gives while nothing of its own says how
far off it is. The replays' interval alone
spreads over the task times and dispatch delays the pool has seen (`sim.task_times`), not
over what they cannot draw (workflows not submitted yet that overtake, a burst only
partly seen),
and on the live benchmark a cold pool's held 7-55 % of its starts
(docs/research/forecasts.md, "Calibrated live"). Wide on purpose: once eleven of the
pool's tasks were scored, their bound replaces it, and once four of its forecasts came
out, their scores, narrower or wider."""
CONFIDENCE = 0.9
"""How sure the bound of a cold live pool's widening from its tasks is (`cold_margin`,
`upper_quantile`): the interval's top's own level (`sim.forecast.HIGH`), stated, not fitted."""
FINISH_PRIOR = 0.05
"""Q of a finish forecast before `MIN_SCORES` scores (as `START_PRIOR`)."""
FINISH_COVERAGE = 0.83
"""The quantile a finish calibration takes of its scores. A little over `COVERAGE`: a
finish's scores drift (a stream whose load builds makes each finish later than the last
window's forecasts were off by), so the quantile of past scores lags. On training seeds
0.8 held 75 % of tpch's finishes (0-3) and 81 % of k8s-batch's (0-29); 0.83 held 77 %
and 83 %; 0.85 79 % and 84 %."""


class Calibration:
    """The scores of resolved forecasts of one kind, and the widening they give: their
    `coverage` quantile; `prior` the widening before there are enough of them (None: none)."""

    def __init__(
        self,
        prior: float | None = None,
        coverage: float = COVERAGE,
        after: Calibration | None = None,
        least: int = MIN_SCORES,
        banded: bool = False,
    ) -> None:
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"a calibration's coverage is a share in (0, 1), not {coverage}")
        self.scores: deque[float] = deque(maxlen=WINDOW)
        self.aheads: deque[float] = deque(maxlen=WINDOW)
        """Each score's lead (seconds its forecast looked ahead, at least `FLOOR`)."""
        self.banded = banded
        """The quantile taken of the scores in the lead's `band` (module docstring)."""
        self.prior = prior
        self.coverage = coverage
        self.least = least
        """Scores needed before the quantile is taken."""
        self.after = after
        """The calibration of the forecast this one's comes after (a finish's: its start's),
        whose margin widens the part of the lead time before that forecast while this one
        has no scores of its own (`widen`'s `start`)."""
        self.shared = 0.0
        """Per second ahead, added to the scores' quantile or the prior standing for them:
        a live pool's refresh's error its forecasts share that its replays did not spread
        (`shared_margin`, set at each refresh; 0 elsewhere)."""

    def resume(self, older: Calibration) -> None:
        """Take `older`'s scores (a restarted pool's, rebuilt from its records) ahead of
        those recorded since: the newest `WINDOW` of them all are kept."""
        self.scores = deque([*older.scores, *self.scores], maxlen=WINDOW)
        self.aheads = deque([*older.aheads, *self.aheads], maxlen=WINDOW)

    def record(self, span: Span, made_at: float, actual: float, typical: float = 1.0) -> None:
        """A forecast made at `made_at` came out at `actual`; `typical`: the pool's typical
        stretch as known now over the one its refresh drew from (`rescaled`)."""
        span = rescaled(span, made_at, typical)
        ahead = max(span.median - made_at, FLOOR)
        self.scores.append(max(span.low - actual, actual - span.high) / ahead)
        self.aheads.append(ahead)

    def margin(self, ahead: float | None = None) -> float | None:
        """Q: the widening per second ahead, the scores' quantile (before `least` scores:
        the prior; None without one) and the `shared` error; of a `banded` calibration, of
        the scores in `ahead`'s `band` when it holds `least` of them."""
        scores: Iterable[float] = self.scores
        if self.banded and ahead is not None:
            mine = band(ahead)
            alike = [s for s, a in zip(self.scores, self.aheads, strict=True) if band(a) == mine]
            if len(alike) >= self.least:
                scores = alike
        # (the scores are free of their refreshes' error of the typical stretch, `record`:
        # this refresh's own unspread part adds to them, as to the prior)
        q = conformal(scores, self.coverage, self.least, self.prior)
        return None if q is None else q + self.shared

    def widen(
        self,
        span: Span,
        made_at: float,
        earliest: float | None = None,
        start: Span | None = None,
    ) -> Span:
        """`span` widened by the margin (as it is before there is one); no lower than
        `earliest` (a start cannot come before the forecast). A finish's `span` with its
        workflow's forecast `start` ahead, before `MIN_SCORES` scores of its own, is widened
        by the `after` calibration's margin over the start's lead and by the prior over
        the rest: a finish is as far off as its start, and its run's own error on top."""
        ahead = max(span.median - made_at, FLOOR)
        q = self.margin(ahead)
        waits = 0.0 if start is None else min(max(start.median - made_at, 0.0), ahead)
        before = None
        if waits > 0.0 and self.after is not None and len(self.scores) < self.least:
            before = self.after.margin(max(waits, FLOOR))
        if q is None and before is None:
            return span
        widening = (q or 0.0) * ahead
        if before is not None:  # (a live pool's finish has no prior: its run's part is 0)
            widening = before * waits + (q or 0.0) * (ahead - waits)
        low = min(span.median, span.low - widening)
        if earliest is not None:
            low = max(low, min(earliest, span.median))
        return Span(low, span.median, max(span.median, span.high + widening))


def rescaled(span: Span, made_at: float, typical: float) -> Span:
    """`span`, made at `made_at`, as its refresh would have made it had it known the pool's
    typical stretch `typical` times better (module docstring, "shared"): each time ahead
    scaled by it (the tasks' part of a lead is their stretch times what they declare; the
    latencies in it are taken as scaling alike)."""
    if typical == 1.0:
        return span
    return Span(*(made_at + (t - made_at) * typical for t in span))


def band(ahead: float) -> int:
    """A lead's band: leads within the same doubling from `FLOOR` share one (5-10 s,
    10-20 s, 20-40 s, ...), so that a band is as wide, relatively, at every lead."""
    return math.floor(math.log2(max(ahead, FLOOR) / FLOOR))


def conformal(
    scores: Iterable[float], coverage: float, least: int, prior: float | None
) -> float | None:
    """The conformal quantile of `scores`, their ⌈(n + 1)·coverage⌉-th smallest (the
    largest, if that rank is beyond n); `prior` with fewer than `least`."""
    ordered = sorted(scores)
    n = len(ordered)
    if n < least:
        return prior
    return ordered[min(n, math.ceil((n + 1) * coverage)) - 1]


def start_prior(invented: bool, live: bool = False, tasks: TaskTimes | None = None) -> float | None:
    """The start's prior of a pool whose replays invent arrivals (`invented`) or not; a
    `live` pool's (one whose replays draw from its own task times, `sim.task_times`) is
    never what the simulator's runs gave: `cold_margin` of its `tasks` (None: the stated
    default `LIVE_COLD`), until its own `LIVE_MIN_SCORES` scores replace it."""
    if live:
        return LIVE_COLD if tasks is None else cold_margin(tasks)
    return START_PRIOR_INVENTED if invented else START_PRIOR


def cold_margin(tasks: TaskTimes) -> float:
    """A cold live pool's start widening, from its own tasks (module docstring): each of
    its tasks' time scored against what the tasks before it predicted (`TaskTimes.told`),
    as a forecast is scored (`Calibration.record`, the lead being the predicted median),
    and of those scores the `COVERAGE` quantile's upper bound with `CONFIDENCE`
    (`upper_quantile`): few tasks give a wide bound, many the quantile itself. Never below
    0 (a cold pool is widened, never narrowed, before any of its forecasts came out);
    `LIVE_COLD` while its tasks are too few for a bound."""
    told = Calibration()
    for low, median, high, held in tasks.told:
        told.record(Span(low, median, high), 0.0, held)
    q = upper_quantile(told.scores, COVERAGE, CONFIDENCE)
    return LIVE_COLD if q is None else max(q, 0.0)


TOP = NormalDist().inv_cdf(HIGH)
"""The standard normal's quantile at the interval's top's level (1.2816 at 0.9)."""


def shared_margin(spread: float, replays: int) -> float:
    """The widening per second ahead that a live pool's refresh of `replays` replays owes
    the error its forecasts share (module docstring): `spread` the standard error of the
    log of its average stretch (`LiveTimes.spread`), of which the replays' own spread
    holds a share √(1 − 1/R) and the truth lies √(1 + 1/R) from their median; the rest,
    √(2/R), at the interval's top's level, as the factor it puts on the lead less one."""
    if spread <= 0.0 or replays < 1:
        return 0.0
    return math.expm1(TOP * spread * math.sqrt(2.0 / replays))


def upper_quantile(values: Iterable[float], level: float, confidence: float) -> float | None:
    """An upper bound of the `level` quantile of the distribution `values` are drawn from
    (independently), which holds with probability at least `confidence`: the least k-th
    smallest value with P(Binomial(n, level) ≤ k − 1) ≥ `confidence` (the k-th is below
    the quantile only if at least k of the n fell below it, each with probability at most
    `level`). Distribution-free; None when even the largest is not enough (1 − levelⁿ <
    `confidence`: at 0.8 and 0.9, fewer than 11 values; with 11, their largest)."""
    ordered = sorted(values)
    n, below = len(ordered), 0.0
    for k in range(1, n + 1):
        below += math.comb(n, k - 1) * level ** (k - 1) * (1.0 - level) ** (n - k + 1)
        if below >= confidence:
            return ordered[k - 1]
    return None


def calibrations(invented: bool = False, live: bool = False) -> dict[str, Calibration]:
    """A pool's fresh pair, start and finish, with their priors and coverages (the start's
    as `start_prior(invented, live)`; a `live` pool's finish has no prior of its own: it
    widens by its start's over the wait, `Calibration.widen`): what
    the operator keeps per pool and the evaluation per run, made here alone so that what
    is measured is what runs."""
    least = LIVE_MIN_SCORES if live else MIN_SCORES
    start = Calibration(start_prior(invented, live), least=least, banded=live)
    finish_prior = None if live else FINISH_PRIOR
    finish = Calibration(finish_prior, FINISH_COVERAGE, after=start, least=least, banded=live)
    return {"start": start, "finish": finish}
