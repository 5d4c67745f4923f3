"""Shadow mode (operator/features/shadow.py): a second policy is compared with the active one at
every decision in a worker thread, gating nothing. Agreement with known policies, the
estimated difference from each source, a raising shadow and a slow one."""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from functools import partial
from typing import Any

import pytest

from idlegate.operator.features.shadow import Shadow, estimator
from idlegate.policy import make_scheduler
from idlegate.sim.protocol import Action, ClusterView
from tests.deploy_files import DEPLOY
from tests.operator_fakes import Harness, harness, stage
from tests.planning_helpers import CHAIN, Scripted, planner, settled


def shadowed(h: Harness, policy: Any, **kw: Any) -> Shadow:
    shadow = Shadow(policy, h.metrics, backlog=kw.pop("backlog", 16), **kw)
    h.bridge.core.decider.shadow = shadow
    return shadow


def compared(h: Harness) -> tuple[float, float]:
    """(agreed, disagreed) decisions so far."""
    v = h.metrics.value
    return (
        v("idlegate_shadow_decisions_total", agree="true"),
        v("idlegate_shadow_decisions_total", agree="false"),
    )


async def queue_of_three(h: Harness, shadow: Shadow) -> None:
    """Pool 1: `a` runs, `b` then `c` queue; when `a` ends, FIFO starts `b`, LCFS `c`."""
    await h.submit("a", {"stages": [stage("x", 1, duration=10)]})
    await h.submit("b", {"stages": [stage("x", 1, duration=10)]})
    await h.submit("c", {"stages": [stage("x", 1, duration=10)]})
    await h.run_to_completion()
    await shadow.idle()


@pytest.mark.asyncio
async def test_the_same_policy_as_shadow_agrees_at_every_decision():
    h = harness(pool=1, scheduler=make_scheduler("fifo"))
    shadow = shadowed(h, make_scheduler("fifo"))
    await queue_of_three(h, shadow)
    decisions = h.metrics.decision_count()
    assert decisions == 3 and compared(h) == (3, 0)
    assert h.metrics.value("idlegate_shadow_agreement_ratio") == 1.0


@pytest.mark.asyncio
async def test_lcfs_beside_fifo_disagrees_once_at_the_queue_and_gates_nothing():
    h = harness(pool=1, scheduler=make_scheduler("fifo"))
    shadow = shadowed(h, make_scheduler("lcfs"))
    await queue_of_three(h, shadow)
    assert compared(h) == (2, 1)  # a alone, b-or-c (fifo: b, lcfs: c), c alone
    assert h.metrics.value("idlegate_shadow_agreement_ratio") == pytest.approx(2 / 3)
    order = [e["involvedObject"]["name"] for e in h.kube.events if e["reason"] == "Released"]
    assert order == ["a", "b", "c"]  # the active FIFO's order


class Raising:
    name = "raising"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        raise RuntimeError("shadow exploded")


@pytest.mark.asyncio
async def test_a_raising_shadow_is_counted_and_logged_once_and_never_touches_the_active(caplog):
    h = harness(pool=1, scheduler=make_scheduler("fifo"))
    shadow = shadowed(h, Raising())
    with caplog.at_level(logging.ERROR, "idlegate.operator.core.decider"):
        await queue_of_three(h, shadow)
    assert h.metrics.value("idlegate_shadow_errors_total") == 3
    assert compared(h) == (0, 0) and h.metrics.value("idlegate_policy_errors_total") == 0
    [traceback] = [r for r in caplog.records if r.exc_info]
    assert "'raising' failed to decide as the shadow" in traceback.getMessage()
    assert {h.kube.status(n)["phase"] for n in "abc"} == {"Succeeded"}
    assert not [e for e in h.kube.events if e["reason"] == "PolicyError"]


class Blocked:
    """FIFO that waits for `gate` at every decision (a shadow slower than the cluster)."""

    name = "blocked"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.fifo = make_scheduler("fifo")

    def reset(self, rng: Any) -> None:
        self.fifo.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        self.gate.wait(10)
        return self.fifo.decide(view)


@pytest.mark.asyncio
async def test_a_slow_shadow_never_holds_a_pod_back_and_its_backlog_is_bounded():
    h = harness(pool=1, scheduler=make_scheduler("fifo"))
    slow = Blocked()
    shadow = shadowed(h, slow, backlog=1)
    for name in "abcd":
        await h.submit(name, {"stages": [stage("x", 1, duration=5)]})
    for name in "abc":
        await h.finish(f"{name}-x-0", after=5)  # each release is made while the shadow waits
    assert h.released() == ["d-x-0"]
    assert h.metrics.value("idlegate_shadow_skipped_rounds_total") == 3
    slow.gate.set()
    await shadow.idle()
    assert compared(h) == (1, 0)  # the one round it took


@pytest.mark.asyncio
async def test_the_active_planners_plan_gives_the_estimate_when_the_shadow_is_a_candidate():
    h = harness(pool=1, scheduler=planner("fifo", {"srpt": "srpt"}, Scripted("srpt")))
    shadow = shadowed(h, make_scheduler("fair"))  # Scripted's costs: fair 100, srpt 92
    await h.submit("w", CHAIN)
    await settled(h)
    await h.finish("w-a-0", after=10)  # the next round reads the plan adopted
    await shadow.idle()
    value = h.metrics.value("idlegate_shadow_expected_change")
    assert value == pytest.approx(100 / 92 - 1)


@pytest.mark.asyncio
async def test_a_shadow_planner_estimates_against_the_active_rule_it_simulated():
    h = harness(pool=2, scheduler=make_scheduler("fifo"))
    spec = "lookahead?candidates=fifo&max_decisions=30:srpt"
    shadow = shadowed(h, make_scheduler(spec))
    assert math.isnan(h.metrics.value("idlegate_shadow_expected_change"))
    await h.submit("long", {"stages": [stage("a", 2, duration=40), stage("b", 1, deps=("a",))]})
    await h.submit("short", {"stages": [stage("a", 1, duration=2)]})
    await h.submit("mid", {"stages": [stage("a", 2, duration=8)]})
    await h.run_to_completion()
    await shadow.idle()
    value = h.metrics.value("idlegate_shadow_expected_change")
    assert math.isfinite(value) and value <= 1e-12  # it follows the cheaper of the two


@pytest.mark.asyncio
async def test_without_a_planner_the_estimator_rolls_out_both_policies():
    h = harness(pool=2, scheduler=make_scheduler("fifo"))
    shadow = shadowed(h, make_scheduler("srpt"), estimate=partial(estimator, "fifo", "srpt"))
    assert "rollouts" in shadow.source(h.bridge.core.scheduler)
    await h.submit("long", {"stages": [stage("a", 4, duration=30)]})
    await h.submit("short", {"stages": [stage("a", 1, duration=3)]})
    await h.submit("tiny", {"stages": [stage("a", 1, duration=1)]})
    await shadow.idle()
    value = h.metrics.value("idlegate_shadow_expected_change")
    assert math.isfinite(value) and -1 < value < 1


def test_the_dashboard_shows_agreement_expected_change_errors_and_reloads():
    dashboard = json.loads((DEPLOY / "components/monitoring/idlegate-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for t in panel["targets"]
        for name in re.findall(r"\bidlegate_\w+", t["expr"])
    }
    for series in (
        "idlegate_shadow_decisions_total",
        "idlegate_shadow_agreement_ratio",
        "idlegate_shadow_expected_change",
        "idlegate_shadow_errors_total",
        "idlegate_shadow_skipped_rounds_total",
        "idlegate_policy_reloads_total",
    ):
        assert series in used, series
