"""Two ExecutorPools end to end: the real kopf operator against the emulated API server and
kubelets (tests/e2e.py), the clock and the kubelets 20 times faster than the wall.

Pool ``team-a`` (2 executors, ``fair``) selects the namespace labelled ``team=a``, pool
``team-b`` (1 executor, ``srpt``) the one labelled ``team=b``; the operator's own pool
(``--pool-size``) would take any other. Each namespace gets a burst of workflows; mid-run
``team-b`` grows to 3 and ``team-a`` shrinks to 1. Checked: every workflow of both
namespaces succeeds with every task run once (nothing preempted, nothing lost), no pool
runs more pods than its size before the resize, the grown pool does run 3 at once, and the
pools' status shows their busy and pending counts and the policy each follows. The shrunk
pool releases no new pod while the pods that ran before the shrink exceed its new size
(they run beyond the pool), and never more than its new size once they have ended.
"""

from __future__ import annotations

from typing import Any

import pytest

from idlegate.api.kinds import API_VERSION, GROUP, POOL_KIND, POOL_PLURAL, VERSION
from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.operator.edge.pools import pool_status as live_pool_status
from idlegate.sim.timestamps import from_datetime
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    SPEED,
    PodMonitor,
    events_of,
    holding_first_runs,
    kubelet_for,
    new_namespace,
    running_operator,
    stage,
    status_of,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads (or processes) of their own; why: tests/e2e.py,
# at SPEED.

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

POOLS = f"{GROUP}/{VERSION}/{POOL_PLURAL}"
WORKFLOWS = 3
TASKS = 4
DURATION = 20.0  # simulated seconds: 1 s of wall per task


def team_namespace(api: ApiServer, team: str) -> str:
    name = new_namespace(api, f"pools-{team}")
    api.patch("namespaces", None, name, {"metadata": {"labels": {"team": team}}})
    return name


def pool(name: str, size: int, policy: str, team: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": POOL_KIND,
        "metadata": {"name": name},
        "spec": {
            "size": size,
            "policy": policy,
            "namespaceSelector": {"matchLabels": {"team": team}},
        },
    }


def pool_status(api: ApiServer, name: str) -> dict[str, Any]:
    return (api.get(POOLS, None, name) or {}).get("status") or {}


def ready(api: ApiServer, name: str, generation: int) -> bool:
    status = pool_status(api, name)
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    return conditions.get("Ready") == "True" and status.get("observedGeneration") == generation


def resize(api: ApiServer, name: str, size: int) -> None:
    body = api.patch(POOLS, None, name, {"spec": {"size": size}})
    generation = body["metadata"]["generation"]
    wait(lambda: pool_status(api, name).get("size") == size, 10, f"{name} resized to {size}")
    wait(lambda: ready(api, name, generation), 10, f"{name} ready at generation {generation}")


def start_peak(monitor: PodMonitor) -> None:
    """Count the most pods held at once from now on (from what holds one now)."""
    monitor.max_total = len(monitor.running())


