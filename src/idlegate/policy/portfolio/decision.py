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
    noise_needed,
    round_confidence,
    select,
)
from idlegate.policy.spec import SchedulerSpec

__all__ = ["Replayer", "Roller", "play_round"]

Replayer = Callable[[ReplayRequest, Sequence[str]], Scores]
"""Replays a request's window under the given spec texts (`replay.replay_portfolio`)."""
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
    specs = [s for s in candidate_specs(config) if s not in out]
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
        present=dict(present.costs) if present else {},
        present_jobs=present.jobs if present else 0,
    )
