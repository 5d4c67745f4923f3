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

import argparse
import json
from pathlib import Path

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script

BRAIN = "default"
MEAN_TARGET, SEED_TARGET = 0.02, 0.10


def per_seed(path: Path) -> dict[str, np.ndarray]:
    """Scheduler → its mean JCT per seed (seed order) in a `compare --json` file."""
    try:
        data = json.loads(path.read_text())
        return {
            name: np.array([r["avg_jct"] for r in sorted(row["runs"], key=lambda r: r["seed"])])
            for name, row in data["schedulers"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise IdlegateError(
            f"cannot read {path} as an `idlegate compare --json` output ({exc!r}); give the "
            "file compare --json wrote"
        ) from None


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description(__doc__))
    p.add_argument("run", type=Path, help="an `idlegate compare --json` run with `default`")
    p.add_argument(
        "brains",
        nargs="*",
        metavar="LABEL=BRAIN.json",
        help="another run of `default` alone on those seeds, a row of its own (default: none)",
    )
    return p


def report(args: argparse.Namespace) -> int:
    runs = per_seed(args.run)
    brains = {BRAIN: runs[BRAIN]} if BRAIN in runs else {}
    for arg in args.brains:
        label, _, path = arg.partition("=")
        if not path:
            raise IdlegateError(f"{arg!r} is not LABEL=BRAIN.json; e.g. before=out/before.json")
        other = per_seed(Path(path))
        if BRAIN not in other:
            raise IdlegateError(f"{path} has no run of `{BRAIN}`; give a compare --json run of it")
        brains[label] = other[BRAIN]
    print("\n".join(table(runs, brains)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(parser(), report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
