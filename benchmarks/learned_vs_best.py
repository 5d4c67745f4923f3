"""Decima's question on a comparison: is a learned policy >= 5 % better than the best heuristic?

Reads the ``compare.json`` that ``idlegate compare --out DIR`` writes and, for each
learned row (every row not named by --heuristics), prints its average JCT per seed next
to the heuristics' and two paired changes (mean over seeds of x_s / b_s − 1, with a 95 %
interval; −5 % means 5 % lower):

* against the best heuristic on the mean: the one heuristic with the lowest average JCT
  over all seeds, as a user picking one rule for the trace would;
* against the best heuristic of each seed: on every seed the lowest of the heuristics
  (a bar no single rule reaches, so the stricter one).

    idlegate compare -w alibaba ... --out out/learned-alibaba
    python benchmarks/learned_vs_best.py out/learned-alibaba/compare.json \
        --heuristics fifo,sjf-cp,srpt,fair
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from idlegate.flags import description
from idlegate.sim.metrics import Estimate, paired_relative_change


def per_seed(path: Path) -> tuple[list[int], dict[str, np.ndarray]]:
    """The seeds and, per row, its average JCT on each seed."""
    data = json.loads(path.read_text())
    rows = data["schedulers"]
    seeds = [r["seed"] for r in next(iter(rows.values()))["runs"]]
    return seeds, {
        name: np.array([r["avg_jct"] for r in row["runs"]]) for name, row in rows.items()
    }


def change(est: Estimate) -> str:
    return f"{100 * est.mean:+.1f} % ± {50 * (est.high - est.low):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("compare_json", type=Path)
    parser.add_argument("--heuristics", default="fifo,sjf-cp,srpt,fair")
    args = parser.parse_args()
    seeds, jct = per_seed(args.compare_json)
    heuristics = [h for h in args.heuristics.split(",") if h]
    missing = [h for h in heuristics if h not in jct]
    if missing:
        print(f"Error: {args.compare_json} has no row {missing[0]!r}", file=sys.stderr)
        return 1
    learned = [n for n in jct if n not in heuristics]
    print("average JCT (s) per seed")
    print(f"{'row':>28} " + " ".join(f"{s:>9}" for s in seeds) + f" {'mean':>9}")
    for name, values in jct.items():
        cells = " ".join(f"{v:>9,.0f}" for v in values)
        print(f"{name:>28} {cells} {values.mean():>9,.0f}")
    best_mean = min(heuristics, key=lambda h: jct[h].mean())
    best_seed = np.min([jct[h] for h in heuristics], axis=0)
    winners = [heuristics[i] for i in np.argmin([jct[h] for h in heuristics], axis=0)]
    print(f"\nbest heuristic on the mean: {best_mean}; of each seed: {', '.join(winners)}")
    for name in learned:
        vs_mean = paired_relative_change(jct[name], jct[best_mean])
        vs_seed = paired_relative_change(jct[name], best_seed)
        print(
            f"{name}: {change(vs_mean)} vs {best_mean} (paired), {change(vs_seed)} vs the best "
            f"heuristic of each seed; >= 5 % better: {'yes' if vs_mean.mean <= -0.05 else 'no'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
