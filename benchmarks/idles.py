"""How often and how long schedulers idle: idle slots per run and their lengths.

    python benchmarks/idles.py --workload follow -k 2 --seeds 5 \
        analytic:sjf "lookahead?mode=decision&futures=oracle:analytic:sjf"

Every scheduler runs the same held-out arrival sequences (seeds from --first-seed, load
0.7 unless --load says otherwise, the workload's default job count). A decision with
an idle delay counts once, whoever made it (a planner's BASE included).
"""

from __future__ import annotations

import argparse

import numpy as np

from idlegate.flags import add_seeds, description, seed_range
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import Action, ClusterView, Decision
from idlegate.sim.workloads import build_workload


def idles_of(spec: str, args: argparse.Namespace) -> tuple[list[int], list[float], int, float]:
    """(idle slots per seed, every slot's length, decisions, mean JCT over the seeds)."""
    counts, lengths, decisions, jcts = [], [], 0, []
    for seed in seed_range(args):
        w = build_workload(args.workload, seed, num_executors=args.executors, load=args.load)
        scheduler = make_scheduler(spec)
        inner = scheduler.decide
        delays: list[float] = []

        def decide(view: ClusterView, inner=inner, delays=delays) -> Action:
            action = inner(view)
            delays.append(action.idle_delay if isinstance(action, Decision) else 0.0)
            return action

        scheduler.decide = decide  # type: ignore[method-assign]
        result = simulate(w, scheduler, seed)
        slots = [d for d in delays if d > 0]
        counts.append(len(slots))
        lengths += slots
        decisions += len(delays)
        jcts.append(float(np.mean([r.jct for r in result.records])))
    return counts, lengths, decisions, float(np.mean(jcts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("schedulers", nargs="+")
    parser.add_argument("--workload", default="follow")
    parser.add_argument("-k", "--executors", type=int, default=2)
    parser.add_argument("--load", type=float, default=0.7)
    add_seeds(parser, 5, 1000)
    args = parser.parse_args(argv)
    print("| scheduler | mean JCT | idle slots per run | of decisions | mean / median length |")
    print("|---|---:|---:|---:|---:|")
    for spec in args.schedulers:
        counts, lengths, decisions, jct = idles_of(spec, args)
        # a scheduler that never idles has no slot length: "—", as the docs' tables
        length = f"{np.mean(lengths):.1f} / {np.median(lengths):.1f} s" if lengths else "—"
        print(
            f"| `{spec}` | {jct:.2f} | {np.mean(counts):.1f} | "
            f"{sum(counts) / max(decisions, 1):.1%} | {length} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
