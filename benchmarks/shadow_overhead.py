"""What shadow mode costs the operator's decisions: rounds timed with and without a shadow.

The operator's Decider runs scheduling rounds on a cluster of N queued tpch-like
workflows and a pool of K executors: each round follows one task's end, until every
workflow is done. The same run is timed three ways, side by side and interleaved per
repetition: no shadow, a ``fifo`` shadow, and the given ``--shadow`` spec. With a shadow
each round also takes a copy of the state (on the loop) and is replayed in the shadow's
thread, which shares the interpreter's lock with the loop: both costs are in the times.

    python -m benchmarks.shadow_overhead --workflows 200 --pool 32 --shadow learned:default

prints the mean wall time of a round for each and the ratios to no shadow.
"""

from __future__ import annotations

import argparse
import time
from statistics import mean

from idlegate.flags import description
from idlegate.operator.core.decider import Decider
from idlegate.operator.decisions import build_scheduler
from idlegate.operator.features.shadow import Shadow
from idlegate.operator.metrics import Metrics
from idlegate.sim.cluster import Cluster
from idlegate.sim.workloads import build_workload


def run(workflows: int, pool: int, active: str, shadow: str | None) -> list[float]:
    """Wall seconds of each round of one run (every workflow queued at time 0)."""
    jobs = build_workload("tpch-like", 0, num_executors=pool, init=workflows, num_stream=0)
    cluster = Cluster(pool)
    for arrival in jobs.jobs:
        cluster.add_job(arrival.dag, 0.0)
    metrics = Metrics(pool, active)
    decider = Decider(build_scheduler(active), metrics)
    watcher = None
    if shadow is not None:
        watcher = Shadow(build_scheduler(shadow), metrics, backlog=16)
        decider.shadow = watcher
    times: list[float] = []
    now = 0.0
    while cluster.jobs:
        start = time.perf_counter()
        decider.decide(cluster, now)
        times.append(time.perf_counter() - start)
        running = cluster.running_tasks()
        if not running:
            break
        executor, stage, began = min(running, key=lambda r: (r[2] + r[1].duration, r[0]))
        now = max(now, began + stage.duration)
        cluster.task_finished(executor, now)
    if watcher is not None:
        watcher.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--pool", type=int, default=32)
    parser.add_argument("--active", default="fifo")
    parser.add_argument("--shadow", default="learned:default")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cases = {"no shadow": None, "shadow fifo": "fifo", f"shadow {args.shadow}": args.shadow}
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved: the machine's load falls on every case
        for name, spec in cases.items():
            rounds[name] += run(args.workflows, args.pool, args.active, spec)
    base = mean(rounds["no shadow"])
    print(f"{args.workflows} workflows, pool {args.pool}, active {args.active}")
    for name, times in rounds.items():
        print(f"{name:>32}: {1000 * mean(times):7.3f} ms per round  x{mean(times) / base:5.2f}")


if __name__ == "__main__":
    main()
