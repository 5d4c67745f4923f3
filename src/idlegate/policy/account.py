"""What a portfolio run followed and why, in words: each round's sentence, the share of
the run each candidate had.

The portfolio scheduler (`idlegate.policy.portfolio`) says a round's outcome as a reason
code and figures (a `Choice`: the candidate followed before and after, every candidate's
score, the margin that applied), and a run as seconds of the clock per candidate followed
(`PortfolioScheduler.time_followed`). Every report says them the same way, from that
plain data alone (so it travels from worker processes and reads back from JSON):

* `sentence`: a round's outcome, e.g. "kept fair: srpt was 1.3 % better, within the 2 %
  margin". `case` picks the template of `SENTENCES` (the reason code, the outcome
  ``best`` told apart by its figures: a switch, a tie, an outright win), `figures` fills
  it. A new reason is one line of `SENTENCES` naming the figures it needs; a new figure
  that is a fraction is one name in `FRACTIONS`;
* `shares`: one run's seconds as fractions of the run, longest first;
* `mean_shares`: the fractions of several runs (seeds) averaged, a candidate a run
  never followed counting 0 in it;
* `percents`: fractions as whole percents that add up to exactly 100 (largest
  remainder), so a printed line sums to what it claims;
* `followed_line`: "portfolio followed srpt 71 %, fair 22 %, learned:default 7 % of the
  run".

The tie rule (`tied_best`: two replays of the same decisions score the same) lives
here, where the reports and the rounds' selection (`portfolio.rounds.select`) both read
it; this module imports nothing of the scheduler, so its code can move without them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = [
    "FRACTIONS",
    "SENTENCES",
    "case",
    "figures",
    "followed_line",
    "mean_shares",
    "percents",
    "sentence",
    "shares",
    "shares_text",
    "tied_best",
]

SENTENCES: Final[Mapping[str, str]] = {
    "cold start": "started with {candidate}: no workflow finished yet",
    "prior": (
        "started with {candidate}: the shipped prior's safest candidate for the workflows "
        "arrived so far"
    ),
    "unlike": (
        "following {candidate}: the workflows so far are unlike any the prior knows, and it "
        "is the safest over every workload the prior knows"
    ),
    "change": (
        "following {candidate}: the workflows arriving changed, and it is the shipped "
        "prior's safest candidate for the new ones"
    ),
    "prior history": (
        "started with {candidate}: the best on the last {workflows} workflows "
        "({prior} from the {source})"
    ),
    "switched": (
        "switched to {candidate}: {gain} better than {previous}, beyond the {margin} margin"
    ),
    "switched, unprotected": (
        "switched to {candidate}: {gain} better than {previous}, which no margin protected"
    ),
    "switched, failed": "switched to {candidate}: {previous} failed in the replay",
    "switched, not replayed": "switched to {candidate}: {previous} was not replayed",
    "kept": "kept {candidate}: {best} was {deficit} better, within the {margin} margin",
    "noise": (
        "kept {candidate}: {best} was {deficit} better, within the window's noise of {noise}"
    ),
    "carried": (
        "kept {candidate}: {best} was {deficit} better, but carried by {carriers} of the "
        "{workflows} workflows"
    ),
    "untrained": (
        "switched to {candidate}: {previous} is outside the range it was trained on, and "
        "{candidate} is the round's best of the others"
    ),
    "unconfirmed": (
        "kept {candidate}: {best} was {deficit} better in this round, but not over the "
        "rounds before it"
    ),
    "present": (
        "kept {candidate}: {runner_up} was {challenge} better over the last {workflows} "
        "workflows, but would cost {setback} more from the {in_pool} in the pool now"
    ),
    "present, failed": (
        "kept {candidate}: {runner_up} was {challenge} better over the last {workflows} "
        "workflows, but failed when rolled out from the {in_pool} in the pool now"
    ),
    "guarded": (
        "kept {candidate}: {runner_up} was {challenge} better, but its lead over {safe}, the "
        "prior's safest, was {errors} standard errors, not the guard's {guard}"
    ),
    "guarded, stream": (
        "kept {candidate}: {runner_up} was {challenge} better, but over the stream so far "
        "it is {stream} behind {safe}, the prior's safest"
    ),
    "guard": (
        "came back to {candidate}, the prior's safest: {previous} was {behind} behind it "
        "over the {affected} workflows arrived since it was followed"
    ),
    "tied": "kept {candidate}: tied with {runner_up}",
    "won": "kept {candidate}: {lead} better than {runner_up}",
    "alone": "kept {candidate}: the only candidate replayed",
    "best": "following {candidate}, the round's best",
}
"""A round's sentence per `case`, with the `figures` it names in braces."""

