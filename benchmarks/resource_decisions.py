"""A decision's latency on a resource pool (issue 52: a decision within 1 ms at p99).

    .venv/bin/python benchmarks/resource_decisions.py [--jobs 300] [--seed 1000] [--schedulers A,B]

Runs `k8s-batch` with requests (`requests=true`, interarrival 240 s) on the cluster of
docs/resources.md (3 nodes of cpu=8, memory=32Gi, nvidia.com/gpu=1; 330 pods) under each
scheduler
and times every `decide` call in CPU microseconds of the deciding thread
(`time.thread_time`; wall time on shared cores counts the other processes' turns too):
printed per scheduler, the decisions and their p50, p99 and max. The portfolio (`default`) decides
with its rounds in a worker (``replayer=worker``, as the operator runs it), so a
decision is its following of the candidate, not a round's replay.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.pool import identical_nodes
from idlegate.sim.protocol import Action, ClusterView, Scheduler
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import build_workload

NODE = "cpu=8,memory=32Gi,nvidia.com/gpu=1"
NODES = 3
SCHEDULERS = ("srpt", "sjf-cp", "fair", "fifo", "analytic", "default?replayer=worker")


class Timed:
    """`inner`, with the CPU time of each of its decisions."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner, self.name, self.seconds = inner, inner.name, []

    def reset(self, rng: object) -> None:
        self.inner.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        start = time.thread_time()
        action = self.inner.decide(view)
        self.seconds.append(time.thread_time() - start)
        return action


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--jobs", type=int, default=300, help="workflows (default 300)")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument(
        "--schedulers", default=",".join(SCHEDULERS), help="comma-separated specs to time"
    )
    args = parser.parse_args()
    workload = build_workload(
        "k8s-batch",
        args.seed,
        requests=True,
        interarrival=240,
        num_executors=330,
        num_jobs=args.jobs,
    )
    node = ResourceVector.parse(NODE)
    nodes = identical_nodes(node, NODES, workload.num_executors)
    workload = replace(workload, resources=node * NODES, nodes=nodes)
    print(f"k8s-batch, {args.jobs} workflows, seed {args.seed}, 330 pods, {NODES} nodes of {NODE}")
    print(f"{'scheduler':26s} {'decisions':>9s} {'p50 us':>8s} {'p99 us':>8s} {'max us':>8s}")
    for spec in args.schedulers.split(","):
        timed = Timed(make_scheduler(spec))
        simulate(workload, timed, seed=args.seed)
        us = np.array(timed.seconds) * 1e6
        p50, p99 = np.percentile(us, [50, 99])
        print(f"{spec:26s} {len(us):9d} {p50:8.0f} {p99:8.0f} {us.max():8.0f}")


if __name__ == "__main__":
    main()
