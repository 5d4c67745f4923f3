"""An ExecutorPool without queues that inherits the operator's ``--forecast-arrivals queues``
(issue 70): its forecasts invent poisson instead, the nearest it can, and say so, loudly and
once (the project's rule: a part that cannot do what it is set to degrades to a safe
behaviour, and says it): a Warning in the log and on the pool, a gauge, and the pool's
condition ``ForecastArrivalsFallback`` naming the fix; ``idlegate lint`` given the operator's
flag says it too. On the operator's pools against the fakes (tests/operator_fakes.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from idlegate.api.lint import lint_paths
from idlegate.api.pool_spec import (
    ARRIVALS_FALLBACK,
    ExecutorPoolSpec,
    pool_arrivals,
    pool_conditions,
)
from idlegate.api.queueing import QueueFile
from idlegate.sim.queues import queues_from
from tests.operator_fakes import harness

QUEUES = [{"name": "a", "nominal": {"pods": 1}}, {"name": "b", "nominal": {"pods": 1}}]
FIX = "Set spec.forecastArrivals on the pool (poisson, or none), or give it queues."


def spec(**raw: Any) -> ExecutorPoolSpec:
    return ExecutorPoolSpec.model_validate({"size": 1, **raw})


def test_only_an_inherited_queues_without_queues_falls_back_and_says_why():
    arrivals, why = pool_arrivals(spec(), "queues", "plain")
    assert arrivals == "poisson"
    assert why is not None and why.startswith("ExecutorPool 'plain' has no queues")
    assert "they invent poisson instead" in why and why.endswith(FIX)
    assert pool_arrivals(spec(size=2, queues=QUEUES), "queues", "q") == ("queues", None)
    assert pool_arrivals(spec(forecastArrivals="none"), "queues", "p") == ("none", None)
    assert pool_arrivals(spec(), "poisson", "p") == ("poisson", None)


def test_the_pools_condition_says_it_while_it_holds_and_goes_after():
    why = pool_arrivals(spec(), "queues", "plain")[1]
    written = pool_conditions(True, "Running", "The pool runs its workflows.", 10.0, {}, why)
    (fallback,) = [c for c in written if c["type"] == ARRIVALS_FALLBACK]
    said = fallback["status"], fallback["reason"], fallback["message"]
    assert said == ("True", "NoQueues", why)
    body = {"status": {"conditions": written}}
    after = pool_conditions(True, "Running", "The pool runs its workflows.", 20.0, body)
    assert [c["type"] for c in after] == ["Ready"]


@pytest.mark.asyncio
async def test_a_pool_that_falls_back_says_it_once_in_the_log_on_the_pool_and_a_gauge(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness(
        pool=2, forecast_interval=30.0, forecast_arrivals="queues",
        queues=QueueFile(queues_from(QUEUES)),
    )  # fmt: skip
    pools = h.pools
    with caplog.at_level(logging.WARNING, logger="idlegate.operator.edge.pools"):
        pools.apply("plain", spec(), "uid-plain")
        pools.apply("plain", spec(), "uid-plain")  # (the same spec again: said already)
        pools.apply("plain", spec(size=2), "uid-plain")  # (a new bridge, the same pool)
        pools.apply("queued", spec(size=2, queues=QUEUES), "uid-queued")
    await h.settle()
    bridge = pools.bridges["plain"]
    assert bridge.forecasts is not None and bridge.forecasts.arrivals == "poisson"
    assert pools.bridges["queued"].forecasts.arrivals == "queues"  # type: ignore[union-attr]
    (warning,) = [r for r in caplog.records if "has no queues" in r.getMessage()]
    assert warning.levelno == logging.WARNING and warning.getMessage().endswith(FIX)
    (event,) = [e for e in h.kube.events if e["reason"] == ARRIVALS_FALLBACK]
    assert event["type"] == "Warning" and event["message"].endswith(FIX)
    assert event["involvedObject"]["kind"] == "ExecutorPool"
    assert event["involvedObject"]["name"] == "plain"
    assert bridge.metrics.value("idlegate_forecast_arrivals_fallback") == 1
    assert pools.bridges["queued"].metrics.value("idlegate_forecast_arrivals_fallback") == 0
    assert pools.arrivals_fallback == {"plain": warning.getMessage()}
    # fixed by its own forecastArrivals: in place, the gauge and the condition's source go
    pools.apply("plain", spec(size=2, forecastArrivals="poisson"), "uid-plain")
    assert pools.bridges["plain"] is bridge
    assert bridge.metrics.value("idlegate_forecast_arrivals_fallback") == 0
    assert pools.arrivals_fallback == {}
    # set back to inheriting: said again (it starts again), and a deleted pool forgets it
    pools.apply("plain", spec(size=2), "uid-plain")
    assert "plain" in pools.arrivals_fallback
    pools.remove("plain")
    assert pools.arrivals_fallback == {}
    assert bridge.metrics.value("idlegate_forecast_arrivals_fallback") == 0


@pytest.mark.asyncio
async def test_a_pool_without_forecasts_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    h = harness(pool=2, forecast_arrivals="queues", queues=QueueFile(queues_from(QUEUES)))
    with caplog.at_level(logging.WARNING):
        h.pools.apply("plain", spec(), "uid-plain")
    assert h.pools.arrivals_fallback == {} and "has no queues" not in caplog.text


POOLS = """\
apiVersion: idlegate.io/v1alpha1
kind: ExecutorPool
metadata: {name: plain}
spec: {size: 2}
---
apiVersion: idlegate.io/v1alpha1
kind: ExecutorPool
metadata: {name: own}
spec: {size: 2, forecastArrivals: poisson}
---
apiVersion: idlegate.io/v1alpha1
kind: ExecutorPool
metadata: {name: queued}
spec: {size: 2, queues: [{name: a, nominal: {pods: 1}}]}
"""


def test_lint_given_the_operators_flag_notes_a_pool_that_would_fall_back(tmp_path):
    path = tmp_path / "pools.yaml"
    path.write_text(POOLS)
    report = lint_paths([str(path)], forecast_arrivals="queues")
    assert report.ok
    (note,) = [n for n in report.notes if n.reason == ARRIVALS_FALLBACK]
    assert note.document == 0 and note.message.startswith("ExecutorPool 'plain' has no queues")
    assert note.message.endswith(FIX)
    quiet = lint_paths([str(path)])  # (without the flag: the operator's default, none)
    assert not [n for n in quiet.notes if n.reason == ARRIVALS_FALLBACK]