FRACTIONS: Final = frozenset(
    {"gain", "deficit", "lead", "margin", "noise", "challenge", "setback", "stream", "behind"}
)
"""The figures that are fractions, said as percents ("1.3 %")."""


def case(choice: Mapping[str, Any]) -> str:
    """The key of `SENTENCES` for `choice` (a round's `Choice`, as its fields): the
    reason code, but ``best`` told apart by whom the round followed before (`previous`)
    and the scores: a switch (beyond the margin, with no margin, or away from a
    candidate without a score), a tie, an outright win, the only candidate; ``best``
    itself when `previous` is unknown; ``present`` told apart by whether the challenger's
    rollouts failed (no finite cost)."""
    reason = str(choice["reason"])
    if reason == "guarded":  # (behind over the stream so far, or not beyond the noise)
        stream = choice.get("stream")
        return "guarded, stream" if stream is not None and stream >= 0 else reason
    if reason == "present":
        there = (choice.get("present") or {}).get(choice.get("runner_up"))
        return reason if there is not None and math.isfinite(there) else "present, failed"
    if reason != "best":
        return reason
    previous, candidate = choice.get("previous"), choice["candidate"]
    scores = choice.get("scores") or {}
    if previous is None:
        return "best"
    if previous != candidate:
        before = scores.get(previous)
        if before is None:
            return "switched, not replayed"
        if not math.isfinite(before):
            return "switched, failed"
        return "switched" if choice.get("margin") is not None else "switched, unprotected"
    runner_up = choice.get("runner_up")
    if runner_up is None:
        return "alone"
    return "tied" if _tied(scores.get(candidate), scores.get(runner_up)) else "won"


def figures(choice: Mapping[str, Any]) -> dict[str, Any]:
    """`choice`'s fields with the relative gaps the sentences name, as fractions of the
    worse score of each pair (so "x % better than y" is (y - x) / y, the margin's measure):
    ``gain`` of the candidate over `previous`, ``deficit`` of the followed candidate
    behind the round's best, ``lead`` of the candidate over the runner-up; after a present
    check (`present`), ``challenge`` of the runner-up over the candidate kept,
    ``setback``, what the runner-up would cost more from the present, as a fraction of
    the candidate's cost, and ``in_pool``, "1 workflow" or "7 workflows". A gap whose
    scores are missing or not finite is left out."""
    scores = choice.get("scores") or {}
    out = dict(choice)
    candidate = choice["candidate"]
    pairs = {
        "gain": (candidate, choice.get("previous")),
        "deficit": (choice.get("best"), candidate),
        "lead": (candidate, choice.get("runner_up")),
    }
    if choice.get("present") or choice.get("reason") == "guarded":
        pairs["challenge"] = (choice.get("runner_up"), candidate)
    for key, (better, worse) in pairs.items():
        gap = _gap(scores.get(better), scores.get(worse))
        if gap is not None:
            out[key] = gap
    z = choice.get("guard_z")
    if z is not None:
        out["errors"] = f"{z:.1f}"
    costs = choice.get("present") or {}
    if costs:
        jobs = choice.get("present_jobs")
        out["in_pool"] = f"{jobs} workflow" + ("" if jobs == 1 else "s")
    here, there = costs.get(candidate), costs.get(choice.get("runner_up"))
    if here is not None and there is not None and math.isfinite(here + there) and here > 0:
        out["setback"] = (there - here) / here
    return out


def sentence(choice: Mapping[str, Any]) -> str:
    """`choice`'s outcome in words (module docstring); a figure it lacks reads "?"."""
    template = SENTENCES.get(case(choice), "following {candidate} ({reason})")
    return (
        template.format_map(_Said(figures(choice)))
        + unfinished_clause(choice)
        + queue_clause(choice)
    )


def unfinished_clause(choice: Mapping[str, Any]) -> str:
    """``; the 12 workflows unfinished: 4,210 s under srpt, 2,950 s under fair`` (their mean
    JCT in the round's replay, `PortfolioConfig.unfinished`); empty when none was replayed."""
    count, means = choice.get("unfinished_count") or 0, choice.get("unfinished") or {}
    said = [f"{v:,.0f} s under {c}" for c, v in means.items() if v is not None]
    if not count or not said:
        return ""
    noun = "workflow" if count == 1 else "workflows"
    return f"; the {count} {noun} unfinished: {', '.join(said)}"


