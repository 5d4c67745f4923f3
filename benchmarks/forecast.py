"""What a forecast refresh costs at 1,000 waiting workflows (docs/research/forecasts.md, Cost).

    .venv/bin/python benchmarks/forecast.py [--waiting 1000] [--schedulers fair,srpt]
        [--variants budget] [--pool pods|nodes|told] [--against OLD/src] [--json]

A `k8s-batch` stream (seed 0) offered at five times the pool's capacity runs under each of
`--schedulers` until `--waiting` workflows wait; then the state is forecast
(`sim.forecast.forecast`) under the scheduler a refresh replays (the pool's own; for a
portfolio such as ``default``, the candidate it follows then, as the operator's refresh
does: `operator.forecasting.request.scheduler_copy`) up to four ways, each timed in CPU seconds of
this process (`time.process_time`, the median of `--repeat` refreshes):

* ``M=20``: twenty full replays, every workflow forecast with its interval;
* ``M=1``: one full replay (what ``budget`` leaves of a long queue: no interval);
* ``budget``: M=20 with a budget of `BUDGET` events, the cap the operator ships;
* ``M=20 1h``: twenty replays cut one hour ahead (later starts are unavailable).

`--pool` picks the pool: ``pods`` (the default), the stream's pods-only pool of 40
executors; ``nodes``, the stream with its pods' requests (``requests=true``) on ten
simulator nodes of 8 CPU and 32 GiB sharing 330 pods (``--nodes``: `sim.pool.FixedNodes`);
``told``, that very state with its nodes told as the operator's driver tells a pool that
follows its nodes (each node's free amounts, each running task's host), whose replays give
a node's room back as their tasks end (docs/research/forecasts.md, "Pools that follow their
nodes").

Printed: per scheduler and variant, the CPU milliseconds, the replays run, the events
simulated, and how many workflows got a forecast. The goal is ≤ 200 ms of CPU per refresh.

`--arrivals poisson` (or ``queues``) times the refresh as a pool whose replays invent
arrivals runs it (``--forecast-arrivals``): the futures drawn from the pool's last
`TEMPLATES` arrivals (`sim.forecast_arrivals.invent`) inside the timed refresh; the
replays then also carry the invented workflows.

`--against SRC` measures the same in a child process on the package at SRC (another
checkout's ``src/``: the code before a change), one scheduler at a time, each side's
figure printed beside the other with their ratio (the machine's load moves both alike).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from math import inf
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Engine
from idlegate.sim.forecast import BUDGET, WorkflowForecast, forecast
from idlegate.sim.pool import identical_nodes, nodes_total
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import build_workload

NODE = ResourceVector.parse("cpu=8,memory=32Gi")
NODES, PODS = 10, 330

VARIANTS: dict[str, dict[str, Any]] = {
    "M=20": {"replays": 20, "horizon": inf},
    "M=1": {"replays": 1, "horizon": inf},
    "budget": {"replays": 20, "budget": BUDGET, "horizon": inf},
    "M=20 1h": {"replays": 20, "horizon": 3600.0},
}
"""The refreshes timed, by name: `forecast`'s keyword arguments."""


def waiting_pool(waiting: int, scheduler: str, pool: str = "pods") -> tuple[Cluster, str]:
    """The pool (`--pool`) once `waiting` workflows of an overloaded k8s-batch stream wait
    under `scheduler`, and the spec a refresh replays then (a portfolio's followed
    candidate)."""
    cluster, policy = overloaded(waiting, scheduler, None if pool == "pods" else NODES)
    return (told(cluster) if pool == "told" else cluster), getattr(policy, "following", scheduler)


def overloaded(waiting: int, scheduler: str, nodes: int | None) -> tuple[Cluster, Any]:
    """The simulator's pool once `waiting` workflows of an overloaded k8s-batch stream wait
    under `scheduler`, and the scheduler: 40 executors (None), or `nodes` nodes of `NODE`
    sharing `PODS` pods, loaded as 5 of them."""
    if nodes is None:
        stream = build_workload("k8s-batch", 0, num_jobs=3 * waiting, load=5.0)
    else:
        # (load 5 of its 40 executors would not fill ten nodes: 5 of theirs)
        stream = build_workload(
            "k8s-batch", 0, num_jobs=3 * waiting, load=5.0 * PODS / 40, requests=True
        )
        shapes = identical_nodes(NODE, nodes, PODS)
        stream = replace(stream, num_executors=PODS, resources=nodes_total(shapes), nodes=shapes)
    policy = make_scheduler(scheduler)
    engine = Engine.for_workload(stream, policy, 0)
    for arrival in stream.jobs:
        engine.run(arrival.time)
        if sum(j.first_start is None for j in engine.cluster.jobs) >= waiting:
            return engine.cluster, policy
    raise SystemExit(f"the stream never had {waiting} workflows waiting")


def waiting_state(waiting: int, scheduler: str, pool: str = "pods") -> Cluster:
    """The pool (`--pool`) once `waiting` workflows of an overloaded k8s-batch stream wait."""
    return waiting_pool(waiting, scheduler, pool)[0]


