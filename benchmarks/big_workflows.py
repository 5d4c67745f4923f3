"""Big workflows: a decision's cost on a workflow of 500, 2,000 and 5,000 stages, and its size.

    .venv/bin/python benchmarks/big_workflows.py [--stages 500,2000,5000] [--seed 0]
        [--schedulers default?replayer=worker,fifo,srpt,sjf-cp,fair,learned:default]
        [--clock cpu|wall]
    .venv/bin/python benchmarks/big_workflows.py --manifest STAGES > big.json

The workflow (`layered`): a layered random DAG, layers of 1 to 12 stages, each stage
depending on 1 to 3 stages of the layer before, 1 to 4 tasks of log-normal durations
(median 20 s). It arrives at t = 0 with 20 TPC-H-like workflows (`tpch-like`, seed
`--seed`) on 50 executors, and each scheduler runs the whole simulation. Printed per
stage count and scheduler: the decisions made, a `decide` call's median, p99 and maximum
in milliseconds (this thread's CPU time with ``--clock cpu``, the default: on a shared
machine the wall clock measures the other processes too), and the simulation's wall
time. ``default?replayer=worker`` is the default policy as the operator runs it: its
replay rounds in a worker, so a decision is the followed candidate's plus the
portfolio's bookkeeping; the inline rounds of ``default`` (the simulator's) are the
worker's cost, not a decision's.

Then, per stage count, the size of the workflow as a DagWorkflow once its status is
written (`idlegate.api.status.object_bytes`) against what Kubernetes stores
(`MAX_OBJECT_BYTES`), and the largest stage count of this shape that fits. With
``--manifest STAGES`` it only prints that workflow as a DagWorkflow (for ``idlegate lint``).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from idlegate.api.status import MAX_OBJECT_BYTES, object_bytes
from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.protocol import Action, ClusterView, Scheduler
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload

SCHEDULERS = "default?replayer=worker,fifo,srpt,sjf-cp,fair,learned:default"
EXECUTORS = 50


def layered(stages: int, seed: int = 0) -> dict[str, Any]:
    """A DagWorkflow manifest of `stages` stages in layers (see the module's docstring)."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    previous: list[str] = []
    while len(out) < stages:
        layer = []
        for _ in range(min(rng.randint(1, 12), stages - len(out))):
            stage: dict[str, Any] = {
                "name": f"stage-{len(out)}",
                "tasks": rng.randint(1, 4),
                "taskDurationSeconds": round(rng.lognormvariate(3, 1), 1),
            }
            if previous:
                stage["dependsOn"] = rng.sample(previous, min(len(previous), rng.randint(1, 3)))
            out.append(stage)
            layer.append(stage["name"])
        previous = layer
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": f"layered-{stages}", "namespace": "default"},
        "spec": {"stages": out},
    }


def workload(stages: int, seed: int = 0) -> Workload:
    """The layered workflow at t = 0 among 20 TPC-H-like ones, on `EXECUTORS` executors."""
    big = Dag.from_spec(parse_workflow(layered(stages, seed)["spec"]))
    others = build_workload("tpch-like", seed, num_jobs=20, num_executors=EXECUTORS).jobs
    jobs = sorted([JobArrival(0.0, "layered", big), *others], key=lambda j: j.time)
    return Workload(f"layered-{stages}", tuple(jobs), EXECUTORS)


class Timed:
    """`inner`, its `decide` calls timed (nanoseconds of `clock`)."""

    def __init__(self, inner: Scheduler, clock: Callable[[], int]) -> None:
        self.inner = inner
        self.clock = clock
        self.name = getattr(inner, "name", "timed")
        self.times: list[int] = []

    def reset(self, rng: Any) -> None:
        self.inner.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        t0 = self.clock()
        action = self.inner.decide(view)
        self.times.append(self.clock() - t0)
        return action


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--stages", default="500,2000,5000")
    parser.add_argument("--schedulers", default=SCHEDULERS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument(
        "--manifest",
        type=int,
        metavar="STAGES",
        help="only print the layered workflow of STAGES stages as a DagWorkflow (JSON)",
    )
    args = parser.parse_args(argv)
    if args.manifest is not None:
        print(json.dumps(layered(args.manifest, args.seed), indent=1))
        return
    clock = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    counts = [int(s) for s in args.stages.split(",")]
    print(f"decide() in ms ({args.clock} time); simulation in wall seconds")
    print(
        f"{'stages':>6}  {'scheduler':<26} {'decisions':>9} {'median':>8} {'p99':>8} "
        f"{'max':>8} {'simulate':>9}"
    )
    for n in counts:
        work = workload(n, args.seed)
        for spec in args.schedulers.split(","):
            timed = Timed(make_scheduler(spec), clock)
            t0 = time.perf_counter()
            simulate(work, timed, seed=args.seed)
            wall = time.perf_counter() - t0
            ms = np.asarray(timed.times) / 1e6
            print(
                f"{n:>6}  {spec:<26} {len(ms):>9} {np.median(ms):>8.3f} "
                f"{np.percentile(ms, 99):>8.3f} {ms.max():>8.1f} {wall:>9.1f}"
            )
    print(f"\nas a DagWorkflow with its status (limit {MAX_OBJECT_BYTES:,} bytes)")
    for n in counts:
        manifest = layered(n, args.seed)
        size = object_bytes(manifest, parse_workflow(manifest["spec"]))
        fits = "fits" if size <= MAX_OBJECT_BYTES else "refused"
        text = len(json.dumps(manifest, separators=(",", ":")))
        print(
            f"{n:>6} stages: {size:>10,} bytes, {size / n:.0f} a stage, {fits} "
            f"(the manifest: {text:,} bytes of JSON)"
        )
    print(
        f"largest that fits: {largest(lambda n: layered(n, args.seed)):,} stages; of the "
        f"smallest stages (1 task of 1 s, no dependency): {largest(smallest):,}"
    )


def smallest(stages: int) -> dict[str, Any]:
    """A DagWorkflow of `stages` stages as small as a stage can be (for the CRD's bound)."""
    spec = [{"name": f"{i:x}", "tasks": 1, "taskDurationSeconds": 1} for i in range(stages)]
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": "w"},
        "spec": {"stages": spec},
    }


def largest(manifest: Callable[[int], dict[str, Any]]) -> int:
    """The most stages `manifest(n)` may have and fit `MAX_OBJECT_BYTES` (by bisection)."""

    def fits(n: int) -> bool:
        m = manifest(n)
        return object_bytes(m, parse_workflow(m["spec"])) <= MAX_OBJECT_BYTES

    low, high = 1, 1024
    while fits(high):
        low, high = high, high * 2
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


if __name__ == "__main__":
    main()
