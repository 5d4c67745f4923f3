"""The nodes' ledger (idlegate.operator.nodes.ledger.NodeLedger): kept from the events that changed it
(a pod bound, ended, deleted; a node added, changed, removed), it reads the same room as
a count of every node and pod from scratch (the room before the ledger, below)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from idlegate.api.labels import ANNOTATION_STOP
from idlegate.api.nodes import Node, read_node
from idlegate.api.pool_spec import LabelSelector, selects
from idlegate.operator.nodes.ledger import (
    ONE_POD,
    SCORED,
    NodeLedger,
    Placing,
    Releasing,
    Room,
    _add,
    _created,
    _name,
    _pinned,
    held,
    released,
    room,
    room_key,
)
from idlegate.sim.resources import ResourceVector, least_allocated


def scanned(
    nodes: Iterable[Node],
    pods: Iterable[Mapping[str, Any]],
    selector: LabelSelector | None,
    releasing: Mapping[tuple[str, str], Releasing] | None = None,
    request: Callable[[Mapping[str, Any]], ResourceVector] | None = None,
) -> Room:
    """`room` as it was before the ledger, reading every pod: the oracle."""
    releasing = releasing or {}
    seen: set[tuple[str, str]] = set()
    chosen = sorted((n for n in nodes if n.usable and selects(selector, n.labels)), key=_name)
    used: dict[str, dict[str, int]] = {n.name: {} for n in chosen}
    foreign: dict[str, int] = {}
    unbound: list[tuple[Mapping[str, Any], ResourceVector, str | None]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        mine, key = released(pod), (meta.get("namespace", ""), meta.get("name", ""))
        seen.add(key)
        if key in releasing:
            pod, mine = {**pod, "spec": {**(pod.get("spec") or {}), "schedulingGates": []}}, True
        hold = held(pod, request)
        if hold is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node in used:  # (sums of plain ints: a vector per pod is slow at 1000s of pods)
            _add(used[node], hold)
            if not mine:
                _add(foreign, hold)
        elif not node and mine:
            unbound.append((pod, hold, _pinned(pod) or releasing.get(key, (None, None))[1]))
    for (namespace, name), (ask, host) in releasing.items():
        if (namespace, name) not in seen and ask is not None:
            meta = {"metadata": {"namespace": namespace, "name": name}}
            unbound.append((meta, ask + ONE_POD, host))
    free = {n.name: n.allocatable - used[n.name] for n in chosen}
    short = []
    names = sorted({k for n in chosen for k in n.allocatable} | {k for u in unbound for k in u[1]})
    scored = [i for i, k in enumerate(names) if k in SCORED]
    totals = [[n.allocatable[k] for k in names] for n in chosen]
    hosts = [n.host for n in chosen]
    # (in the kube-scheduler's order, older first: on its pinned node, else where its
    # scoring puts each)
    for pod, hold, host in sorted(unbound, key=lambda p: _created(p[0])):
        if host in hosts:  # (it goes there, or waits there for room)
            name = chosen[hosts.index(host)].name
            fits, free[name] = hold.fits(free[name]), free[name] - hold
            if not fits:
                short.append(pod)
            continue
        frees = [[free[n.name][k] for k in names] for n in chosen]
        at = least_allocated([hold[k] for k in names], frees, totals, scored)
        if at is None:
            short.append(pod)
        else:
            free[chosen[at].name] = free[chosen[at].name] - hold
    total = ResourceVector()
    for n in chosen:
        total = total + n.allocatable
    capacity = ResourceVector({k: max(0, v) for k, v in (total - ResourceVector(foreign)).items()})
    alloc = [n.allocatable for n in chosen]
    return Room(capacity, list(free.items()), short, alloc, hosts, chosen)


def node(name: str, cpu: int, ready: bool = True, pool: str = "a") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"pool": pool, "kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": "4"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    cpu: str,
    on: str = "",
    *,
    namespace: str = "ns",
    mine: bool = False,
    gated: bool = False,
    phase: str = "Running",
    pinned: str = "",
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"cpu": cpu}}}]}
    if on:
        spec["nodeName"] = on
    if gated:
        spec["schedulingGates"] = [{"name": "idlegate.io/gate"}]
    if pinned:
        spec["nodeSelector"] = {"kubernetes.io/hostname": pinned}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "creationTimestamp": created}
    if mine:
        meta["annotations"] = {"idlegate.io/executor": "0"}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def same(a: Room, b: Room) -> None:
    assert a.capacity == b.capacity
    assert a.free == b.free
    assert a.short == b.short
    assert a.allocatable == b.allocatable and a.hosts == b.hosts and a.nodes == b.nodes


def test_a_pod_bound_ended_and_deleted_moves_its_nodes_room():
    ledger = NodeLedger.of([read_node(node("a", 8)), read_node(node("b", 4))], [])
    ledger.pod(pod("x", "2", "a"))  # (bound, not idlegate's: the pool's capacity too)
    now = ledger.room(LabelSelector())
    assert dict(now.free)["a"]["cpu"] == 6000 and now.capacity["cpu"] == 10000
    ledger.pod(pod("y", "1", "b", mine=True))  # (idlegate's: the node's room only)
    now = ledger.room(LabelSelector())
    assert dict(now.free)["b"]["cpu"] == 3000 and now.capacity["cpu"] == 10000
    ledger.pod(pod("x", "2", "a", phase="Succeeded"))  # (ended: holds nothing)
    assert dict(ledger.room(LabelSelector()).free)["a"]["cpu"] == 8000
    ledger.pod(pod("y", "1", "b", mine=True), deleted=True)
    assert dict(ledger.room(LabelSelector()).free)["b"]["cpu"] == 4000
    ledger.node(read_node(node("b", 4)), deleted=True)
    assert [n for n, _ in ledger.room(LabelSelector()).free] == ["a"]


def test_a_pod_being_stopped_counts_on_its_node_until_it_is_gone_and_says_where_it_runs():
    # a reclaim's room coming back (`Room.stopping`): the pods carrying the stop's mark,
    # bound and holding; and `Placing` reads a pod's node from the pod index, by its name
    ledger = NodeLedger.of([read_node(node("a", 8)), read_node(node("b", 4))], [])
    running = pod("y", "1", "b", mine=True)
    ledger.pod(running)
    marked = {**running, "metadata": {**running["metadata"], "annotations": {ANNOTATION_STOP: "q"}}}
    assert room_key(marked) != room_key(running)  # (the mark is a reading of the room)
    ledger.pod(marked)
    now = ledger.room(LabelSelector())
    assert [s["cpu"] for s in now.stopping] == [0, 1000] and dict(now.free)["b"]["cpu"] == 3000
    index = {("ns", "y"): [marked]}
    placing = Placing({n.name: i for i, n in enumerate(now.nodes)}, index, tuple(now.stopping))
    placed = placing.placed(lambda e: ("ns", "y") if e == 7 else ("ns", "gone"))
    assert placed.runs_on(7) == 1 and placed.runs_on(8) is None
    ledger.pod(running)  # (the mark taken off: a budget refused the eviction)
    assert [s["cpu"] for s in ledger.room(LabelSelector()).stopping] == [0, 0]
    ledger.pod(marked)
    ledger.pod(marked, deleted=True)  # (gone: its room is the node's again)
    now = ledger.room(LabelSelector())
    assert [s["cpu"] for s in now.stopping] == [0, 0] and dict(now.free)["b"]["cpu"] == 4000


def test_after_random_events_the_ledger_reads_as_every_pod_counted_again():
    # pods created, bound, gated, released, ended, deleted; nodes added, cordoned, removed;
    # pods being released (`releasing`): each reading equals the count from scratch
    rng = random.Random(61)
    nodes: dict[str, dict[str, Any]] = {
        f"n{i}": node(f"n{i}", rng.choice((4, 8))) for i in range(5)
    }
    pods: dict[tuple[str, str], dict[str, Any]] = {}
    ledger = NodeLedger.of([read_node(b) for b in nodes.values()], [])
    for step in range(1500):
        event = rng.random()
        if event < 0.6:
            name, namespace = f"p{rng.randrange(60)}", rng.choice(("ns", "other"))
            on = rng.choice(["", "", *nodes, "gone"])
            body = pod(
                name,
                rng.choice(("100m", "1", "2", "3")),
                on,
                namespace=namespace,
                mine=rng.random() < 0.6,
                gated=not on and rng.random() < 0.5,
                phase=rng.choice(("Running", "Running", "Pending", "Succeeded", "Failed")),
                pinned=rng.choice(["", "", *nodes]),
                created=f"2026-01-01T00:00:{rng.randrange(60):02d}Z",
            )
            pods[(namespace, name)] = body
            ledger.pod(body)
        elif event < 0.75 and pods:
            key = rng.choice(sorted(pods))
            ledger.pod(pods.pop(key), deleted=True)
        elif event < 0.85:
            name = f"n{rng.randrange(8)}"
            if name in nodes and rng.random() < 0.4:
                ledger.node(read_node(nodes.pop(name)), deleted=True)
            else:
                body = node(
                    name, rng.choice((4, 8)), ready=rng.random() < 0.8, pool=rng.choice("ab")
                )
                nodes[name] = body
                ledger.node(read_node(body))
        selector = rng.choice((None, LabelSelector(), LabelSelector(match_labels={"pool": "a"})))
        releasing: dict[tuple[str, str], Releasing] = {}
        for key in rng.sample(sorted(pods), min(len(pods), rng.randrange(3))):
            releasing[key] = (ResourceVector({"cpu": 1000}), rng.choice([None, *nodes]))
        if rng.random() < 0.3:
            releasing[("ns", f"unread{step}")] = (ResourceVector({"cpu": 500}), None)
        now = [read_node(b) for b in nodes.values()]
        expected = scanned(now, pods.values(), selector, releasing)
        same(ledger.room(selector, releasing), expected)
        same(room(now, pods.values(), selector, releasing), expected)


def test_spread_places_each_pod_where_least_allocated_would_after_the_ones_before():
    # many unbound pods a reading places: the heaps give least_allocated's answer each time,
    # ties to the first node, pods pinned elsewhere (`take` alone) and nodes running short
    from idlegate.sim.resources import Spread

    rng = random.Random(61)
    for _ in range(40):
        n = rng.randrange(1, 12)
        alloc = [[rng.choice((4000, 8000)), rng.choice((8, 16)) * 2**30, 110] for _ in range(n)]
        free = [[a[0] - rng.choice((0, 1000, 2000)), a[1], a[2]] for a in alloc]
        spread, table = Spread([list(f) for f in free], alloc, (0, 1)), [list(f) for f in free]
        needs = [(1000, 2**30, 1), (2000, 2**31, 1), (500, 0, 1)]
        for _ in range(rng.randrange(1, 60)):
            need = rng.choice(needs)
            if rng.random() < 0.2:  # (pinned: it goes where it is told, fitting or not)
                at: int | None = rng.randrange(n)
            else:
                at = least_allocated(need, table, alloc, (0, 1))
                assert spread.where(need) == at
            if at is not None:
                spread.take(at, need)
                table[at] = [f - x for f, x in zip(table[at], need, strict=True)]
        assert spread.free == table
