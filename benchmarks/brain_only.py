"""The brain alone on `benchmarks/brain.py`'s streams: does a change of the brain change a run?

    python benchmarks/brain_only.py [--seeds 3] [--first-seed 2000] [-j 1]
        [--workloads KEY,...] [--brain SPEC] [--jobs-count N] [--tpch-dir DIR]
        --json PATH [--against BEFORE.json]

Runs only the brain's row of `benchmarks/brain.py` (the same cases, seeds and streams, so
its per-seed means are that script's brain row, run for run) and writes, per workload and
seed, the brain's mean JCT and what its rounds followed. A change meant to leave the
brain's behaviour alone (a refactor) is checked by running this before and after it: with
``--against BEFORE.json`` it prints every run whose mean JCT or followed candidates
differ, and exits 1 if any does. A change meant to move some runs (a new rule) says
which ones, seed by seed, and their change paired per seed with the rounds' CPU
(`paired`), without rerunning the fixed candidates. It also prints, per
workload, the CPU seconds of the rounds that replayed a window (thread time,
`Choice.cpu_seconds`): their median, their maximum and how many took more than 2 s.

The long held-out streams (`--jobs-count 500 --first-seed 3000`): longer than a round's
window (200 finished workflows) from seeds no tuning or figure used before, so a rule
for rounds on full windows (`backoff_full`) is judged where it acts; the streams of 100
workflows never fill a window (docs/research/brain-cost.md, "What a round may cost").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (its siblings, as `brain` does)
from brain import WORKERS
from brain_runs import LONG_JOBS, Task, cases_of, run_stage

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, one_line
from idlegate.parallel import LocalPool
from idlegate.policy import make_scheduler

ROUND_TARGET = 2.0
"""A round's CPU seconds at most (issue 30's and 50's target)."""


def brain_runs(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Per workload key and seed (as text): the brain's mean JCT and rounds' candidates."""
    from brain import Results  # (the same bookkeeping as the full evaluation)

    make_scheduler(args.brain)
    cases, skipped = cases_of(args)
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    tasks = [Task(c, "brain", args.brain, s) for c in cases for s in c.seeds]
    results = Results()
    with LocalPool(args.jobs, preload=["idlegate.policy"]) as pool:
        run_stage(pool, tasks, results)
    out: dict[str, dict[str, Any]] = {}
    for key, rows in results.runs.items():
        for seed, run in sorted(rows["brain"].items()):
            out.setdefault(key, {})[str(seed)] = {
                "mean": float(np.mean(run.jct)),
                "followed": [c["candidate"] for c in run.choices],
                "why": [c["why"] for c in run.choices],
                "round_cpu": [c["cpu_seconds"] for c in run.choices if c["workflows"]],
            }
    return out


def round_cost(key: str, cpu: list[float]) -> str:
    """A line on the CPU seconds of `key`'s rounds (those that replayed a window)."""
    if not cpu:
        return f"{key}: no round replayed"
    over = sum(1 for x in cpu if x > ROUND_TARGET)
    return (
        f"{key}: {len(cpu)} rounds, CPU median {np.median(cpu):.2f} s, "
        f"max {max(cpu):.2f} s, {over} above {ROUND_TARGET:g} s"
    )


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """A line per run of `after` whose mean or followed candidates differ from `before`'s."""
    lines = []
    for key, seeds in after.items():
        for seed, run in seeds.items():
            old = before.get(key, {}).get(seed)
            if old is None:
                lines.append(f"{key} seed {seed}: not in the run before")
            elif old["mean"] != run["mean"] or old["followed"] != run["followed"]:
                lines.append(
                    f"{key} seed {seed}: {old['mean']:.4f} s -> {run['mean']:.4f} s "
                    f"(followed {old['followed']} -> {run['followed']})"
                )
    return lines


def paired(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Per workload and over all, `after`'s mean JCT against `before`'s, paired per seed
    (the mean of the per-seed changes, ± their standard deviation), and the rounds' CPU
    seconds summed over the seeds: how a rule meant to move runs moved them."""
    lines, changes, cpu = [], [], [0.0, 0.0]
    worst = (-np.inf, "")
    for key, seeds in after.items():
        pairs = [(before[key][s], run) for s, run in seeds.items() if s in before.get(key, {})]
        if not pairs:
            continue
        change = [100.0 * (new["mean"] / old["mean"] - 1.0) for old, new in pairs]
        seeds_paired = [s for s in seeds if s in before.get(key, {})]
        worst = max(
            worst, *((c, f"{key} seed {s}") for c, s in zip(change, seeds_paired, strict=True))
        )
        spent = [sum(sum(run["round_cpu"]) for run in side) for side in zip(*pairs, strict=True)]
        changes += change
        cpu = [cpu[0] + spent[0], cpu[1] + spent[1]]
        lines.append(
            f"{key}: mean JCT {np.mean(change):+.2f} % ± {np.std(change):.2f} over "
            f"{len(change)} seeds (per seed {', '.join(f'{c:+.2f}' for c in change)}); "
            f"rounds' CPU {spent[0]:.1f} s -> {spent[1]:.1f} s"
        )
    if changes:
        lines.append(
            f"all: mean JCT {np.mean(changes):+.2f} % ± {np.std(changes):.2f} over "
            f"{len(changes)} runs, the worst {worst[0]:+.2f} % ({worst[1]}); rounds' CPU "
            f"{cpu[0]:.1f} s -> {cpu[1]:.1f} s"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(parser, 3, 2000)
    parser.add_argument("-j", "--jobs", type=int, default=WORKERS)
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=None)
    parser.add_argument("--brain", default="portfolio")
    parser.add_argument("--jobs-count", type=int, default=LONG_JOBS)
    parser.add_argument("--tpch-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--against", type=Path, default=None, help="a run before, to compare")
    args = parser.parse_args(argv)
    try:
        runs = brain_runs(args)
    except IdlegateError as exc:
        parser.exit(1, f"Error: {one_line(exc)}\n")
    args.json.write_text(json.dumps(runs, indent=1))
    total = sum(len(s) for s in runs.values())
    print(f"{total} runs of {args.brain} written to {args.json}")
    for key, seeds in runs.items():
        print(round_cost(key, [x for run in seeds.values() for x in run["round_cpu"]]))
    if args.against is None:
        return 0
    before = json.loads(args.against.read_text())
    lines = differences(before, runs)
    for line in lines:
        print(line)
    if lines:
        print("\n".join(paired(before, runs)))
    print(f"{len(lines)} of {total} runs differ from {args.against}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
