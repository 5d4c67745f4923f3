"""What a round says (`Scores`, `Choice`) and how it chooses (`select`).

**Following with a margin, beyond the noise.** The best-scoring candidate replaces the
one followed only when its score is lower by more than `margin` (a fraction) of the
followed one's score, and its lead is beyond the window's own noise: more than
`confidence` standard errors of the mean of the paired per-workflow JCT differences
(`beyond_noise`), raised for the number of challengers compared when asked
(`round_confidence`, `threshold`). A small window, or one whose difference is a few
workflows, needs a large lead; a tie (the same score: the same decisions on the window) or a lead within
the noise keeps the candidate followed (reason ``noise`` when the margin alone would
have switched). The margin protects only a candidate that won a round outright (`won`):
the start's, or one kept only by ties, gives way to any better score beyond the noise.
After a round that switches nothing the next comes later (`backoff`), until a switch or
until the finished workflows change size (`change`). The outcome is a `Choice`: which
candidate is followed and why (its score, the runner-up's, the window's size), as data
and as a sentence: "following srpt: 642 s vs fair 734 s over the last 48 workflows".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy.account import sentence, tied_best

__all__ = [
    "Choice",
    "Reason",
    "Scores",
    "behind",
    "beyond_noise",
    "carried",
    "confirmed",
    "excess",
    "lead_errors",
    "noise_needed",
    "queue_means",
    "round_confidence",
    "select",
    "standing",
    "threshold",
    "tied_best",
    "unfinished_means",
    "won",
]


@dataclass(frozen=True)
class Scores:
    """One round's replay: each candidate's mean JCT, and what the replay cost."""

    means: Mapping[str, float]
    """Candidate spec text → mean JCT in seconds over the window, weighted by `weights`
    (inf: it failed)."""
    workflows: int
    """Workflows replayed."""
    events: int
    decisions: Mapping[str, int]
    """Decisions each candidate made in the replay (its cost)."""
    failed: Mapping[str, str] = field(default_factory=dict)
    """Candidates whose replay raised, with the error."""
    jcts: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Candidate spec text → each replayed workflow's JCT (arrival order, the mean over
    the seeds; none for a failed candidate): what `beyond_noise` pairs."""
    unfinished: np.ndarray | None = None
    """Per replayed workflow (arrival order), True if it had not finished when the round
    began (`PortfolioConfig.unfinished`, early rounds' running ones)."""
    times: np.ndarray | None = None
    """Per replayed workflow (arrival order), its arrival on the scheduler's clock."""
    queue_names: tuple[str, ...] | None = None
    """Per replayed workflow (arrival order), the queue it was replayed in (None: the
    replay ran on one queue)."""
    cut: tuple[str, ...] = ()
    """Candidates whose replay stopped early: their score is an estimate no lower than a
    bound on it, and they have no per-workflow JCTs (`runs.Runs`, "Early cuts")."""


Reason = Literal[
    "cold start",
    "prior",
    "unlike",
    "change",
    "prior history",
    "best",
    "kept",
    "noise",
    "carried",
    "unconfirmed",
    "untrained",
    "present",
    "guarded",
    "guard",
]
"""Why a candidate is followed (`Choice.reason`)."""


