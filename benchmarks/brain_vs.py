"""The brain's runs against others, paired run for run, from `benchmarks/brain_only.py`'s
JSON files (no run again):

    python benchmarks/brain_vs.py NEW.json... [--against OLD.json...]
        [--better SRPT.json... --better SJF-CP.json...]

With ``--against`` the brain's mean JCT against a run of the brain before (a rule meant
to move runs: which ones, the mean paired change ± its standard deviation, the worst
run, the rounds' CPU on each side); with ``--better`` (once per rule) against the
better of the rules' runs on each run (`srpt`'s and `sjf-cp`'s: "the better of srpt and sjf-cp", the yardstick
of docs/research/brain-cost.md). Several files of one side (the loops there write one per
group of workloads) are read as one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (its siblings, as `brain` does)
from brain_only import differences, paired

from idlegate.flags import description


def load(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """The runs of the JSON files `paths`, merged (workload key → seed)."""
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        for key, seeds in json.loads(path.read_text()).items():
            out.setdefault(key, {}).update(seeds)
    return out


def better_of(sides: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per workload and seed that every side ran, the run of the lowest mean JCT."""
    out: dict[str, dict[str, Any]] = {}
    for key, seeds in sides[0].items():
        for seed in seeds:
            runs = [side[key][seed] for side in sides if seed in side.get(key, {})]
            if len(runs) == len(sides):
                out.setdefault(key, {})[seed] = min(runs, key=lambda r: r["mean"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("runs", type=Path, nargs="+", help="the brain's JSON files")
    parser.add_argument("--against", type=Path, nargs="+", default=None, help="the brain before")
    parser.add_argument(
        "--better", type=Path, nargs="+", action="append", default=None, help="a rule's files"
    )
    args = parser.parse_args(argv)
    runs = load(args.runs)
    if args.against is not None:
        before = load(args.against)
        moved = differences(before, runs)
        print(f"against the brain before: {len(moved)} runs moved")
        print("\n".join(paired(before, runs)))
    if args.better is not None:
        best = better_of([load(paths) for paths in args.better])
        rules = " and ".join(str(paths[0]) for paths in args.better)
        print(f"against the better of {rules} (and their other files) on each run:")
        print(paired(best, runs)[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
