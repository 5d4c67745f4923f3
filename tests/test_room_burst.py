"""Issue 79, the flood's burst: the room of a pool that follows its nodes is read when a
pod's binding or end may change it, not at every pod event; a reading starts a round only
when the room that grew lets a waiting task fit on a node; and the pods' ends of a burst
(less than `round_window` after a round) join the next round, not one each.

A flood on three nodes, over the fakes in the loop's fake time: the API's pod writes come
back as watch events (what the operator's pod-events handler does with each), a
kube-scheduler stand-in binds each released pod where it is pinned, and a kubelet ends it
after its declared duration.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
from typing import Any

import pytest

from idlegate.operator.core.events import PodSeen
from idlegate.operator.lag import pacing
from idlegate.operator.lag.pacing import ARRIVALS_ROUND, ROOM_SECONDS
from idlegate.policy import make_scheduler
from tests.operator_fakes import harness, stage

pytestmark = pytest.mark.looptime


@pytest.fixture(autouse=True)
def free_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reading's CPU read as nothing: the room's pacing (`pacing.pause_after`: nine times
    a reading's CPU, at least `ROOM_SECONDS`) then rests on the loop's fake time alone, so
    the counts below do not move with how busy the machine is (a reading that took 25 ms
    of a contended core paced the next past 0.2 s, and the counts fell below the bounds)."""
    monkeypatch.setattr(pacing, "thread_time", lambda: 0.0)


def node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    ready = [{"type": "Ready", "status": "True"}]
    return {"metadata": {"name": name, "labels": {}}, "spec": {}, "status": {
        "allocatable": allocatable, "conditions": ready}}  # fmt: skip


class Cluster:
    """The fakes' pods as watch events to `h`'s pools, bound and run."""

    def __init__(self, h: Any) -> None:
        self.h, self.loop = h, asyncio.get_running_loop()
        self.start = self.loop.time()
        watch = h.pools.watch
        watch.nodes = {n: [node(n)] for n in ("n1", "n2", "n3")}
        watch.pods = self.index = {}
        watch.read = True
        h.kube.on_effect = self.written
        self.readings: list[float] = []
        self.rounds, self.after_reading, self.in_pod_events, self.ends = 0, 0, 0, 0
        read, decide = h.pools.nodes_changed, h.core.decider.decide
        self.reading = self.pod_event = False

        def counted_read() -> None:
            self.readings.append(self.loop.time())
            self.reading = True
            try:
                read()
            finally:
                self.reading = False

        self.delay = random.Random(0).uniform

        def counted_decide(*args: Any) -> Any:
            self.rounds += 1
            self.after_reading += self.reading
            self.in_pod_events += self.pod_event
            return decide(*args)

        h.pools.nodes_changed = counted_read
        h.core.decider.decide = counted_decide

    def written(self, method: str, name: str) -> None:
        if method in ("create_pod", "patch_pod", "delete_pod"):
            self.loop.call_later(self.delay(0.01, 0.2), self.event, name)

    def event(self, name: str) -> None:
        """The pod-events handler's part for pod `name` (`operator.handlers.pods.pod_event`)."""
        h = self.h
        self.h.clock.t = 1_700_000_000.0 + self.loop.time() - self.start
        found = h.kube.pods.get(("default", name))
        etype = "MODIFIED" if ("default", name) in self.index else "ADDED"
        if found is None:
            etype, found = "DELETED", self.index.pop(("default", name), [None])[0]
            if found is None:
                return
        else:
            self.index[("default", name)] = [copy.deepcopy(found)]
        body = copy.deepcopy(found)
        h.pools.watch.seen({"type": etype, "object": body})
        if h.pools.watch.changed(etype, body):
            h.pools.room_soon()
        self.pod_event = True
        try:
            h.pools.handle(PodSeen(body, etype == "DELETED"))
        finally:
            self.pod_event = False
        spec, status = found["spec"], found["status"]
        if etype == "DELETED" or status["phase"] != "Pending" or spec.get("schedulingGates"):
            return
        if not spec.get("nodeName"):  # (the kube-scheduler binds it where it is pinned)
            self.loop.call_later(self.delay(0.01, 0.2), self.bind, name)

    def bind(self, name: str) -> None:
        pod = self.h.kube.pods[("default", name)]
        if pod["spec"].get("nodeName"):  # (bound after an earlier event of it)
            return
        pod["spec"]["nodeName"] = next(iter(pod["spec"]["nodeSelector"].values()))
        self.written("patch_pod", name)
        self.loop.call_later(self.delay(3.0, 5.0), self.end, name)

    def end(self, name: str) -> None:
        self.h.kube.pods[("default", name)]["status"]["phase"] = "Succeeded"
        self.ends += 1
        self.written("patch_pod", name)