@dataclass(frozen=True)
class Choice:
    """Which candidate is followed and why (what the operator shows)."""

    candidate: str
    """The spec text of the candidate followed."""
    score: float | None
    """Its mean JCT in the round's replay, seconds (None: no replay yet)."""
    runner_up: str | None
    """The best other candidate of the round."""
    runner_up_score: float | None
    workflows: int
    """Finished workflows the round replayed (0: no replay yet)."""
    reason: Reason
    """cold start: no round yet; prior: no round yet, the shipped prior's safest candidate
    for the workflows arrived (`prior`); unlike: the same, but the workflows arrived are
    like none the prior knows, so its safest over every workload it knows; change: the same for the workflows arrived since
    a change of workload seen in the arrivals (`arrivals`); prior history: the first round, on the history
    file or a seeded window (`PortfolioScheduler.seed`); best: the round's best; kept:
    the round's best was not better by the margin; noise: it was, but its lead was within
    the window's noise (`beyond_noise`); carried: it was beyond the noise too, but its
    lead was carried by a few workflows (`carried`); unconfirmed: it beat the followed
    one, but not over the rounds before it too (`PortfolioConfig.confirm`); untrained:
    the followed candidate, a learned policy, is outside the input range it was trained
    on (`learned_range`), so the round's best eligible one replaces it; present: the
    round chose `runner_up`, but rolled out from the pool as it is now it costs more than
    the candidate followed, by more than the margin (`present.from_present`)."""
    best: str | None = None
    """The round's best candidate (kept: the one that did not beat the margin)."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """Every candidate's score in the round."""
    at: float = 0.0
    """Clock time of the state the round replayed."""
    modelled_seconds: float = 0.0
    """The round's modelled CPU seconds (`modelled_seconds`)."""
    cpu_seconds: float = 0.0
    """The round's measured CPU seconds (thread time; for reports, never for choices)."""
    prior: int = 0
    """Of `workflows`, those that finished before the scheduler started."""
    source: str | None = None
    """Where those came from: ``history file`` (``history=``) or a driver's `seed` source
    (``history sink``)."""
    new: int = 0
    """Of `workflows`, those finished since the previous round (all, at the first)."""
    early: bool = False
    """An early round's choice: it replayed every workflow arrived, before `min_window`
    had finished (`PortfolioConfig.early`)."""
    running: int = 0
    """Of `workflows`, those still running when the round began (an early round's, before
    `min_window` had finished: replayed with their duration models, or with
    ``records=fed`` their estimates)."""
    left_out: tuple[str, ...] = ()
    """Candidates the round left out: their standing trails (`PortfolioScheduler.dropped`)."""
    noise: float | None = None
    """The lead over the followed candidate that the round's best needed to be beyond
    the window's noise (`confidence` standard errors), as a fraction of the followed
    candidate's score (None: no such test)."""
    previous: str | None = None
    """The candidate followed before the round."""
    margin: float | None = None
    """The margin that protected `previous` in the round (None: it had won no round
    outright, so any better score replaced it)."""
    carriers: int | None = None
    """The workflows that carried the best's lead (reason ``carried``)."""
    untrained: tuple[str, ...] = ()
    """Learned candidates the round did not follow: the window is outside the input range
    they were trained on (`PortfolioConfig.trained_range`)."""
    heavy: int = 0
    """Of `running`, the workflows still running that the round replayed for their work,
    heavier than every finished one of its window (`PortfolioConfig.heavy`)."""
    trimmed: int = 0
    """Workflows left out of the window to fit the round's budget
    (`PortfolioConfig.budget`)."""
    present: Mapping[str, float] = field(default_factory=dict)
    """The present check's costs of the candidate followed and the round's choice, rolled
    out from the pool as it was (`present.from_present`; empty: no check)."""
    present_jobs: int = 0
    """Workflows in the pool the present check rolled out from."""
    safe: str | None = None
    """The shipped prior's safest candidate, that the guard on regret keeps to (`guard`)."""
    guard: float | None = None
    """The standard errors of lead over `safe` that leaving it needs (None: no guard)."""
    guard_z: float | None = None
    """Reason ``guarded``: the challenger's lead over `safe` in the round, in standard
    errors of the paired per-workflow differences."""
    stream: float | None = None
    """Reason ``guarded``: the challenger's standing minus `safe`'s over the rounds
    remembered and this one (the stream so far; > 0: behind it)."""
    behind: float | None = None
    """Reason ``guard``: how far `previous` was behind `safe`, a fraction of `safe`'s mean
    JCT, over the `affected` workflows of the window arrived since it was followed."""
    affected: int = 0
    unfinished: Mapping[str, float] = field(default_factory=dict)
    """The mean JCT of the replay's unfinished workflows (`Scores.unfinished`) under the
    candidate followed and the one it is compared with (empty: none replayed)."""
    unfinished_count: int = 0
    """The replay's workflows unfinished when the round began."""
    queues: int = 1
    """The queues the replay ran under (the live pool's; 1: one queue, no quotas)."""
    cut: tuple[str, ...] = ()
    """Candidates whose replay the round stopped early, past the candidate followed:
    their scores are estimates no lower than a bound on them (`runs.Runs`, "Early
    cuts")."""
    per_queue: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """With several queues (`queues` > 1), per queue that had workflows in the replay: how
    many (``workflows``) and their mean JCT under the candidate followed and the one it
    is compared with (``jct``: spec text → seconds; `queue_means`). Empty on one queue."""

    @property
    def why(self) -> str:
        """The outcome in words (`policy.account.sentence`): ``kept fair: srpt was 1.3 %
        better, within the 2 % margin``."""
        return sentence(vars(self))

    @property
    def text(self) -> str:
        """``following srpt: 642 s vs fair 734 s over the last 48 workflows``."""
        if self.score is None and self.reason == "prior":
            return f"following {self.candidate} (the shipped prior's safest candidate for the workflows arrived so far)"
        if self.score is None and self.reason == "unlike":
            return f"following {self.candidate} (the shipped prior's safest candidate over every workload it knows: the workflows arrived so far are like none of them)"
        if self.score is None and self.reason == "change":
            return f"following {self.candidate} (the shipped prior's safest candidate for the workflows arrived since the change)"
        if self.score is None:
            return f"following {self.candidate} ({self.reason}: no finished workflow replayed yet)"
        versus = ""
        if self.runner_up is not None and self.runner_up_score is not None:
            versus = f" vs {self.runner_up} {_seconds(self.runner_up_score)}"
        prior = f" ({self.prior} from the {self.source})" if self.prior else ""
        if self.running:
            prior = f" ({self.running} still running)"
        return (
            f"following {self.candidate}: {_seconds(self.score)}{versus} over the last "
            f"{self.workflows} workflows{prior}"
        )

    @property
    def replayed(self) -> dict[str, Any] | None:
        """The window the round replayed (an ExecutorPool's ``status.replayed``): its size,
        and how many of its workflows came from before the start, and whence (None: no
        round yet)."""
        if not self.workflows:
            return None
        return {"workflows": self.workflows, "prior": self.prior, "source": self.source}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inf scores as None)."""
        return {
            "candidate": self.candidate,
            "score": _finite(self.score),
            "runner_up": self.runner_up,
            "runner_up_score": _finite(self.runner_up_score),
            "workflows": self.workflows,
            "reason": self.reason,
            "best": self.best,
            "scores": {k: _finite(v) for k, v in self.scores.items()},
            "at": self.at,
            "modelled_seconds": self.modelled_seconds,
            "cpu_seconds": self.cpu_seconds,
            "prior": self.prior,
            "source": self.source,
            "new": self.new,
            "left_out": list(self.left_out),
            "previous": self.previous,
            "margin": self.margin,
            "noise": self.noise,
            "early": self.early,
            "running": self.running,
            "carriers": self.carriers,
            "untrained": list(self.untrained),
            "heavy": self.heavy,
            "trimmed": self.trimmed,
            "present": {k: _finite(v) for k, v in self.present.items()},
            "present_jobs": self.present_jobs,
            "safe": self.safe,
            "guard": self.guard,
            "guard_z": _finite(self.guard_z),
            "stream": _finite(self.stream),
            "behind": _finite(self.behind),
            "affected": self.affected,
            "unfinished": {k: _finite(v) for k, v in self.unfinished.items()},
            "unfinished_count": self.unfinished_count,
            "queues": self.queues,
            **({"per_queue": _per_queue_dict(self.per_queue)} if self.per_queue else {}),
            **({"cut": list(self.cut)} if self.cut else {}),
            "text": self.text,
            "why": self.why,
        }


def _per_queue_dict(per_queue: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`Choice.per_queue` JSON-ready (inf as None)."""
    return {
        q: {"workflows": v["workflows"], "jct": {c: _finite(x) for c, x in v["jct"].items()}}
        for q, v in per_queue.items()
    }


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if math.isfinite(value) else "failed"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def select(
    scores: Mapping[str, float],
    following: str,
    margin: float,
    *,
    protected: bool = True,
    jcts: Mapping[str, np.ndarray] | None = None,
    confidence: float = 0.0,
    correct: bool = False,
    stood: Sequence[tuple[int, Mapping[str, float]]] = (),
    new: int = 0,
    named: str | None = None,
    carriers: int = 0,
    switch: Literal["passed", "best"] = "passed",
) -> tuple[str, str | None, Literal["best", "kept", "noise", "carried", "unconfirmed"]]:
    """(candidate to follow, the runner-up, why) after a round with `scores`.

    A candidate *beats* the one followed when its score is lower by more than `margin` ×
    following's score (by anything when not `protected`: the followed candidate did not
    earn its place, `won`) and its lead is beyond the window's noise (`beyond_noise`
    with `jcts` and `confidence`). The best-scoring of those that beat it replaces
    `following` (the first in `scores`' order among equals), or with `switch` ``best``
    the round's best if it scores lower still (its own lead need not pass the tests: one
    that did shows `following` should be left); if none does, `following`
    stays, so a tie or a lead within the noise never moves the scheduler (why: ``noise``
    when the round's best beat it by the margin alone). A following
    candidate missing from `scores` (or failed, inf) is always replaced by the best.
    The runner-up is the best other candidate than the one chosen. With `correct` the
    standard errors needed grow with the challengers compared, but for the candidate
    `named` before the round (the prior's: `round_confidence`). With
    the rounds before (`stood`, `new` workflows new in this one) a switch must be
    `confirmed` by them too, else `following` stays (why: ``unconfirmed``). With
    `carriers` a lead must survive dropping that many of the window's workflows where
    it gains most (`carried`; why: ``carried`` when the round's best passed the margin
    and the noise but not this).
    """
    if not scores:
        raise IdlegateError("a round needs at least one candidate's score")
    tied = tied_best(scores)
    best = following if following in tied else tied[0]
    current = scores.get(following, math.inf)
    if following not in scores or not math.isfinite(current):
        chosen = best
    else:
        needed = margin * current if protected else 0.0

        def noise_passed(c: str) -> bool:
            z = round_confidence(scores, following, confidence, correct, c, named)
            return beyond_noise(jcts, following, c, z)

        beats = {
            c: v
            for c, v in scores.items()
            if current - v > needed
            and noise_passed(c)
            and not carried(jcts, following, c, carriers)
        }
        chosen = tied_best(beats)[0] if beats else following
        if beats and switch == "best" and scores[best] < scores[chosen]:
            chosen = best
        kept_by: Literal["noise", "carried", "unconfirmed"] | None = None
        if chosen == following and current - scores[best] > needed:
            kept_by = "carried" if noise_passed(best) else "noise"
        if chosen != following and stood and not confirmed(stood, new, scores, chosen, following):
            chosen, kept_by = following, "unconfirmed"
        if kept_by is not None:
            others = [c for c in scores if c != chosen]
            return chosen, min(others, key=scores.__getitem__), kept_by
    keep = chosen == following
    others = [c for c in scores if c != chosen]
    runner_up = min(others, key=scores.__getitem__) if others else None
    return chosen, runner_up, "kept" if keep and best != following else "best"


