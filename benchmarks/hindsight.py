"""What the past of a stream tells of its best rule: a hindsight pick, followed all along.

    python benchmarks/hindsight.py -w alibaba --jobs-count 300 --seeds 10 --first-seed 1000 \\
        --among 'srpt?cap=0.9,fair?scale=0.5'

Each seed's stream is simulated under every candidate of the portfolio (the spec texts a
round replays, `portfolio.candidate_specs`, and the analytic idle rule over the plain
rule with the lowest mean JCT over the seeds, as `benchmarks/brain.py`'s fixed rows),
with the same arrivals and duration seed for all. For each fraction f the script then
picks, per seed, the candidate whose jobs among the first f of the stream's arrivals
have the lowest mean JCT, and prints what following that pick from the first decision
gives on the whole stream, against each seed's best candidate: the mean, the worst seed
and on how many seeds the pick is the best.

The pick knows more than any scheduler can: each candidate's run in full, and the whole
JCT of every early job, even the part that later arrivals decide; and following it from
the first decision costs no switch. A self-tuning scheduler that must match each seed's
best within a few percent has to beat this oracle at the fraction of the stream by which
it has to choose. ``--among`` repeats the picks among those candidates only.
Workload options as `idlegate compare`'s: ``-k``, ``--load``, ``--jobs-count``,
``--alibaba-dir``/``IDLEGATE_ALIBABA_DIR``, ``--tpch-dir``; docs/research/brain-results.md, "What
is luck at 300 workflows", reads the figures.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, run_script
from idlegate.policy.portfolio import PortfolioConfig, analytic_specs, candidate_specs, kind_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from streams import add_workload_flags, run_specs, workload_options

FRACTIONS = (0.1, 0.25, 0.5, 0.75, 0.9)


@dataclass(frozen=True)
class Pick:
    """Hindsight picks at one fraction of the stream."""

    picks: tuple[str, ...]
    """Per seed, the candidate with the lowest mean JCT over the first jobs."""
    excess: np.ndarray
    """Per seed, the pick's mean JCT on the whole stream over the seed's best, minus 1."""
    right: int
    """Seeds where the pick is a best candidate."""


def pick_at(jcts: Mapping[str, np.ndarray], jobs: int, among: Sequence[str] | None = None) -> Pick:
    """`jcts`: candidate → (seeds, jobs) JCTs in arrival order. The pick per seed among
    `among` (default: all) by the mean JCT of its first `jobs` jobs, against the best of
    all candidates on the whole stream."""
    names = list(among) if among else list(jcts)
    unknown = [n for n in names if n not in jcts]
    if unknown:
        raise IdlegateError(f"--among names {unknown[0]!r}, which is not a candidate run")
    if jobs < 1:
        raise IdlegateError("a fraction must cover at least one job of the stream")
    whole = {name: np.asarray(v, dtype=float).mean(axis=1) for name, v in jcts.items()}
    best = np.min(np.vstack(list(whole.values())), axis=0)
    picks = tuple(
        min(names, key=lambda n: float(np.mean(jcts[n][s, :jobs]))) for s in range(len(best))
    )
    got = np.array([whole[p][s] for s, p in enumerate(picks)])
    return Pick(picks, got / best - 1.0, int(np.sum(got <= best)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    add_workload_flags(parser, jobs_count=300)
    add_seeds(parser, 10, 1000)
    parser.add_argument("--among", default=None, help="candidates, comma-separated")
    run_script(parser, report, argv)


def report(args: argparse.Namespace) -> None:
    """Every candidate's runs on `args`' streams, then the hindsight picks against each
    seed's best."""
    options = workload_options(args)
    config = PortfolioConfig()
    jcts: dict[str, np.ndarray] = {}

    def run(specs: Sequence[str]) -> None:
        # (a run's JCTs are by job id: arrival order)
        runs = run_specs(args.workload, specs, args.seeds, args.first_seed, options)
        jcts.update({spec: np.vstack(r.jct) for spec, r in runs.items()})

    among = [a.strip() for a in args.among.split(",")] if args.among else None
    # (the analytic rule's base is known only once the plain rules have run)
    named = candidate_specs(config)
    unknown = [a for a in among or () if a not in named and not a.startswith("analytic")]
    if unknown:
        raise IdlegateError(
            f"--among names {unknown[0]!r}, not a candidate of the portfolio; choose from "
            f"{', '.join(named)} or the analytic rule over one"
        )
    run(named)
    # (as benchmarks/brain.py's fixed rows: over the untuned rule best on the mean)
    plain = [s for s in jcts if kind_of(s) == "rule" and "?" not in s]
    base = min(plain, key=lambda s: float(jcts[s].mean(axis=1).mean()))
    run(analytic_specs(config, base))
    jobs = jcts[next(iter(jcts))].shape[1]
    print(f"{len(jcts)} candidates, {args.seeds} seeds, {jobs} jobs a stream")
    groups = [("all candidates", None), *([(f"among {args.among}", among)] if among else [])]
    for label, names in groups:
        print(f"hindsight pick {label}, followed from the first decision, vs each seed's best:")
        for f in FRACTIONS:
            m = max(1, round(f * jobs))
            p = pick_at(jcts, m, names)
            print(
                f"  first {f:4.0%} ({m:4d} jobs): mean {100 * p.excess.mean():+7.1f} %, "
                f"worst {100 * p.excess.max():+7.1f} %, the best on {p.right} of {args.seeds}"
            )


if __name__ == "__main__":
    main()