def told(cluster: Cluster, count: int = NODES, pods: int = PODS) -> Cluster:
    """A fork of `cluster` (on `count` simulator nodes of `NODE` sharing `pods` pods) whose
    nodes are told, as the operator's driver tells a pool that follows its nodes: each
    node's free amounts and allocatable, and the host each running task was pinned to
    (`PoolResources.set_capacity`)."""
    placed = cluster.placed_nodes()
    assert placed is not None, "a state on simulator nodes"
    free, where = placed
    twin = cluster.fork()
    names = twin.resource_names
    hosts = [f"node-{i}" for i in range(len(free))]
    alloc = [
        ResourceVector({n: node[n] for n in (*names, "pods")})
        for node in identical_nodes(NODE, count, pods)
    ]
    now = [ResourceVector(dict(zip((*names, "pods"), node, strict=True))) for node in free]
    # (the driver's telling: a pool on told nodes, not the simulator's own)
    twin._fixed = None
    twin.set_capacity(cluster.capacity.restricted(names), now, alloc, hosts)
    for executor, at in where.items():
        twin._told.went(executor, at)  # type: ignore[union-attr]
    return twin


def measure(
    cluster: Cluster, scheduler: str, repeat: int, arrivals: str = "none", **kwargs: Any
) -> dict[str, Any]:
    """CPU milliseconds (median of `repeat`) of one refresh with `kwargs`, and what it gave;
    with `arrivals` other than none, the futures invented as the operator's refresh draws
    them (`--arrivals`), inside the time."""
    times = []
    for _ in range(repeat):
        began = time.process_time()
        if arrivals != "none":
            # (imported here: a package from before `--against` may not have it)
            from idlegate.sim.forecast_arrivals import TEMPLATES, invent, templates

            recent = templates(sorted(cluster.jobs, key=lambda j: j.arrival)[-TEMPLATES:])
            rng = np.random.default_rng(0)
            kwargs["futures"] = invent(arrivals, cluster, recent, kwargs["replays"], rng)
        out = forecast(cluster, make_scheduler(scheduler), seed=0, **kwargs)
        times.append(time.process_time() - began)
    given = sum(isinstance(e, WorkflowForecast) for e in out.workflows)
    return {
        "cpu_ms": 1000 * median(times),
        "replays": out.replays,
        "events": out.events,
        "forecast": given,
    }


def costs(
    waiting: int,
    scheduler: str,
    variants: list[str],
    repeat: int,
    pool: str = "pods",
    arrivals: str = "none",
) -> dict[str, Any]:
    """`measure` of each of `variants` on the pool `waiting_pool` builds under `scheduler`
    (replays inventing `arrivals`)."""
    cluster, replayed = waiting_pool(waiting, scheduler, pool)
    return {
        "waiting": sum(j.first_start is None for j in cluster.jobs),
        "workflows": len(cluster.jobs),
        "executors": cluster.num_executors,
        "scheduler": scheduler,
        "pool": pool,
        "replayed": replayed,
        "arrivals": arrivals,
        "variants": {
            v: measure(cluster, replayed, repeat, arrivals, **VARIANTS[v]) for v in variants
        },
    }


def costs_at(src: str, *args: Any) -> Any:
    """`costs(*args)` measured in a child process on the package at `src` (with this
    file's own code: only `idlegate` comes from `src`)."""
    code = (
        f"import json; from benchmarks.forecast import costs; print(json.dumps(costs(*{args!r})))"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{root}"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument(
        "--schedulers",
        "--scheduler",
        default="fair",
        help="comma-separated specs, each measured in turn (e.g. fair,srpt,srpt?cap=0.9,"
        "sjf-cp,default)",
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated, of {', '.join(VARIANTS)} (default: all)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pool", choices=("pods", "nodes", "told"), default="pods")
    parser.add_argument(
        "--arrivals",
        choices=("none", "poisson", "queues"),
        default="none",
        help="what the replays invent, as --forecast-arrivals (default: none)",
    )
    parser.add_argument("--against", metavar="SRC", help="also on the package at SRC, beside")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; valid: {', '.join(VARIANTS)}")
    out = []
    for scheduler in [s.strip() for s in args.schedulers.split(",")]:
        after = costs(args.waiting, scheduler, variants, args.repeat, args.pool, args.arrivals)
        before = None
        if args.against is not None:
            before = costs_at(
                args.against,
                args.waiting,
                scheduler,
                variants,
                args.repeat,
                args.pool,
                args.arrivals,
            )
        out.append({"after": after, "before": before})
        if not args.json:
            report(after, before, args.repeat)
    if args.json:
        print(json.dumps(out, indent=2))


def report(after: dict[str, Any], before: dict[str, Any] | None, repeat: int) -> None:
    """One scheduler's figures (and the other package's beside them)."""
    replayed = after["replayed"]
    print(
        f"{after['workflows']} workflows ({after['waiting']} waiting) on {after['executors']} "
        f"executors ({after['pool']}), {after['scheduler']}"
        + ("" if after["arrivals"] == "none" else f", arrivals {after['arrivals']}")
        + (f" (replays {replayed})" if replayed != after["scheduler"] else "")
        + f"; CPU per refresh (median of {repeat})"
        + ("" if before is None else ", this package | --against's")
        + ":"
    )
    for name, v in after["variants"].items():
        line = (
            f"  {name:10} {v['cpu_ms']:8.0f} ms  {v['replays']:>2} replays  "
            f"{v['events']:>7} events  {v['forecast']:>5} forecast"
        )
        if before is not None:
            w = before["variants"][name]
            line += (
                f"  | {w['cpu_ms']:8.0f} ms  {w['replays']:>2} replays  {w['events']:>7} "
                f"events  {w['forecast']:>5} forecast  ({v['cpu_ms'] / w['cpu_ms']:.2f}×)"
            )
            if before["waiting"] != after["waiting"] or before["replayed"] != replayed:
                line += "  (not the same state!)"
        print(line)


if __name__ == "__main__":
    main()
