"""A portfolio's round played apart from its owner (`play_apart`): in the operator's
replay process, under a CPU budget.

A round is CPU-bound Python (thousands of simulated events per candidate): run in a
thread of the deciding interpreter it holds that interpreter's lock most of the time,
and the event loop that watches the cluster and writes its decisions waits behind it.
So the operator sends the round to its replay process (`api.forecast_replay.
ReplayProcess`, the one its forecasts use): what crosses is plain data, the
portfolio's `PortfolioConfig` and the round's `ReplayRequest` (taken on the owner's
thread); what comes back is the round's `Choice`, which the owner adopts
(`PortfolioScheduler.adopt`). The process builds each configuration's portfolio once
(its candidates' instances, a learned policy's model) and keeps it, as the owner's own
worker would.

The answer is the owner's `replay` of the same request: the round reads only its request
and its configuration, and its replays' seeds are in the request
(tests/test_portfolio_apart.py compares the two). `budget` bounds the round's CPU in the
process: before each candidate's replay the time spent is checked, and a round past its
budget stops with `RoundCut`; the owner keeps the candidate it follows, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from idlegate.policy.portfolio.candidates import PortfolioConfig
from idlegate.policy.portfolio.replay import ReplayRequest, RoundCut
from idlegate.policy.portfolio.rounds import Choice
from idlegate.policy.portfolio.scheduler import PortfolioScheduler

__all__ = ["KEPT", "budget_check", "play_apart"]

KEPT = 4
"""Configurations whose portfolios a process keeps built (a reload brings a new one)."""

_BUILT: dict[str, PortfolioScheduler] = {}
"""The process's portfolios, by their configuration's JSON, the most recent last."""


def budget_check(
    seconds: float, clock: Callable[[], float] = time.thread_time
) -> Callable[[], None]:
    """A round's `check` (`replay.replay_portfolio`): raises `RoundCut` once more than
    `seconds` of `clock` passed since this call."""
    began = clock()

    def check() -> None:
        spent = clock() - began
        if spent > seconds:
            raise RoundCut(
                f"the round was cut after {spent:.1f} s of CPU, beyond its budget of "
                f"{seconds:g} s (--round-budget)"
            )

    return check


def _portfolio(config: PortfolioConfig) -> PortfolioScheduler:
    """The process's portfolio of `config`, built once (`idlegate.policy.make_scheduler`
    builds its candidates, as `make_portfolio` does)."""
    from idlegate.policy import make_scheduler

    key = config.model_dump_json()
    brain = _BUILT.pop(key, None)
    if brain is None:
        brain = PortfolioScheduler(config, make_scheduler)
    _BUILT[key] = brain
    while len(_BUILT) > KEPT:
        del _BUILT[next(iter(_BUILT))]
    return brain


def play_apart(config: PortfolioConfig, request: ReplayRequest, budget: float | None) -> Choice:
    """The replay process: the round of `request` under `config`, cut past `budget` CPU
    seconds (None: never)."""
    check = None if budget is None else budget_check(budget)
    return _portfolio(config).replay(request, check)
