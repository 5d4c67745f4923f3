"""What a forecast refresh costs at 1,000 waiting workflows (docs/forecast.md, Cost).

    .venv/bin/python benchmarks/forecast.py [--waiting 1000] [--scheduler fair] [--json]

A `k8s-batch` stream (seed 0) offered at five times the pool's capacity runs under
`--scheduler` until `--waiting` workflows wait; then the state is forecast
(`sim.forecast.forecast`) four ways, each timed in CPU seconds of this process
(`time.process_time`, the median of `--repeat` refreshes):

* ``M=20``: twenty full replays, every workflow forecast with its interval;
* ``M=1``: one full replay (what ``budget`` leaves of a long queue: no interval);
* ``budget``: M=20 with a budget of `BUDGET` events, the cap docs/forecast.md ships;
* ``M=20, 1 h``: twenty replays cut one hour ahead (later starts are unavailable).

Printed: per variant, the CPU milliseconds, the replays run, the events simulated, and
how many workflows got a forecast. The goal is ≤ 200 ms of CPU per refresh.
"""

from __future__ import annotations

import argparse
import json
import time
from math import inf
from statistics import median
from typing import Any

from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Engine
from idlegate.sim.forecast import BUDGET, WorkflowForecast, forecast
from idlegate.sim.workloads import build_workload


def waiting_state(waiting: int, scheduler: str) -> Cluster:
    """The pool once `waiting` workflows of an overloaded k8s-batch stream wait."""
    stream = build_workload("k8s-batch", 0, num_jobs=3 * waiting, load=5.0)
    engine = Engine.for_workload(stream, make_scheduler(scheduler), 0)
    for arrival in stream.jobs:
        engine.run(arrival.time)
        if sum(j.first_start is None for j in engine.cluster.jobs) >= waiting:
            return engine.cluster
    raise SystemExit(f"the stream never had {waiting} workflows waiting")


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
    args = parser.parse_args()
    cluster = waiting_state(args.waiting, args.scheduler)
    waiting = sum(j.first_start is None for j in cluster.jobs)
    variants = {
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
        f"{out['workflows']} workflows ({waiting} waiting) on {out['executors']} executors, "
        f"{args.scheduler}; CPU per refresh (median of {args.repeat}):"
    )
    for name, v in out["variants"].items():
        print(
            f"  {name:10} {v['cpu_ms']:8.0f} ms  {v['replays']:>2} replays  "
            f"{v['events']:>7} events  {v['forecast']:>5} forecast"
        )


if __name__ == "__main__":
    main()
