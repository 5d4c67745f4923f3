"""A portfolio's round (`play_apart`) and a lookahead planner's plan (`plan_apart`)
made apart from their owner: in the operator's replay process, a round under a CPU
budget, a plan under its own (``--plan-budget-ms``).

A round or a plan is CPU-bound Python (thousands of simulated events per candidate): run
in a thread of the deciding interpreter, it holds that interpreter's lock most of the
time, and the event loop that watches the cluster and writes its decisions waits behind
it.
So the operator sends the round to its replay process (`operator.forecasting.process.
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

A plan likewise (`LookaheadScheduler.plan` touches only its request and the planner's
rollout schedulers): the process builds the planner from its spec and configuration
once, and the owner adopts the plan (`LookaheadScheduler.adopt`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from idlegate.policy.portfolio.candidates import PortfolioConfig
from idlegate.policy.portfolio.replay import ReplayRequest, RoundCut
from idlegate.policy.portfolio.rounds import Choice
from idlegate.policy.portfolio.scheduler import PortfolioScheduler

if TYPE_CHECKING:
    from idlegate.policy.lookahead import LookaheadConfig
    from idlegate.policy.plans import Plan, PlanRequest

__all__ = ["KEPT", "budget_check", "plan_apart", "play_apart"]

KEPT = 4
"""Configurations whose schedulers a process keeps built (a reload brings a new one)."""

_BUILT: dict[str, Any] = {}
"""The process's portfolios and planners, by their configuration, the most recent last."""


def _kept(key: str, build: Callable[[], Any]) -> Any:
    """The process's scheduler of `key`, built by `build` the first time."""
    built = _BUILT.pop(key, None)
    if built is None:
        built = build()
    _BUILT[key] = built
    while len(_BUILT) > KEPT:
        del _BUILT[next(iter(_BUILT))]
    return built


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


def play_apart(config: PortfolioConfig, request: ReplayRequest, budget: float | None) -> Choice:
    """The replay process: the round of `request` under `config`, cut past `budget` CPU
    seconds (None: never). Its candidates are built by `idlegate.policy.make_scheduler`,
    as `make_portfolio` builds them."""
    from idlegate.policy import make_scheduler

    def build() -> PortfolioScheduler:
        return PortfolioScheduler(config, make_scheduler)

    check = None if budget is None else budget_check(budget)
    return _kept(f"portfolio {config.model_dump_json()}", build).replay(request, check)


def plan_apart(
    spec: str, config: LookaheadConfig, request: PlanRequest, budget: float | None
) -> Plan:
    """The replay process: the plan of `request` by the planner `spec` builds, with
    `config` (the owner's, as its driver set it), within `budget` wall seconds."""
    from idlegate.policy import make_scheduler

    def build() -> Any:
        planner = make_scheduler(spec)
        planner.config = config  # type: ignore[attr-defined]
        return planner

    key = f"planner {spec} {config.model_dump_json()}"
    return _kept(key, build).plan(request, budget)
