"""Each row against the best fixed candidate *of each seed* (issue 50's measure).

    python benchmarks/brain_per_seed.py RUN.json [LABEL=BRAIN_ONLY.json ...]

`RUN.json` is `benchmarks/brain.py --json` (every fixed candidate and the brain on the
same streams); each ``LABEL=PATH`` adds a brain run of `benchmarks/brain_only.py --json`
on the same workload and seeds (another version or options of the brain). Printed per
workload: the best fixed candidate of each seed, then per row its paired mean and worst
ratio to that seed's best (minus 1), its mean ratio to plain srpt's, and its per-seed
mean JCTs, on the seeds every row has. `benchmarks/brain.py` pairs against the one
candidate best over all the seeds; on heavy-tailed workloads (`alibaba`) the best
differs from seed to seed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str]) -> None:
    run = json.loads(Path(argv[0]).read_text())
    extra = {}
    for arg in argv[1:]:
        label, path = arg.split("=", 1)
        extra[label] = json.loads(Path(path).read_text())
    for key, case in run["cases"].items():
        means, seeds = case["mean_jct"], case["seeds"]
        rows = {label: dict(zip(seeds, values, strict=True)) for label, values in means.items()}
        for label, data in extra.items():
            if key in data:
                rows[label] = {int(s): r["mean"] for s, r in data[key].items()}
        use = sorted(set.intersection(*(set(r) for r in rows.values())))
        fixed = [label for label in means if label != "brain"]
        best = np.array([min(rows[f][s] for f in fixed) for s in use])
        names = [min(fixed, key=lambda f, s=s: rows[f][s]) for s in use]
        srpt = np.array([rows["srpt"][s] for s in use])
        print(f"{key}, seeds {use[0]}-{use[-1]} ({len(use)}); the best of each seed: {names}")
        for label, row in rows.items():
            v = np.array([row[s] for s in use])
            ratio, to_srpt = v / best - 1, v / srpt - 1
            print(
                f"  {label:36s} vs the best of each seed: mean {100 * ratio.mean():+6.1f} %, "
                f"worst {100 * ratio.max():+6.1f} %; vs srpt {100 * to_srpt.mean():+6.1f} %; "
                + " ".join(f"{x:.0f}" for x in v)
            )


if __name__ == "__main__":
    main(sys.argv[1:])
