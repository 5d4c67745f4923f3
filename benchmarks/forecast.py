"""What a forecast refresh costs at 1,000 waiting workflows (docs/forecast.md, Cost).

    .venv/bin/python benchmarks/forecast.py [--waiting 1000] [--scheduler fair] [--json]
        [--pool pods|nodes|told]

A `k8s-batch` stream (seed 0) offered at five times the pool's capacity runs under
`--scheduler` until `--waiting` workflows wait; then the state is forecast
(`sim.forecast.forecast`) four ways, each timed in CPU seconds of this process
(`time.process_time`, the median of `--repeat` refreshes):

* ``M=20``: twenty full replays, every workflow forecast with its interval;
* ``M=1``: one full replay (what ``budget`` leaves of a long queue: no interval);
* ``budget``: M=20 with a budget of `BUDGET` events, the cap docs/forecast.md ships;
* ``M=20, 1 h``: twenty replays cut one hour ahead (later starts are unavailable).

`--pool` picks the pool: ``pods`` (the default), the stream's pods-only pool of 40
executors; ``nodes``, the stream with its pods' requests (``requests=true``) on ten
simulator nodes of 8 CPU and 32 GiB sharing 330 pods (``--nodes``: `sim.pool.FixedNodes`);
``told``, that very state with its nodes told as the operator's driver tells a pool that
follows its nodes (each node's free amounts, each running task's host), whose replays give
a node's room back as their tasks end (docs/forecast.md, "Pools that follow their nodes").

Printed: per variant, the CPU milliseconds, the replays run, the events simulated, and
how many workflows got a forecast. The goal is ≤ 200 ms of CPU per refresh.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from math import inf
from statistics import median
from typing import Any

from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Engine
from idlegate.sim.forecast import BUDGET, WorkflowForecast, forecast
from idlegate.sim.pool import identical_nodes, nodes_total
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import build_workload

NODE = ResourceVector.parse("cpu=8,memory=32Gi")
NODES, PODS = 10, 330


def waiting_state(waiting: int, scheduler: str, pool: str = "pods") -> Cluster:
    """The pool (`--pool`) once `waiting` workflows of an overloaded k8s-batch stream wait."""
    if pool == "pods":
        stream = build_workload("k8s-batch", 0, num_jobs=3 * waiting, load=5.0)
    else:
        # (load 5 of its 40 executors would not fill ten nodes: 5 of theirs)
        stream = build_workload(
            "k8s-batch", 0, num_jobs=3 * waiting, load=5.0 * PODS / 40, requests=True
        )
        nodes = identical_nodes(NODE, NODES, PODS)
        stream = replace(stream, num_executors=PODS, resources=nodes_total(nodes), nodes=nodes)
    engine = Engine.for_workload(stream, make_scheduler(scheduler), 0)
    for arrival in stream.jobs:
        engine.run(arrival.time)
        if sum(j.first_start is None for j in engine.cluster.jobs) >= waiting:
            return engine.cluster if pool != "told" else told(engine.cluster)
    raise SystemExit(f"the stream never had {waiting} workflows waiting")


def told(cluster: Cluster) -> Cluster:
    """A fork of `cluster` (on simulator nodes) whose nodes are told, as the operator's
    driver tells a pool that follows its nodes: each node's free amounts and allocatable,
    and the host each running task was pinned to (`PoolResources.set_capacity`)."""
    placed = cluster.placed_nodes()
    assert placed is not None, "a state on simulator nodes"
    free, where = placed
    twin = cluster.fork()
    names = twin.resource_names
    hosts = [f"node-{i}" for i in range(len(free))]
    alloc = [
        ResourceVector({n: node[n] for n in (*names, "pods")})
        for node in identical_nodes(NODE, NODES, PODS)
    ]
    now = [ResourceVector(dict(zip((*names, "pods"), node, strict=True))) for node in free]
    # (the driver's telling: a pool on told nodes, not the simulator's own)
    twin._fixed = None
    twin.set_capacity(cluster.capacity.restricted(names), now, alloc, hosts)
    for executor, at in where.items():
        twin._told.went(executor, at)  # type: ignore[union-attr]
    return twin


def measure(cluster: Cluster, scheduler: str, repeat: int, **kwargs: Any) -> dict[str, Any]:
    """CPU milliseconds (median of `repeat`) of one refresh with `kwargs`, and what it gave."""
    times = []
    for _ in range(repeat):
        began = time.process_time()
        out = forecast(cluster, make_scheduler(scheduler), seed=0, **kwargs)
        times.append(time.process_time() - began)
    given = sum(isinstance(e, WorkflowForecast) for e in out.workflows)
    return {
        "cpu_ms": 1000 * median(times),
        "replays": out.replays,
        "events": out.events,
        "forecast": given,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--scheduler", default="fair")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pool", choices=("pods", "nodes", "told"), default="pods")
    args = parser.parse_args()
    cluster = waiting_state(args.waiting, args.scheduler, args.pool)
    waiting = sum(j.first_start is None for j in cluster.jobs)
    variants: dict[str, dict[str, Any]] = {
        "M=20": {"replays": 20},
        "M=1": {"replays": 1},
        "budget": {"replays": 20, "budget": BUDGET},
        "M=20, 1 h": {"replays": 20, "horizon": 3600.0},
    }
    out = {
        "waiting": waiting,
        "workflows": len(cluster.jobs),
        "executors": cluster.num_executors,
        "scheduler": args.scheduler,
        "pool": args.pool,
        "variants": {
            name: measure(cluster, args.scheduler, args.repeat, horizon=inf, **kw)
            if "horizon" not in kw
            else measure(cluster, args.scheduler, args.repeat, **kw)
            for name, kw in variants.items()
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{out['workflows']} workflows ({waiting} waiting) on {out['executors']} executors "
        f"({args.pool}), {args.scheduler}; CPU per refresh (median of {args.repeat}):"
    )
    for name, v in out["variants"].items():
        print(
            f"  {name:10} {v['cpu_ms']:8.0f} ms  {v['replays']:>2} replays  "
            f"{v['events']:>7} events  {v['forecast']:>5} forecast"
        )


if __name__ == "__main__":
    main()