class BoundMonitor(PodMonitor):
    """A PodMonitor that, once told a pool's new size (:meth:`bound`), records every moment
    the pool holds more pods than that with one among them that did not run at the time:
    a pod released while the pool was over its size."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.size: int | None = None
        self.before: set[str] = set()
        self.breaches: list[list[str]] = []
        super().__init__(api, namespace)

    def bound(self, size: int) -> None:
        with self._lock:
            self.size, self.before = size, set(self.occupying)

    def _on_event(self, *args: Any) -> None:
        super()._on_event(*args)
        with self._lock:
            held = set(self.occupying)
            if self.size is not None and len(held) > self.size and not held <= self.before:
                self.breaches.append(sorted(held))


def test_two_pools_with_their_policies_and_a_resize_mid_run(api: ApiServer) -> None:
    ns_a, ns_b = team_namespace(api, "a"), team_namespace(api, "b")
    monitors = {ns: BoundMonitor(api, ns) for ns in (ns_a, ns_b)}
    names = [f"w{i}" for i in range(WORKFLOWS)]
    try:
        with (
            kubelet_for(api, ns_a),
            kubelet_for(api, ns_b),
            running_operator(api, ns_a, pool=8, namespaces=(ns_a, ns_b)) as operator,
        ):
            clock = operator.settings.clock
            before = clock.now()
            api.create(POOLS, pool("team-a", 2, "fair", "a"))
            api.create(POOLS, pool("team-b", 1, "srpt", "b"))
            for name in ("team-a", "team-b"):
                wait(lambda name=name: ready(api, name, 1), 10, f"pool {name} ready")
            (cond,) = pool_status(api, "team-b")["conditions"]
            # the operator's clock (20 times the wall's pace here), not the wall
            assert before - 1 <= from_datetime(cond["lastTransitionTime"]) <= clock.now() + 1
            for ns in (ns_a, ns_b):
                for name in names:
                    api.create(DWF, workflow(name, stage("s", TASKS, DURATION)), namespace=ns)
            a, b = monitors[ns_a], monitors[ns_b]
            wait(lambda: len(b.running()) == 1 and len(a.running()) == 2, 10, "both pools busy")
            # (each pool admits its namespace's workflows as kopf reports them: on a loaded
            # machine some may still be on their way when the first ones run)
            expected = {"team-a": [ns_a] * WORKFLOWS, "team-b": [ns_b] * WORKFLOWS, "default": []}
            wait(
                lambda: (
                    {
                        n: sorted(k[0] for k in br.core.workflows)
                        for n, br in operator.pools.bridges.items()
                    }
                    == expected
                ),
                10,
                "every workflow in its namespace's pool",
            )
            # the status timer (every 5 s) shows both pools at work
            wait(lambda: pool_status(api, "team-b").get("busy") == 1, 10, "team-b's busy count")
            status_b = pool_status(api, "team-b")
            assert status_b["policy"] == "srpt" and status_b["pending"] >= 1
            assert pool_status(api, "team-a")["policy"] == "fair"
            assert (a.max_total, b.max_total) == (2, 1)

            resize(api, "team-b", 3)
            wait(lambda: len(b.running()) == 3, 10, "team-b to run 3 at once")
            wait(lambda: len(a.running()) == 2, 10, "team-a to run 2 at once")
            resize(api, "team-a", 1)  # while 2 run: neither is preempted
            a.bound(1)  # (from the resize's status on: the pool runs with its new size)
            wait(lambda: len(a.running()) <= 1, 10, "team-a to drain to its new size")
            start_peak(a)
            for ns in (ns_a, ns_b):
                for name in names:
                    status = wait_phase(api, ns, name, ("Succeeded", "Failed"), timeout=30)
                    assert status["phase"] == "Succeeded", (ns, name, status)
                    assert status["stages"][0]["succeeded"] == TASKS
            assert b.max_total == 3
            assert a.breaches == []  # nothing new released while over the new size
            assert a.max_total == 1  # and never more than it once the older pods ended
            wait(lambda: pool_status(api, "team-a").get("pending") == 0, 10, "team-a drained")
            final = pool_status(api, "team-a")
            assert (final["size"], final["busy"], final["policy"]) == (1, 0, "fair")
    finally:
        for monitor in monitors.values():
            monitor.close()
    for ns, monitor in monitors.items():
        assert monitor.duplicates == [], ns  # no task ran twice: nothing was preempted
        pods = api.list("pods", ns, label_selector=LABEL_WORKFLOW)
        assert len(pods) == WORKFLOWS * TASKS
        assert {p["status"]["phase"] for p in pods} == {"Succeeded"}


def test_a_restart_rebuilds_the_pools_before_it_routes_their_workflows(api: ApiServer) -> None:
    """Issue 42: a restarted operator admitted the workflows before it knew their pool.
    Those naming it (``spec.pool``) got PoolNotFound, the finished ones staying in the
    pool's ``status.pending`` with PoolReady False; those its selector routes went to the
    default pool and ran beyond the pool's size."""
    ns = team_namespace(api, "r")
    named = {"pool": "team-r"}  # (the others by the namespace's label)
    done = {"d0": {}, "d1": {}, "d2": named, "d3": named}
    held, queued = {"h0": {}, "h1": named}, {"q0": named}  # q0 waits for h0 or h1 to end
    unfinished = {**held, **queued}
    pods = holding_first_runs("h0-s-0", "h1-s-0")
    clock = ScaledClock(SPEED)  # one clock across both runs, as wall time is for real

    def create(bodies: dict[str, dict[str, Any]]) -> None:
        for name, spec in bodies.items():
            body = workflow(name, stage("s", 1, 1))
            body["spec"].update(spec)
            api.create(DWF, body, namespace=ns)

    with SimKubelet(api, ns, time_factor=1 / SPEED, durations=pods):
        with running_operator(api, ns, pool=8, clock=clock) as first:
            api.create(POOLS, pool("team-r", 2, "fair", "r"))
            wait(lambda: ready(api, "team-r", 1), 10, "pool team-r ready")
            create(done)
            for name in done:
                wait_phase(api, ns, name, ("Succeeded",))
            team = first.pools.bridges["team-r"]
            create(held)
            wait(lambda: team.core.busy == 2, 10, "team-r full")
            create(queued)
            wait(lambda: len(team.core.workflows) == 3, 10, "q0 queued")
            wait(lambda: first.bridge.lanes.pending() == 0, 10, "the writes")
        with running_operator(api, ns, pool=8, clock=clock) as second:
            wait(lambda: "team-r" in second.pools.bridges, 10, "pool team-r again")
            wait(lambda: second.bridge.lanes.pending() == 0, 10, "the writes")
            team = second.pools.bridges["team-r"]
            assert sorted(name for _, name in team.core.workflows) == sorted(unfinished)
            assert not second.pools.waiting and team.core.busy == 2
            assert live_pool_status("team-r", second.pools)["pending"] == 3
            wait(lambda: pool_status(api, "team-r").get("pending") == 3, 10, "pending 3")
    for name in [*done, *unfinished]:
        reasons = [e["reason"] for e in events_of(api, ns, name)]
        assert "PoolNotFound" not in reasons, (name, reasons)
        conditions = {c["type"]: c for c in status_of(api, ns, name).get("conditions", [])}
        assert conditions.get("PoolReady", {}).get("status", "True") == "True", (name, conditions)
    assert {status_of(api, ns, n)["phase"] for n in done} == {"Succeeded"}
    assert status_of(api, ns, "q0")["phase"] == "Pending"  # never beyond the pool's size


