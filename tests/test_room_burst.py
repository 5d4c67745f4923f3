"""Issue 79, the flood's burst: the room of a pool that follows its nodes is read when a
pod's binding or end may change it, not at every pod event, and a reading starts a round
only when it tells the pool more room than it knew.

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

from idlegate.api.pacing import ROOM_SECONDS
from idlegate.operator.core.events import PodSeen
from tests.operator_fakes import harness, stage

pytestmark = pytest.mark.looptime


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
        self.rounds, self.after_reading, self.ends = 0, 0, 0
        read, decide = h.pools.nodes_changed, h.core.decider.decide
        self.reading = False
        self.delay = random.Random(0).uniform

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
            return decide(*args)

        h.pools.nodes_changed = counted_read
        h.core.decider.decide = counted_decide

    def written(self, method: str, name: str) -> None:
        if method in ("create_pod", "patch_pod", "delete_pod"):
            self.loop.call_later(self.delay(0.01, 0.2), self.event, name)

    def event(self, name: str) -> None:
        """The pod-events handler's part for pod `name` (`operator.main.pod_event`)."""
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
        h.pools.handle(PodSeen(body, etype == "DELETED"))
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


@pytest.mark.asyncio
async def test_a_floods_burst_reads_the_room_when_pods_end_and_rounds_when_it_grew():
    """40 diamonds of 5 tasks at once on three nodes: each pod is released, bound and
    ended, three changes of its `room_key`. The room is read after ends (a release the
    applier counts, a binding where the pod was pinned, change none), at most once in
    `ROOM_SECONDS`: fewer readings than half the pods ended (before: 281 readings for 200
    ends, 165 of them starting a round, 366 rounds in all; now 82, 83 and 284)."""
    h = harness(pool=200, pool_nodes="")
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
    readings = cluster.readings[1:]  # (the first: the test's own)
    gaps = [b - a for a, b in itertools.pairwise(readings)]
    assert min(gaps) >= ROOM_SECONDS - 1e-9
    assert len(readings) < cluster.ends // 2
    assert cluster.after_reading <= len(cluster.readings) and cluster.rounds < 300