def round_confidence(
    scores: Mapping[str, float],
    following: str,
    confidence: float,
    correct: bool,
    challenger: str | None = None,
    named: str | None = None,
) -> float:
    """The standard errors a challenger's lead over `following` must exceed in a round
    with `scores`: `confidence`, or with `correct` its `threshold` for every other
    candidate scored (failed ones aside); `confidence` all the same for the `challenger`
    that was `named` before the round (the prior's: no race chose it)."""
    if challenger is not None and challenger == named:
        return confidence
    others = [v for c, v in scores.items() if c != following and math.isfinite(v)]
    return threshold(confidence, max(1, len(others)) if correct else 1)


def threshold(confidence: float, compared: int) -> float:
    """Standard errors a lead must exceed when `compared` challengers race the followed
    candidate: `confidence` for one, and for more the one-sided normal quantile that keeps
    the chance that any of them beats it by luck alone at what one alone would have
    (Bonferroni: Φ⁻¹(1 − α/m), α = 1 − Φ(`confidence`)). The best of fifteen passes one
    standard error by luck far more often than a pair does; 0 stays 0 (no noise rule)."""
    if confidence <= 0 or compared <= 1:
        return confidence
    normal = NormalDist()
    alpha = 1.0 - normal.cdf(confidence)
    return normal.inv_cdf(1.0 - alpha / compared)


