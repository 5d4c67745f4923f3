"""The conditional arrival model against Poisson: held-out log-likelihood per arrival.

    python benchmarks/futures.py [--seeds 5] [--first-seed 1000] [--jobs 100] [-k 2]

For each workload and seed, the arrivals are replayed one by one into `Selector` (as the
planner does online): each interval between arrivals is scored by both models fitted
before it (prequential, out of sample). The table gives the conditional model's gain
over Poisson in nats per arrival over all scored arrivals (mean ± sd over seeds), and
the share of arrivals after which ``futures=auto`` would use the conditional model.
"""

from __future__ import annotations

import argparse

import numpy as np

from idlegate.flags import add_seeds, description, seed_range
from idlegate.policy.arrival_model import Arrival, ConditionalModel, stem
from idlegate.policy.futures import Selector
from idlegate.sim.workloads import build_workload

WORKLOADS = [
    ("follow", {}),
    ("push", {}),
    ("recurring", {}),
    ("follow", {"uncorrelated": 1.0}),
    ("push", {"uncorrelated": 1.0}),
]


def replay(name: str, options: dict, seed: int, jobs: int, k: int) -> tuple[float, float]:
    """(gain in nats per scored arrival, share of arrivals where auto picks conditional)."""
    w = build_workload(name, seed, num_executors=k, load=0.7, num_jobs=jobs, **options)
    arrivals = [Arrival(a.time, a.dag.total_work, stem(a.name), a) for a in w.jobs]
    selector = Selector(ConditionalModel())
    wins = 0
    for i in range(2, len(arrivals) + 1):
        selector.update(arrivals[:i], arrivals[i - 1].time)
        wins += selector.conditional_wins()
    scored = sum(n for _, _, n in selector.scores)
    gain = sum(c - p for c, p, _ in selector.scores)
    return gain / max(scored, 1), wins / len(arrivals)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(parser, 5, 1000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("-k", "--executors", type=int, default=2)
    args = parser.parse_args(argv)
    print("| workload | gain (nats/arrival) | auto uses conditional |")
    print("|---|---:|---:|")
    for name, options in WORKLOADS:
        seeds = seed_range(args)
        runs = np.array([replay(name, options, s, args.jobs, args.executors) for s in seeds])
        label = name + "".join(f" {k}={v}" for k, v in options.items())
        print(
            f"| `{label}` | {runs[:, 0].mean():+.2f} ± {runs[:, 0].std():.2f} | "
            f"{runs[:, 1].mean():.0%} |"
        )


if __name__ == "__main__":
    main()
