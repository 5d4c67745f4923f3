"""How much of a seed's best rule is luck: a rule against its twins.

    python benchmarks/twins.py -w alibaba --jobs-count 300 --seeds 10 --first-seed 1000 \\
        'srpt?cap=0.9' --twins 'srpt?cap=0.89,srpt?cap=0.91' --other 'fair?scale=0.5'

A twin is the rule with its parameter moved by a step no one could tell apart on a
window of workflows (a cap of 89 or 91 executors instead of 90). Each seed's stream is
simulated under the rule, its twins and `--other`, with the same arrivals and duration
seed for all (`idlegate compare`'s pairing), and the script prints per seed each mean
JCT relative to the rule, then three figures:

* **spread**: per seed, the largest |twin / rule - 1|; their median and maximum;
* **luck**: the best of the rule and its twins, per seed, against the rule, on the mean:
  what a "best fixed candidate of each seed" gains over the rule from luck alone, had
  the twins been candidates;
* **flips**: the seeds on which a twin and the rule disagree on which of them and
  `--other` is better: there, no evidence about the rule can tell which of the two wins.

On a heavy-tailed trace an executor stays on a stage while it has tasks left
(`idlegate.sim.cluster`), so one huge job started a minute earlier or later holds the
pool through a different burst of arrivals, and the stream's mean JCT moves by tens of
percent; docs/research/brain-results.md, "What is luck at 300 workflows", reads these figures
against issue 50's targets. Workload options as `idlegate compare`'s: ``-k``,
``--load``, ``--jobs-count``, ``--alibaba-dir``/``IDLEGATE_ALIBABA_DIR``, ``--tpch-dir``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, run_script, seed_range

sys.path.insert(0, str(Path(__file__).resolve().parent))
from streams import add_workload_flags, run_specs, workload_options


@dataclass(frozen=True)
class Luck:
    """The three figures of the module's docstring, from per-seed mean JCTs."""

    spread_median: float
    """Median over seeds of the largest |twin / rule - 1| (a fraction)."""
    spread_max: float
    """... and its maximum."""
    luck: float
    """Mean over seeds of min(rule, twins) / rule - 1 (≤ 0)."""
    flips: int
    """Seeds where a twin and the rule disagree on which of them and the other is better
    (0 without an other)."""


def luck_of(rule: np.ndarray, twins: np.ndarray, other: np.ndarray | None = None) -> Luck:
    """`rule` (seeds,), `twins` (twins, seeds), `other` (seeds,) → `Luck`."""
    rule = np.asarray(rule, dtype=float)
    twins = np.atleast_2d(np.asarray(twins, dtype=float))
    if twins.shape[1] != rule.shape[0] or (other is not None and len(other) != len(rule)):
        raise IdlegateError("the rule, its twins and the other need one mean JCT per seed each")
    spread = np.max(np.abs(twins / rule - 1.0), axis=0)
    best = np.minimum(rule, twins.min(axis=0))
    flips = 0
    if other is not None:
        rule_wins = rule < other
        flips = int(np.sum(np.any((twins < other) != rule_wins, axis=0)))
    return Luck(
        spread_median=float(np.median(spread)),
        spread_max=float(spread.max()),
        luck=float(np.mean(best / rule - 1.0)),
        flips=flips,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("rule", help="the rule, e.g. 'srpt?cap=0.9'")
    parser.add_argument("--twins", required=True, help="its twins, comma-separated")
    parser.add_argument("--other", default=None, help="the rule it races, e.g. 'fair?scale=0.5'")
    add_workload_flags(parser, jobs_count=300)
    add_seeds(parser, 10, 1000)
    run_script(parser, report, argv)


def report(args: argparse.Namespace) -> None:
    """The rule, its twins (and the rule it races) on `args`' streams, seed by seed, then
    the spread, the luck and the flips."""
    twins = [t.strip() for t in args.twins.split(",") if t.strip()]
    if not twins:
        raise IdlegateError("give at least one twin, e.g. --twins 'srpt?cap=0.89,srpt?cap=0.91'")
    seeds = list(seed_range(args))
    specs = [args.rule, *twins, *([args.other] if args.other else [])]
    runs = run_specs(args.workload, specs, args.seeds, args.first_seed, workload_options(args))
    jct = {s: np.array([run.avg_jct for run in r.runs]) for s, r in runs.items()}
    rule = jct[args.rule]
    print(f"{'seed':>6s} {args.rule + ' (s)':>20s} " + " ".join(f"{s:>18s}" for s in specs[1:]))
    for i, seed in enumerate(seeds):
        cells = " ".join(f"{100 * (jct[s][i] / rule[i] - 1):+17.1f}%" for s in specs[1:])
        print(f"{seed:6d} {rule[i]:20.0f} {cells}")
    other = jct[args.other] if args.other else None
    luck = luck_of(rule, np.vstack([jct[t] for t in twins]), other)
    print(
        f"spread: a twin is {100 * luck.spread_median:.1f} % from the rule on the median seed, "
        f"{100 * luck.spread_max:.1f} % at most"
    )
    print(f"luck: the best of the rule and its twins is {100 * luck.luck:+.1f} % against the rule")
    if args.other:
        print(
            f"flips: on {luck.flips} of {len(seeds)} seeds a twin and the rule disagree on "
            f"whether {args.other} is better"
        )


if __name__ == "__main__":
    main()
