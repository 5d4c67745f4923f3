"""What a switch costs: follow one rule, then another from a given time on.

    python benchmarks/switch_at.py -w alibaba --jobs-count 300 --seed 1000 \\
        'srpt?cap=0.9' '117948:fair?scale=0.5'

Simulates the stream once under each rule of the plan alone and once under the plan
(`Segments`: the first rule from 0, each ``T:SPEC`` from T seconds on), the same arrivals
and duration seed for all, and prints each mean JCT. A self-tuning scheduler's round
asks which rule would have done best had it been followed all along; this answers what
switching at T does, from the pool as that rule left it (docs/research/brain-results.md, "The
present check"). Workload options as `idlegate compare`'s: ``-k``, ``--load``,
``--jobs-count``, ``--alibaba-dir``/``IDLEGATE_ALIBABA_DIR``, ``--tpch-dir``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import build
from idlegate.flags import description, run_script
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import Action, ClusterView, Scheduler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from streams import add_workload_flags, workload_options


class Segments:
    """Follows `plan`'s schedulers in turn: each from its start time on (the first from 0)."""

    def __init__(self, plan: Sequence[tuple[float, Scheduler]]) -> None:
        if not plan or plan[0][0] != 0.0:
            raise IdlegateError("a plan starts with a rule followed from time 0")
        self.plan = sorted(plan, key=lambda p: p[0])
        self.name = "segments"

    def reset(self, rng: Any) -> None:
        for _, scheduler in self.plan:
            scheduler.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        current = self.plan[0][1]
        for start, scheduler in self.plan:
            if view.now >= start:
                current = scheduler
        return current.decide(view)


def parse_plan(items: Sequence[str]) -> list[tuple[float, str]]:
    """``SPEC`` then ``T:SPEC`` … → [(0, SPEC), (T, SPEC), …]."""
    plan = [(0.0, items[0])]
    for item in items[1:]:
        at, _, spec = item.partition(":")
        try:
            plan.append((float(at), spec))
        except ValueError:
            raise IdlegateError(
                f"{item!r}: write each rule after the first as T:SPEC, e.g. 117948:fair?scale=0.5"
            ) from None
    return plan


def mean_jct(workload: Any, scheduler: Any, seed: int) -> float:
    result = simulate(workload, scheduler, seed=seed)
    return float(np.mean([r.jct for r in result.records]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("plan", nargs="+", help="SPEC, then T:SPEC for each switch")
    add_workload_flags(parser, jobs_count=100)
    parser.add_argument("--seed", type=int, default=1000)
    run_script(parser, report, argv)


def report(args: argparse.Namespace) -> None:
    """Each rule of the plan alone, then the plan, on `args`' workload and seed."""
    plan = parse_plan(args.plan)
    workload = build(args.workload, args.seed, workload_options(args))
    for spec in dict.fromkeys(s for _, s in plan):
        print(f"{spec:40s} alone: {mean_jct(workload, make_scheduler(spec), args.seed):10.1f} s")
    plan_text = " then ".join(f"{s} from {t:.0f} s" for t, s in plan)
    segments = Segments([(t, make_scheduler(s)) for t, s in plan])
    print(f"{plan_text}: {mean_jct(workload, segments, args.seed):.1f} s")


if __name__ == "__main__":
    main()