def beyond_noise(
    jcts: Mapping[str, np.ndarray] | None, following: str, other: str, confidence: float
) -> bool:
    """True if `other`'s lead over `following` on the window exceeds `confidence` standard
    errors of the mean of their paired per-workflow JCT differences (the same workflows,
    the same seeds, so what differs is the candidates' decisions).

    A window of a few workflows, or one where both decide alike on most workflows and
    one long workflow makes the difference, has a wide standard error: its lead must be
    large to count. Without per-workflow JCTs for both, or `confidence` 0, any lead
    counts; with fewer than two workflows none does.
    """
    if confidence <= 0 or jcts is None or following not in jcts or other not in jcts:
        return True
    d = np.asarray(jcts[following], dtype=float) - np.asarray(jcts[other], dtype=float)
    if len(d) < 2:
        return False
    error = float(np.std(d, ddof=1)) / math.sqrt(len(d))
    return float(np.mean(d)) > confidence * error


def carried(
    jcts: Mapping[str, np.ndarray] | None, following: str, other: str, carriers: int
) -> bool:
    """True if `other`'s lead over `following` is carried by the `carriers` workflows of
    the window where it gains most: without them it is no longer ahead at all (the mean
    of the other paired per-workflow JCT differences is not above 0).

    On heavy-tailed workflows (a production trace's jobs range from one task to tens of
    thousands) a window's mean JCT is one or two huge jobs': a challenger that happens to
    finish one of them earlier leads by 20-55 % while it loses, or ties, on every other
    workflow. A single workflow's gain b alone is one standard error of the mean (b/n
    against b/n), so the noise rule passes it at `confidence` 1. False (not judged)
    without per-workflow JCTs for both, with `carriers` 0, or with a window of no more
    than twice `carriers` workflows.
    """
    if carriers <= 0 or jcts is None or following not in jcts or other not in jcts:
        return False
    d = np.asarray(jcts[following], dtype=float) - np.asarray(jcts[other], dtype=float)
    if len(d) <= 2 * carriers:
        return False
    rest = np.sort(d)[:-carriers]
    return float(np.mean(rest)) <= 0.0


