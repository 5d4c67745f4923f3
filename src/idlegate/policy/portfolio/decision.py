"""A round: what it decides and why (`play_round`), in one place.

A round runs wherever its driver puts it (the simulator's `decide` inline, the
operator's worker thread): it reads only its `ReplayRequest`, taken on the owner's
thread, and the configuration, and returns a `Choice` that the owner adopts
(`PortfolioScheduler.adopt`). So everything a round weighs is in the request: the window,
the candidate followed and what protects it, the candidates left out, the rounds before.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from idlegate.policy.portfolio.candidates import (
    PortfolioConfig,
    analytic_specs,
    candidate_specs,
    kind_of,
)
from idlegate.policy.portfolio.present import Present
from idlegate.policy.portfolio.replay import (
    EVENT_SECONDS,
    ReplayRequest,
    merged,
    modelled_seconds,
)
from idlegate.policy.portfolio.rounds import (
    Choice,
    Reason,
    Scores,
    behind,
    excess,
    lead_errors,
    noise_needed,
    queue_means,
    round_confidence,
    select,
    standing,
    unfinished_means,
)
from idlegate.policy.spec import SchedulerSpec

__all__ = ["Replayer", "Roller", "play_round", "replayed"]

Replayer = Callable[[ReplayRequest, Sequence[str]], Scores]
"""Replays a request's window under the given spec texts (`replay.replay_portfolio`;
a round's, `runs.Runs.scores`, each spec once in the round)."""
Roller = Callable[[ReplayRequest, Sequence[str]], Present | None]
"""Rolls the given spec texts out from the request's present pool (`present.from_present`)."""


def play_round(
    request: ReplayRequest,
    config: PortfolioConfig,
    replay: Replayer,
    roll: Roller | None = None,
) -> Choice:
    """The round of `request`: which candidate to follow, and why.

    1. **Candidates.** The portfolio's spec texts, the tuned grids included
       (`candidate_specs`), but those left out because their standing trails
       (`request.dropped`, `state.Standings.dropped`), and a learned policy the window is
       outside the training range of (`request.untrained`, `trained_range`).
    2. **Replay.** The window under each, the same arrivals and duration seeds for all
       (common random numbers); a candidate's score is its mean JCT, inf if it failed.
    3. **Idling.** The analytic idle rule over the round's best plain rule, at each
       threshold; and the analytic candidate followed, if it runs over another rule (a
       round never leaves a candidate it did not replay).
    4. **Evidence** (`rounds.select`). A challenger beats the candidate followed when
       a. it scores lower (a tie keeps the one followed);
       b. by more than `margin` of its score, if the margin protects it (it won a round
          outright, or the shipped prior named it: `request.protected`);
       c. beyond the window's noise: the mean of the paired per-workflow JCT
          differences exceeds `confidence` standard errors, raised for the race of
          challengers in early rounds (`correction`), but not for the candidate the
          prior named (`request.named`);
       d. not carried by a few workflows: without the `carriers` where it gains most,
          it still leads (`rounds.carried`);
       e. and on a short window while the prior's candidate is followed, over the
          rounds before this one too (`request.stood`, `confirm`).
       The best-scoring of those that beat it is followed (with `switch` ``best``, the
       round's best if lower still); none: it stays (but a
       followed learned policy outside its training range gives way to the best).
    5. **The present** (`present.from_present`, with `roll` and `request.present`). A
       switch stands unless the challenger, rolled out from the pool as it is now over
       futures like the window, costs more than the candidate followed by more than
       `margin` of its cost.
    6. **Outcome.** A `Choice`: the candidate, its reason code and sentence
       (`Choice.why`), every score, and the lead the best needed when its lead was
       within the noise.
    """
    started = time.thread_time()
    # 1. candidates; 2. replay
    out = request.dropped | request.untrained
    specs = _candidates(request, config)
    scores = replay(request, specs)
    # 3. idling: the analytic rule over the best plain rule, and the one followed
    if "analytic" in config.portfolio():
        rules = {s: v for s, v in scores.means.items() if kind_of(s) == "rule"}
        if rules:
            base = min(rules, key=rules.__getitem__)
            over = [s for s in analytic_specs(config, base) if s not in request.dropped]
            scores = merged(scores, replay(request, over))
    followed = request.following
    analytic = SchedulerSpec.parse(followed).kind == "analytic"
    if followed not in scores.means and analytic and followed not in out:
        scores = merged(scores, replay(request, [followed]))
    # 4. evidence
    correct = config.correction == "all" or (config.correction == "early" and request.early)
    chosen, runner_up, why = select(
        scores.means,
        followed,
        config.margin,
        protected=request.protected,
        jcts=scores.jcts,
        confidence=config.confidence,
        correct=correct,
        stood=request.stood,
        new=request.new,
        named=request.named,
        carriers=config.carriers or 0,
        switch=config.switch,
    )
    reason: Reason = "untrained" if followed in request.untrained and chosen != followed else why
    # 4b. the guard on regret
    guard = _guard(request, config, scores, chosen, reason)
    if guard.reason is not None:
        runner_up, chosen, reason = guard.runner_up, guard.chosen, guard.reason
    # 5. the present
    present = None
    if (
        roll is not None
        and request.present is not None
        and chosen != followed
        and reason == "best"
        and math.isfinite(scores.means.get(followed, math.inf))
    ):
        present = roll(request, [followed, chosen])
        if (
            present is not None
            and present.costs[chosen] > (1 + config.margin) * present.costs[followed]
        ):
            runner_up, chosen, reason = chosen, followed, "present"
    # 6. outcome
    means = scores.means
    best = min(means, key=means.__getitem__)
    noise = None
    if why == "noise":
        z = round_confidence(means, followed, config.confidence, correct, best, request.named)
        noise = noise_needed(scores.jcts, followed, best, z)
    return Choice(
        candidate=chosen,
        score=means[chosen],
        runner_up=runner_up,
        runner_up_score=None if runner_up is None else means[runner_up],
        workflows=scores.workflows,
        reason="prior history" if request.reason == "prior history" else reason,
        best=best,
        scores=dict(means),
        at=request.at,
        modelled_seconds=modelled_seconds(scores)
        + (present.events * EVENT_SECONDS if present else 0.0),
        cpu_seconds=time.thread_time() - started,
        prior=request.prior,
        source=request.source,
        new=request.new,
        left_out=tuple(sorted(request.dropped)),
        previous=followed,
        margin=config.margin if request.protected else None,
        noise=noise,
        early=request.early,
        running=request.running,
        carriers=config.carriers if why == "carried" else None,
        untrained=tuple(sorted(request.untrained)),
        heavy=request.heavy,
        trimmed=request.trimmed,
        queues=max(1, len(request.queues)),
        per_queue=queue_means(
            scores.jcts,
            scores.queue_names,
            [chosen, followed if chosen != followed else runner_up],
            [q.name for q in request.queues],
        ),
        present=dict(present.costs) if present else {},
        present_jobs=present.jobs if present else 0,
        safe=request.safe if config.guard is not None else None,
        guard=config.guard if request.safe is not None else None,
        guard_z=guard.z,
        stream=guard.stream,
        behind=guard.behind,
        affected=guard.affected,
        unfinished=unfinished_means(
            scores.jcts, scores.unfinished, [chosen, followed if chosen != followed else runner_up]
        ),
        unfinished_count=int(scores.unfinished.sum()) if scores.unfinished is not None else 0,
        cut=scores.cut,
    )


