"""Does the portfolio's arrival watch see a change of workload where there is none?

    python benchmarks/brain_watch.py --tpch-dir ../shared/data/tpch [--seeds 10]
        [--first-seed 1000] [--jobs-count 1000]

Feeds the workflows of every workload of `benchmarks/brain.py` (the evaluation suite,
`argo-shapes` and `shift`) in arrival order to `policy.portfolio.arrivals.ArrivalWatch`,
as the scheduler does, and prints per workload the changes it saw on each seed: none is
right but on `shift`, where one at the switch is, and the index of the workflow that
completed it after the switch's first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from idlegate.flags import add_seeds, description
from idlegate.policy.portfolio.arrivals import ArrivalWatch
from idlegate.policy.portfolio.prior import workflow_features

sys.path.insert(0, str(Path(__file__).resolve().parent))
import brain_runs as brain


def main(argv: list[str] | None = None) -> dict[str, list[list[int]]]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(parser, 10, 1000)
    parser.add_argument("--jobs-count", type=int, default=1000)
    parser.add_argument("--tpch-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    args.workloads = None
    cases, skipped = brain.cases_of(args)
    for line in skipped:
        print(f"skipped {line}")
    out = {}
    print("| workload | changes seen per seed | where (workflows after the switch's first) |")
    print("|---|---|---|")
    for case in cases:
        if case.family == "demo":
            continue
        seen = []
        for seed in case.seeds:
            jobs = brain._built(case.workload, seed, case.options.model_dump_json()).jobs
            watch: ArrivalWatch[int] = ArrivalWatch()
            first = next((i for i, j in enumerate(jobs) if j.name.startswith("2:")), 0)
            seen.append(
                [i - first for i, j in enumerate(jobs) if watch.see(i, workflow_features(j.dag))]
            )
        out[case.key] = seen
        where = ", ".join(str(s) for s in seen) if case.family == "shift" else ""
        print(f"| {case.key} | {', '.join(str(len(s)) for s in seen)} | {where} |", flush=True)
    return out


if __name__ == "__main__":
    main()
