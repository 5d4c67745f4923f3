"""Issue 71's table: `default` against the best single rule and `srpt`, from `compare --json`.

    python benchmarks/brain_shared.py RUN.json [LABEL=BRAIN.json ...]

RUN.json is an `idlegate compare --json` run with `default` and the fixed rules (the same
seeds); each LABEL=BRAIN.json is another run of `default` alone on those seeds (e.g. the
code before a change), a row of its own. Per row: the mean JCT over the seeds, against
the best single rule (the fixed scheduler of the lowest mean over these seeds, which
flatters it) on the mean of the per-seed ratios and on the worst seed, and against
`srpt` on the mean. The targets (issue 71): `default` within +2 % of the best single
rule on the mean, no seed beyond +10 %, never behind `srpt` on the mean.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

BRAIN = "default"
MEAN_TARGET, SEED_TARGET = 0.02, 0.10


def per_seed(path: Path) -> dict[str, np.ndarray]:
    """Scheduler → its mean JCT per seed (seed order) in a `compare --json` file."""
    data = json.loads(path.read_text())
    out = {}
    for name, row in data["schedulers"].items():
        runs = sorted(row["runs"], key=lambda r: r["seed"])
        out[name] = np.array([r["avg_jct"] for r in runs])
    return out


def table(runs: dict[str, np.ndarray], brains: dict[str, np.ndarray]) -> list[str]:
    fixed = {k: v for k, v in runs.items() if k != BRAIN}
    best = min(fixed, key=lambda k: float(np.mean(fixed[k])))
    rows = [
        f"best single rule: {best} ({np.mean(fixed[best]):,.1f} s)",
        "| row | mean JCT (s) | vs best: mean of seeds | worst seed | vs srpt (mean) | target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, v in {**brains, **fixed}.items():
        ratio = v / fixed[best] - 1
        srpt = float(np.mean(v) / np.mean(fixed["srpt"]) - 1) if "srpt" in fixed else None
        met = ""
        if label in brains:
            ok = ratio.mean() <= MEAN_TARGET and ratio.max() <= SEED_TARGET
            ok = ok and (srpt is None or srpt <= 0)
            met = "met" if ok else "missed"
        vs = "—" if srpt is None else f"{100 * srpt:+.1f} %"
        rows.append(
            f"| {label} | {np.mean(v):,.1f} | {100 * ratio.mean():+.1f} % | "
            f"{100 * ratio.max():+.1f} % | {vs} | {met} |"
        )
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    runs = per_seed(Path(argv[0]))
    brains = {BRAIN: runs[BRAIN]} if BRAIN in runs else {}
    for arg in argv[1:]:
        label, _, path = arg.partition("=")
        brains[label] = per_seed(Path(path))[BRAIN]
    print("\n".join(table(runs, brains)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
