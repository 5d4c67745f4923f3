"""What a run of each scheduler costs beside a rule's: the weights by which a comparison's
progress estimates its time left (`idlegate.policy.spec.RUN_COSTS`).

    python benchmarks/run_costs.py [--seeds 1,2,3] [--schedulers fifo,srpt,...]

On the demo's workload (tpch-like, 50 executors, 1 + 100 streamed jobs, load 0.85), in
this one process, one after the other: each run's CPU seconds (process time: what a busy
machine stretches less than wall time), the median over the seeds, and that over the
first scheduler's (fifo's by default). `RUN_COSTS` holds these ratios, rounded: a run of
`default` costs some 60 of fifo's, so a demo's progress that counts runs alike said
"2:02 left" at 24 of 45 with 7:47 to go (issue 80).
"""

from __future__ import annotations

import argparse
import statistics
import time

from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.evaluation.suites import (
    DEMO_EXECUTORS,
    DEMO_LOAD,
    DEMO_STREAMED_JOBS,
    DEMO_WORKLOAD,
)
from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.engine import simulate

SCHEDULERS = "fifo,srpt,analytic:srpt,learned:default,default,lookahead:srpt"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--schedulers", default=SCHEDULERS, help="comma-separated specs")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    specs = [SchedulerSpec.parse(s) for s in args.schedulers.split(",")]
    options = WorkloadOptions(
        num_executors=DEMO_EXECUTORS, load=DEMO_LOAD, extra={"num_stream": DEMO_STREAMED_JOBS}
    )
    workloads = {seed: build(DEMO_WORKLOAD, seed, options) for seed in seeds}
    medians = {}
    print(f"{'scheduler':<18} {'CPU s per run':>13} {'× first':>8}  (seeds {args.seeds})")
    for spec in specs:
        spent = []
        for seed in seeds:
            began = time.process_time()
            simulate(workloads[seed], make_scheduler(spec), seed)
            spent.append(time.process_time() - began)
        medians[spec.title] = statistics.median(spent)
        ratio = medians[spec.title] / medians[specs[0].title]
        cost = f"(RUN_COSTS: {spec.run_cost:g})"
        print(f"{spec.title:<18} {medians[spec.title]:>13.3f} {ratio:>8.1f}  {cost}")


if __name__ == "__main__":
    main()