def noise_needed(
    jcts: Mapping[str, np.ndarray], following: str, other: str, confidence: float
) -> float | None:
    """The lead `other` needs over `following` to be beyond the noise (`beyond_noise`),
    as a fraction of `following`'s mean JCT; None without both or with a zero mean."""
    if following not in jcts or other not in jcts or len(jcts[following]) < 2:
        return None
    d = np.asarray(jcts[following], dtype=float) - np.asarray(jcts[other], dtype=float)
    mean = float(np.mean(jcts[following]))
    error = float(np.std(d, ddof=1)) / math.sqrt(len(d))
    return confidence * error / mean if mean > 0 else None


def won(choice_scores: Mapping[str, float], candidate: str) -> bool:
    """True if `candidate` alone had the round's best score (no tie): the evidence that
    lets the margin protect it."""
    return bool(choice_scores) and tied_best(choice_scores) == [candidate]


def standing(rounds: Sequence[tuple[int, Mapping[str, float]]], candidate: str) -> float:
    """`candidate`'s excess over each round's best, weighted by the rounds' new workflows
    (over the rounds that scored it; inf for none)."""
    known = [(n, scored[candidate]) for n, scored in rounds if candidate in scored]
    weight = sum(n for n, _ in known)
    return sum(n * x for n, x in known) / weight if weight else math.inf