def queue_clause(choice: Mapping[str, Any]) -> str:
    """``; per queue: heavy (40 workflows) 4,210 s under srpt, 4,950 s under
    srpt?cap=0.9; small (…) …`` (each queue's workflows of the replay and their mean JCT
    under the candidates of the sentence, `Choice.per_queue`); empty on one queue."""
    said = []
    for queue, figures_ in (choice.get("per_queue") or {}).items():
        n = figures_.get("workflows") or 0
        means = [
            f"{v:,.0f} s under {c}"
            for c, v in figures_.get("jct", {}).items()
            if v is not None and math.isfinite(v)
        ]
        if n and means:
            said.append(f"{queue} ({n} workflow{'' if n == 1 else 's'}) {', '.join(means)}")
    return f"; per queue: {'; '.join(said)}" if said else ""


class _Said(dict[str, str]):
    """Figures as said: fractions as percents, anything missing as "?"."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(
            {
                k: _percent(v) if k in FRACTIONS else str(v)
                for k, v in values.items()
                if v is not None
            }
        )

    def __missing__(self, key: str) -> str:
        return "?"


def _percent(fraction: float) -> str:
    """0.013 → "1.3 %", 0.02 → "2 %", 0.0004 → "0.04 %"."""
    p = 100 * float(fraction)
    text = f"{p:.1f}"
    if text in ("0.0", "-0.0") and p != 0:
        text = f"{p:.1g}"
    return f"{text.removesuffix('.0')} %"


def _gap(better: float | None, worse: float | None) -> float | None:
    if better is None or worse is None or not (math.isfinite(better) and math.isfinite(worse)):
        return None
    return (worse - better) / worse if worse > 0 else None


def tied_best(scores: Mapping[str, float]) -> list[str]:
    """The candidates whose score equals the lowest (to a relative 1e-9: a replay of the
    same decisions), in `scores`' order."""
    low = min(scores.values())
    return [c for c, v in scores.items() if v <= low + 1e-9 * abs(low)]


def _tied(a: float | None, b: float | None) -> bool:
    """The same score, as the round's selection counts a tie (`tied_best`)."""
    return a is not None and b is not None and len(tied_best({"a": a, "b": b})) == 2


def shares(seconds: Mapping[str, float]) -> dict[str, float]:
    """Each candidate's fraction of the total `seconds`, largest first (ties in the
    given order); empty when no time passed."""
    total = sum(seconds.values())
    if total <= 0:
        return {}
    fractions = {name: s / total for name, s in seconds.items() if s > 0}
    return dict(sorted(fractions.items(), key=lambda kv: -kv[1]))


def mean_shares(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean over `runs` of each candidate's share (0 in a run that never followed
    it), largest first (ties in the order first met); empty for no run."""
    if not runs:
        return {}
    names = dict.fromkeys(name for run in runs for name in run)
    means = {name: sum(run.get(name, 0.0) for run in runs) / len(runs) for name in names}
    return dict(sorted(means.items(), key=lambda kv: -kv[1]))


def percents(fractions: Mapping[str, float]) -> dict[str, int]:
    """`fractions` (summing to 1) as whole percents summing to 100: each rounded down,
    the points left over given to the largest remainders (ties: the earlier name)."""
    if not fractions:
        return {}
    total = sum(fractions.values()) or 1.0
    exact = {name: 100 * f / total for name, f in fractions.items()}
    out = {name: math.floor(p) for name, p in exact.items()}
    left = 100 - sum(out.values())
    by_remainder = sorted(exact, key=lambda name: -(exact[name] - out[name]))
    for name in by_remainder[:left]:
        out[name] += 1
    return out


def shares_text(fractions: Mapping[str, float]) -> str:
    """``srpt 71 %, fair 28 %, learned:default < 1 %``: `fractions` in whole percents
    (`percents`); one followed for less than half a percent of the run reads ``< 1 %``,
    not ``0 %`` (it was followed, briefly)."""
    return ", ".join(f"{c} {p} %" if p else f"{c} < 1 %" for c, p in percents(fractions).items())


def followed_line(name: str, fractions: Mapping[str, float], runs: int = 1) -> str:
    """``portfolio followed srpt 71 %, fair 22 %, learned:default 7 % of the run``, with
    "(mean over 3 seeds)" when `runs` > 1; `fractions` as `shares` gives them."""
    if not fractions:
        return f"{name} followed nothing: the run took no time"
    parts = shares_text(fractions)
    over = f" (mean over {runs} seeds)" if runs > 1 else ""
    return f"{name} followed {parts} of the run{over}"