async def flood(h: Any) -> Cluster:
    """40 diamonds of 5 tasks at once on three nodes, run to their end (`Cluster`)."""
    cluster = Cluster(h)
    h.pools.nodes_changed()
    diamond = [
        stage("a", tasks=1, duration=4.0, resources={"cpu": "500m"}),
        stage("b", tasks=3, duration=4.0, deps=("a",), resources={"cpu": "500m"}),
        stage("c", tasks=1, duration=4.0, deps=("b",), resources={"cpu": "500m"}),
    ]
    for i in range(40):
        body = h.kube.add_workflow(f"w{i}", {"stages": diamond})
        h.pools.admit(copy.deepcopy(body), *h.indexed(body), soon=True)
    await asyncio.sleep(60)
    await h.settle()
    phases = [h.kube.status(f"w{i}").get("phase") for i in range(40)]
    assert phases == ["Succeeded"] * 40 and cluster.ends == 200
    return cluster


@pytest.mark.asyncio
async def test_a_floods_burst_reads_the_room_when_pods_end_and_rounds_when_it_grew():
    """Each pod is released, bound and ended, three changes of its `room_key`. The room
    is read after ends (a release the applier counts, a binding where the pod was pinned,
    change none), at most once in `ROOM_SECONDS`: fewer readings than half the pods ended.
    A reading starts a round only if a waiting task fits a node now (`Cluster.may_start`),
    and an end less than `round_window` after a round joins the next. The code before
    both: 87 readings, 88 rounds started by one, 200 by the pods' events, 289 in all;
    now 83, 53, 18 and 134."""
    h = harness(pool=200, pool_nodes="", round_window=ARRIVALS_ROUND)
    cluster = await flood(h)
    readings = cluster.readings[1:]  # (the first: the flood's own)
    gaps = [b - a for a, b in itertools.pairwise(readings)]
    assert min(gaps) >= ROOM_SECONDS - 1e-9
    assert len(readings) < cluster.ends // 2
    assert cluster.after_reading <= 70  # (a round after each reading that grew: 84)
    assert cluster.in_pod_events <= 50  # (each end a round: 200)
    assert cluster.rounds <= 170


@pytest.mark.asyncio
async def test_without_the_window_or_the_fit_each_burst_is_its_rounds_as_before():
    """The two cuts undone, each alone: ends decided at once (`round_window` 0) are a
    round each; readings that grew without a task that fits a round each (84 of 83)."""
    h = harness(pool=200, pool_nodes="")
    cluster = await flood(h)
    assert cluster.in_pod_events == 200 and cluster.rounds > 250
    h = harness(pool=200, pool_nodes="", round_window=ARRIVALS_ROUND)
    h.core.cluster.may_start = lambda: True  # type: ignore[method-assign]
    cluster = await flood(h)
    assert cluster.after_reading > 80 and cluster.in_pod_events <= 50


@pytest.mark.asyncio
@pytest.mark.parametrize("window", [0.0, ARRIVALS_ROUND])
async def test_ends_of_one_instant_release_what_each_ends_round_released(window: float):
    """Three pods of a pool of three under srpt end in one turn of the loop, as the
    simulator's ends of one time: with `round_window` the first is decided at once and
    the two others by one round after it; without, by a round each. The same tasks are
    released in the same order (srpt's: the shortest waiting workflow first)."""
    h = harness(pool=3, scheduler=make_scheduler("srpt"), round_window=window)
    rounds: list[list[str]] = []
    decide = h.core.decider.decide

    def decided(*args: Any) -> Any:
        done = decide(*args)
        rounds.append([a.decision.stage.job.name for a in done.taken if a.launches])
        return done

    h.core.decider.decide = decided  # type: ignore[method-assign]
    for i, seconds in enumerate((10, 10, 10, 50, 20, 40, 30)):
        await h.submit(f"w{i}", {"stages": [stage("a", duration=seconds)]})
    assert h.released() == ["w0-a-0", "w1-a-0", "w2-a-0"]
    await asyncio.sleep(1.0)
    rounds.clear()
    h.clock.advance(10)
    for name in h.released():
        pod = h.kube.pods[("default", name)]
        pod["status"]["phase"] = "Succeeded"
        h.pools.handle(PodSeen(copy.deepcopy(pod)))
    await asyncio.sleep(ARRIVALS_ROUND)
    await h.settle()
    assert h.released() == ["w4-a-0", "w5-a-0", "w6-a-0"]
    assert [name for done in rounds for name in done] == ["default/w4", "default/w6", "default/w5"]
    assert len(rounds) == (3 if window == 0 else 2)