def excess(means: Mapping[str, float]) -> dict[str, float]:
    """Each candidate's score over the round's best, minus 1 (one that failed: 1.0, 100 %
    behind); what the standings remember of a round."""
    low = min((v for v in means.values() if math.isfinite(v)), default=math.inf)
    return {
        c: v / low - 1 if math.isfinite(v) and 0 < low < math.inf else 1.0 for c, v in means.items()
    }


def confirmed(
    stood: Sequence[tuple[int, Mapping[str, float]]],
    new: int,
    means: Mapping[str, float],
    chosen: str,
    following: str,
) -> bool:
    """True if a round with `means` (and `new` workflows new in it) that switches from
    `following` to `chosen` is borne out by the rounds before it (`stood`): over them and
    it, each weighted by its new workflows, `chosen`'s `standing` is below `following`'s.
    A followed candidate that failed in the round is always left."""
    if not math.isfinite(means.get(following, math.inf)):
        return True
    rounds = (*stood, (max(new, 1), excess(means)))
    return standing(rounds, chosen) < standing(rounds, following)


# -- the guard on regret (`PortfolioConfig.guard`) -----------------------------------------


def lead_errors(jcts: Mapping[str, np.ndarray] | None, safe: str, other: str) -> float | None:
    """`other`'s lead over `safe` in standard errors of the mean of their paired
    per-workflow JCT differences (> 0: `other` is ahead); inf for a lead with no spread,
    None without both or with fewer than two workflows."""
    if jcts is None or safe not in jcts or other not in jcts:
        return None
    d = np.asarray(jcts[safe], dtype=float) - np.asarray(jcts[other], dtype=float)
    if len(d) < 2:
        return None
    mean = float(np.mean(d))
    error = float(np.std(d, ddof=1)) / math.sqrt(len(d))
    if error == 0:
        return 0.0 if mean == 0 else math.copysign(math.inf, mean)
    return mean / error


def behind(
    jcts: Mapping[str, np.ndarray],
    times: np.ndarray | None,
    following: str,
    safe: str,
    since: float,
) -> tuple[float, int] | None:
    """(how far `following` is behind `safe`, as a fraction of `safe`'s mean JCT, and over
    how many workflows) over the replayed workflows that arrived at or after `since`: the
    workflows the candidate followed since then has affected. None without both, or
    without any such workflow."""
    if times is None or following not in jcts or safe not in jcts:
        return None
    affected = np.asarray(times) >= since
    n = int(np.sum(affected))
    if n == 0:
        return None
    base = float(np.mean(np.asarray(jcts[safe])[affected]))
    mine = float(np.mean(np.asarray(jcts[following])[affected]))
    return ((mine - base) / base if base > 0 else 0.0), n


def unfinished_means(
    jcts: Mapping[str, np.ndarray], unfinished: np.ndarray | None, names: Sequence[str | None]
) -> dict[str, float]:
    """The mean JCT of the `unfinished` workflows of a replay under each of `names` that
    was replayed (empty without unfinished workflows)."""
    if unfinished is None or not np.any(unfinished):
        return {}
    mask = np.asarray(unfinished, dtype=bool)
    return {
        c: float(np.mean(np.asarray(jcts[c])[mask])) for c in names if c is not None and c in jcts
    }


def queue_means(
    jcts: Mapping[str, np.ndarray],
    queue_names: Sequence[str] | None,
    names: Sequence[str | None],
    order: Sequence[str] = (),
) -> dict[str, dict[str, Any]]:
    """Per queue of a replay under several queues (`queue_names`, per replayed workflow),
    in the pool's `order` of its queues (those it lacks after, as they first appear):
    its workflows and their mean JCT under each of `names` that was replayed
    (`Choice.per_queue`); empty without queues."""
    if not queue_names:
        return {}
    labels = np.asarray(queue_names, dtype=object)
    present = set(queue_names)
    out: dict[str, dict[str, Any]] = {}
    for queue in [q for q in dict.fromkeys([*order, *queue_names]) if q in present]:
        mask = labels == queue
        out[queue] = {
            "workflows": int(mask.sum()),
            "jct": {
                c: float(np.mean(np.asarray(jcts[c])[mask]))
                for c in dict.fromkeys(names)
                if c is not None and c in jcts
            },
        }
    return out
