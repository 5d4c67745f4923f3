"""A pool's recent arrivals across an operator restart (issue 70): the arrivals a forecast
invents copy the pool's last `TEMPLATES` arrivals at the rate it saw them arrive; the cluster
keeps no finished workflow's DAG and a restarted operator's starts at the restart, so with a
history sink the refresh rebuilds both from the pool's records there (`resume_recent`), and a
restarted pool invents the same futures as the pool that never stopped. On fake time: the
operator's bridge against the fakes (tests/operator_fakes.py), the refresh poked by hand."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from idlegate.operator.edge import intake
from idlegate.operator.forecasting.refresh import ForecastRefresh
from idlegate.operator.forecasting.request import ForecastRequest, futures
from idlegate.policy import make_scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.forecast_arrivals import arrival_rate
from idlegate.sim.rollout import Future as RolloutFuture
from idlegate.sim.timestamps import stamp
from tests.operator_fakes import FakeClock, FakeKube, Harness, stage

T0 = 1_717_200_000.0
SEEN = 6
"""Workflows the pool saw, 10 s apart, one stage of 50 + 10·i s each: four finish on the pool
of one before the restart, one runs and one waits across it."""


def operator(kube: FakeKube, sink: Path | None, t: float) -> Harness:
    return Harness(
        kube, FakeClock(t), 1, make_scheduler("fifo"), history_file=sink,
        forecast_interval=30.0, forecast_arrivals="poisson",
    )  # fmt: skip


def refresh_of(h: Harness) -> ForecastRefresh:
    refresh = h.bridge.forecasts
    assert refresh is not None
    if refresh.resuming is not None:  # (the sink's thread reads it: wait, not race)
        refresh.resuming.result(timeout=10)
    return refresh


async def submit(h: Harness, i: int) -> None:
    body = h.kube.add_workflow(f"w{i}", {"stages": [stage("a", duration=50.0 + 10 * i)]})
    body["metadata"]["creationTimestamp"] = stamp(h.clock.now())  # (its arrival, as the API's)
    h.admit(body)
    await h.settle()


async def seen(h: Harness) -> None:
    """`SEEN` arrivals; the first four run to their end (their estimates exactly)."""
    for i in range(SEEN):
        await submit(h, i)
        h.clock.advance(10.0)
    h.clock.t = T0  # (back to the first arrival: the pool of one runs them one by one)
    for i in range(4):
        (pod,) = h.released()
        end = T0 + sum(50.0 + 10 * k for k in range(i + 1))
        await h.finish(pod, after=end - h.clock.now())


def shape(dag: Dag) -> tuple[Any, ...]:
    return tuple(dag.names), tuple(dag.tasks), tuple(dag.durations)


def templates_of(snap: ForecastRequest) -> list[tuple[Any, ...]]:
    return [(r.arrival, r.queue, shape(r.dag)) for r in snap.recent]


def invented(snap: ForecastRequest) -> list[list[tuple[float, tuple[Any, ...]]]]:
    """The futures `snap`'s replays would run (three, from a seed both pools share)."""
    drawn: Sequence[RolloutFuture] = list(futures(dataclasses.replace(snap, seed=7), 3) or ())
    return [[(a.time, shape(a.dag)) for a in f.arrivals] for f in drawn]


def rate(snap: ForecastRequest) -> float:
    log = snap.rate_log if snap.rate_log is not None else snap.fork.arrival_log
    return arrival_rate(log, snap.fork.now, snap.fork.num_executors)


@pytest.mark.asyncio
async def test_a_restarted_pool_invents_the_futures_of_the_pool_that_never_stopped(
    tmp_path: Path,
) -> None:
    sink, kube = tmp_path / "history.jsonl", FakeKube()
    first = operator(kube, sink, T0)
    await seen(first)
    restart = first.clock.now()
    never_stopped = refresh_of(first).request()
    first.bridge.history.close()  # (the records queued are written)
    for i in range(4):  # (the finished ones are gone: only the sink remembers them)
        del kube.workflows[("default", f"w{i}")]
    # the next operator, at the same instant: it rebuilds w4 (running) and w5 (waiting)
    second = operator(kube, sink, restart)
    await intake.rebuild(second.pools)
    await second.settle()
    restarted = refresh_of(second).request()
    assert len(restarted.recent) == SEEN  # (four from the sink, two rebuilt)
    assert templates_of(restarted) == templates_of(never_stopped)
    assert rate(restarted) == pytest.approx(rate(never_stopped))
    drawn = invented(restarted)
    assert drawn == invented(never_stopped) and any(drawn)
    # without the sink, the restarted pool knows only the two it rebuilt, and their rate
    third = operator(kube, None, restart)
    await intake.rebuild(third.pools)
    await third.settle()
    cold = refresh_of(third).request()
    assert [t[0] for t in templates_of(cold)] == [T0 + 40, T0 + 50]
    assert rate(cold) != pytest.approx(rate(never_stopped))
    second.bridge.history.close()


def test_records_join_the_queue_the_pool_places_them_in_and_a_gone_queue_none() -> None:
    """Each record's template joins its queue as the pool places a workflow (its queueName,
    else its label, else its namespace, else the default); one naming a queue the pool no
    longer has is left out. The rate's log keeps the placed ones' arrivals."""
    from idlegate.sim.admission import Admission
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.history import HistoryWorkflow
    from idlegate.sim.queues import queues_from
    from idlegate.sim.spec import parse_workflow
    from tests.test_forecast_refresh import refresh_of

    cluster = Cluster(2)
    queues = queues_from([{"name": "default"}, {"name": "etl", "namespaces": ["data"]}])
    cluster.admission = Admission(queues, cluster.capacity, cluster.resource_names)
    refresh, _ = refresh_of(cluster, arrivals="queues")

    def record(at: float, namespace: str | None = None, **spec: Any) -> HistoryWorkflow:
        parsed = parse_workflow({"stages": [stage("a")], **spec}, "spec")
        return HistoryWorkflow(parsed, None, at, (None,), f"line {at}", namespace=namespace)

    refresh.resume_recent(
        [
            record(T0 + 3, "data"),  # (its namespace's queue)
            record(T0 + 1, "web"),  # (the default)
            record(T0 + 2, queueName="etl"),
            record(T0 + 4, queueName="gone"),
        ]
    )
    assert [(t.arrival, t.queue) for t in refresh.recent] == [(T0 + 1, 0), (T0 + 2, 1), (T0 + 3, 1)]
    assert refresh.resumed_log == [(T0 + 1, 10.0), (T0 + 2, 10.0), (T0 + 3, 10.0)]
