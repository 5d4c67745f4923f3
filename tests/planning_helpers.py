"""What the planner's tests share (test_operator_planning, test_operator_shadow): a chain
workflow, a scripted plan, a lookahead scheduler planning in the operator's worker, and a
wait until its plans and writes are done."""

from __future__ import annotations

import threading
import time
from typing import Any

from idlegate.operator.features.planning import PlanningWorker
from idlegate.policy import make_scheduler
from idlegate.policy.lookahead import LookaheadConfig, LookaheadScheduler, Plan, PlanRequest
from tests.operator_fakes import Harness, stage

CHAIN = {"stages": [stage("a", 1), stage("b", 1, deps=("a",))]}


class Scripted:
    """A planner's `plan` that answers `choice` after `gate` is set (and `sleep` s)."""

    def __init__(self, choice: str, *, sleep: float = 0.0, error: Exception | None = None):
        self.choice, self.sleep, self.error = choice, sleep, error
        self.gate = threading.Event()
        self.gate.set()
        self.threads: list[str] = []

    def __call__(self, request: PlanRequest, budget: float | None = None) -> Plan:
        self.threads.append(threading.current_thread().name)
        self.gate.wait(10)
        time.sleep(self.sleep)
        if self.error is not None:
            raise self.error
        costs = {"fair": 100.0, self.choice: 92.0}
        return Plan(request.key, self.choice, costs, (), 2, 120.0, request.now, 0.03, 0.03)


def planner(base: Any, others: dict[str, str], plan: Scripted) -> LookaheadScheduler:
    """A lookahead scheduler following `base`, planning in the worker with `plan`."""
    made = LookaheadScheduler(
        lambda: base() if callable(base) else make_scheduler(base),
        {name: (lambda s=spec: make_scheduler(s)) for name, spec in others.items()},
        LookaheadConfig(planner="worker", candidates=tuple(others)),
    )
    made.plan = plan  # type: ignore[method-assign]
    return made


def worker(h: Harness) -> PlanningWorker:
    assert h.bridge.planning is not None
    return h.bridge.planning


async def settled(h: Harness) -> None:
    """Until no plan runs and every write is done."""
    await worker(h).idle()
    await h.settle()