def _candidates(request: ReplayRequest, config: PortfolioConfig) -> list[str]:
    """Step 1: the spec texts a round replays before the idle rule."""
    out = request.dropped | request.untrained
    return [s for s in candidate_specs(config) if s not in out]


def replayed(request: ReplayRequest, config: PortfolioConfig) -> tuple[str | None, list[str]]:
    """(the candidate followed if the round replays it, else None; the spec texts it may
    replay): its candidates (step 1), the one followed, and the idle rule at each
    threshold over the followed one's rule, the rule a round that keeps it tries it over
    (step 3). What a round's replays share and measure their cuts against (`runs.Runs`)."""
    specs = _candidates(request, config)
    followed = request.following
    parsed = SchedulerSpec.parse(followed)
    analytic = parsed.kind == "analytic"
    out = request.dropped | request.untrained
    first = followed if followed in specs or (analytic and followed not in out) else None
    shared = [*([first] if first else []), *specs]
    base = parsed.base.format(label=False) if analytic and parsed.base is not None else followed
    if "analytic" in config.portfolio() and kind_of(base) == "rule":
        shared += [s for s in analytic_specs(config, base) if s not in request.dropped]
    return first, list(dict.fromkeys(shared))


@dataclass(frozen=True)
class Guarded:
    """What the guard on regret did to a round's choice (`_guard`): nothing (`reason`
    None), kept a candidate (``guarded``) or came back to the safe one (``guard``)."""

    chosen: str = ""
    runner_up: str | None = None
    reason: Reason | None = None
    z: float | None = None
    stream: float | None = None
    behind: float | None = None
    affected: int = 0


def _guard(
    request: ReplayRequest, config: PortfolioConfig, scores: Scores, chosen: str, reason: Reason
) -> Guarded:
    """The guard on regret (`PortfolioConfig.guard`) around `request.safe`, the shipped
    prior's safest candidate.

    * A round's switch to another candidate than `safe` stands only if that one leads
      `safe` by more than `guard` standard errors of the paired per-workflow differences
      in the round (`lead_errors`) and its standing is ahead of `safe`'s over the rounds
      remembered and this one (the stream so far); else the candidate followed stays
      (``guarded``; `safe` if the one followed failed).
    * A candidate followed (other than `safe`) that is behind `safe` over the window's
      workflows arrived since it was followed (`behind`: those it has affected) gives way
      to `safe` (``guard``).
    """
    safe, followed, means = request.safe, request.following, scores.means
    if config.guard is None or safe is None or not math.isfinite(means.get(safe, math.inf)):
        return Guarded()
    out = Guarded()
    if chosen not in (safe, followed) and reason == "best":
        z = lead_errors(scores.jcts, safe, chosen)
        rounds = (*request.remembered, (max(request.new, 1), excess(means)))
        stream = standing(rounds, chosen) - standing(rounds, safe)
        if z is None or z <= config.guard or not stream < 0:
            kept = followed if math.isfinite(means.get(followed, math.inf)) else safe
            out = Guarded(kept, chosen, "guarded", z, stream)
            chosen = kept
    if chosen == followed != safe and request.since is not None:
        late = behind(scores.jcts, scores.times, followed, safe, request.since)
        if late is not None and late[0] > 0:
            return Guarded(safe, followed, "guard", behind=late[0], affected=late[1])
    return out