def test_a_pool_that_inherits_queues_without_queues_says_it_on_its_status(api: ApiServer) -> None:
    """Issue 70: an ExecutorPool without queues under ``--forecast-arrivals queues``
    forecasts with poisson arrivals and says so on itself: the condition
    ForecastArrivalsFallback (True, NoQueues, the fix) beside Ready, and a Warning Event;
    its own forecastArrivals makes the condition go."""
    from idlegate.api.pool_spec import ARRIVALS_FALLBACK
    from idlegate.api.queueing import QueueFile
    from idlegate.sim.queues import queues_from

    ns = team_namespace(api, "f")
    queues = QueueFile(queues_from([{"name": "a", "nominal": {"pods": 2}}]))
    with running_operator(
        api, ns, pool=2, forecast_interval=30.0, forecast_arrivals="queues", queues=queues
    ):
        api.create(POOLS, pool("plain", 1, "fifo", "f"))
        wait(lambda: ready(api, "plain", 1), 10, "pool plain ready")

        def fallback() -> dict[str, Any] | None:
            found = pool_status(api, "plain").get("conditions", [])
            return next((c for c in found if c["type"] == ARRIVALS_FALLBACK), None)

        said = wait(fallback, 10, "its ForecastArrivalsFallback condition")
        assert (said["status"], said["reason"]) == ("True", "NoQueues")
        assert said["message"].endswith(
            "Set spec.forecastArrivals on the pool (poisson, or none), or give it queues."
        )
        (event,) = wait(
            lambda: [
                e for e in events_of(api, "default", "plain") if e["reason"] == ARRIVALS_FALLBACK
            ],
            10,
            "its Warning Event",
        )
        assert event["type"] == "Warning" and event["message"] == said["message"]
        api.patch(POOLS, None, "plain", {"spec": {"forecastArrivals": "poisson"}})
        wait(lambda: ready(api, "plain", 2) and fallback() is None, 10, "the condition gone")
