"""The portfolio's prior: how its fixed candidates rank on each workload of the suite.

    python benchmarks/brain_prior.py [--jobs-count 100] [--seeds 5] [--first-seed 2000]
        [--tpch-dir DIR] [--reuse RUNS.json] [--workloads KEY,...]
        [--out src/idlegate/policy/portfolio/prior.json]

Runs every fixed candidate of the default portfolio (`benchmarks/brain.py`'s rows: the
rules, the tuned grids, `learned:default`, the analytic idle rule over each workload's
best plain rule) on short streams of every workload of the evaluation suite and
`argo-shapes`, on *tuning* seeds (2000 on: the held-out seeds 1000–1009 stay unseen),
and writes per workload its features (`policy.portfolio.prior.workload_features` of the
stream's workflows) and each candidate's loss against the workload's best: the paired
mean over the seeds and the worst seed. The portfolio starts from it
(`policy.portfolio.prior`). TPC-H rows need the traces (`--tpch-dir`); without them they
are left out, which the lookup then cannot find. `--reuse` takes a JSON object of
already-run per-seed mean JCTs (``"KEY|JOBS|LABEL|SEED": seconds``) and writes the
runs it adds back to it. `--workloads` runs only those workloads' candidates and keeps
the other workloads' entries of `--out` as they are (the runs of a workload do not
depend on the others').

With queues (`prior.Prior.queues`): ``shared-queues``, `shared`'s three teams in a queue
each on Alibaba's tuning split, two hours of arrivals (`QUEUED`), is an entry measured
under its queues (``"queues": 3``), the only one a lookup on a pool of several queues
weighs; run it alone with ``--workloads shared-queues --seeds 5``. Given `--workloads`,
the file's other fields (its command, seeds, the learned range) stay as they are, and each
entry written gets its own ``command`` and ``seeds``.

It prints the calibration of the lookup's reach (`prior.REACH`): per workload, the share
of its own lookups (every tuning seed, at 4, 8 … 64 arrivals) whose distance to its own
entry, less their standard error (`prior.features_error`), is within the reach, and the
99th percentile of that excess. Besides the losses it writes, from the workloads'
streams alone (no scheduler runs):

* ``learned``: the shipped ONNX policy's range, the lowest and highest of each feature
  over streams (the tuning seeds) of the workloads its metadata says it was trained on
  (``idlegate.trained_on``), with that metadata (`prior.TrainedRange`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import WorkloadOptions
from idlegate.flags import add_seeds, description, seed_range
from idlegate.policy import DEFAULT_POLICY_PATH
from idlegate.policy.portfolio.prior import (
    PRIOR_PATH,
    REACH,
    distance,
    features_error,
    workload_features,
)
from idlegate.progress import stderr_progress
from idlegate.sim.workloads import build_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
import brain_runs as brain

QUEUED = {
    "shared-queues": ("shared", {"split": "train", "queues": "teams", "hours": 2.0}),
}
"""Entries measured under several queues: key → (workload, options). `shared` on its
tuning split (the held-out figures are on ``split=test``), its burst included."""


def queued_cases(seeds: tuple[int, ...], wanted: list[str] | None) -> list[brain.Case]:
    """The `QUEUED` cases (those of `wanted`, if given)."""
    return [
        brain.Case(key, key, workload, WorkloadOptions(extra=extra), seeds)
        for key, (workload, extra) in QUEUED.items()
        if wanted is None or key in wanted
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--jobs-count", type=int, default=100)
    add_seeds(parser, 5, 2000)
    parser.add_argument("--tpch-dir", type=Path, default=None)
    parser.add_argument("--reuse", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=PRIOR_PATH)
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=None)
    args = parser.parse_args(argv)
    if args.first_seed < 2000:
        parser.exit(2, "Error: the prior is made on tuning seeds: give --first-seed 2000 or more\n")
    ns = argparse.Namespace(
        first_seed=args.first_seed,
        seeds=args.seeds,
        workloads=None,
        tpch_dir=args.tpch_dir,
        jobs_count=args.jobs_count,
        brain=brain.BRAIN,
    )
    cases = [c for c in brain.cases_of(ns)[0] if c.family not in ("shift", "demo")]
    seeds = tuple(seed_range(args))
    cases += queued_cases(seeds, args.workloads)
    runs = json.loads(args.reuse.read_text()) if args.reuse and args.reuse.exists() else {}
    out: dict[str, Any] = {}
    kept_file: dict[str, Any] = {}
    if args.workloads is not None:  # (the others' entries as they are)
        kept_file = json.loads(args.out.read_text())
        kept = kept_file["workloads"]
        out = {k: v for k, v in kept.items() if k not in args.workloads}
        unknown = set(args.workloads) - {c.key for c in cases}
        if unknown:
            parser.exit(2, f"Error: no workload {sorted(unknown)[0]!r} in the prior's cases\n")
    chosen = [c for c in cases if args.workloads is None or c.key in args.workloads]
    command = " ".join(["python", "benchmarks/brain_prior.py", *sys.argv[1:]])
    with stderr_progress("workloads", len(chosen)) as bar:
        for done, case in enumerate(chosen, start=1):
            means = {
                lab: _means(case, lab, spec, args, runs) for lab, spec in _rows(case, args, runs)
            }
            failed = [lab for lab, values in means.items() if not np.all(np.isfinite(values))]
            for lab in failed:  # (left out of the entry: a lookup weighing it never picks it)
                print(f"{case.key}: {lab} failed on a seed, left out", flush=True)
                del means[lab]
            best = min(means, key=lambda lab: float(np.mean(means[lab])))
            losses = {}
            for lab, values in means.items():
                ratios = np.array(values) / np.array(means[best]) - 1
                losses[lab] = [round(float(np.mean(ratios)), 4), round(float(np.max(ratios)), 4)]
            workload = brain._built(case.workload, case.seeds[0], case.options.model_dump_json())
            dags = [job.dag for job in workload.jobs]
            features = workload_features(dags, workload.num_executors)
            out[case.key] = {"features": [round(f, 3) for f in features], "losses": losses}
            if len(workload.queues) > 1:
                out[case.key]["queues"] = len(workload.queues)
            if kept_file:
                out[case.key]["command"] = command
                out[case.key]["seeds"] = list(seeds)
            print(f"{case.key}: best {best}, features {out[case.key]['features']}", flush=True)
            bar(done, len(chosen), case.key)
    if args.reuse is not None:
        args.reuse.write_text(json.dumps(runs))
    order = [
        *kept_file.get("workloads", {}),
        *(c.key for c in cases),
    ]  # (the file's, then the cases')
    out = {k: out[k] for k in dict.fromkeys(order) if k in out}
    for key, (within, q99) in reach_check(chosen, out).items():
        print(f"reach {REACH}: {key}: {100 * within:.0f} % of its lookups within, q99 {q99}")
    if kept_file:  # (the file's own fields as they are: its entries' runs are not redone)
        prior = {**kept_file, "workloads": out}
    else:
        prior = {
            "command": command,
            "jobs_count": args.jobs_count,
            "seeds": list(seeds),
            "learned": learned_range(args),
            "workloads": out,
        }
    args.out.write_text(json.dumps(prior, indent=1) + "\n")
    return prior


LOOKUPS = (4, 8, 16, 32, 64)
"""The lookups (workflows arrived) the reach is checked on."""


def reach_check(cases: list[brain.Case], entries: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The calibration of the prior's reach (`prior.REACH`), per case and over all: the
    share of its lookups (every seed, `LOOKUPS` arrivals) whose distance to their own
    workload's entry, less their standard error, is within the reach, and the 99th
    percentile of that excess."""
    excess: dict[str, list[float]] = {}
    for case in cases:
        own = entries[case.key]["features"]
        for seed in case.seeds:
            workload = brain._built(case.workload, seed, case.options.model_dump_json())
            jobs = sorted(workload.jobs, key=lambda j: j.time)
            for n in LOOKUPS:
                dags = [j.dag for j in jobs[:n]]
                features = workload_features(dags, workload.num_executors)
                gap = distance(features, own, features_error(dags))
                excess.setdefault(case.key, []).append(gap)
    excess["all"] = [x for values in excess.values() for x in values]
    return {
        key: (float(np.mean(np.array(v) <= REACH)), round(float(np.quantile(v, 0.99)), 2))
        for key, v in excess.items()
    }


def learned_range(args: argparse.Namespace) -> dict[str, Any]:
    """The shipped policy's metadata and, per feature, the lowest and highest over streams
    (the tuning seeds) of each workload it was trained on."""
    import onnxruntime  # (the benchmark's, not the scheduler's: it reads the metadata)

    session = onnxruntime.InferenceSession(str(DEFAULT_POLICY_PATH))
    trained_on = session.get_modelmeta().custom_metadata_map.get("idlegate.trained_on", "")
    seen = []
    for entry in json.loads(trained_on)["workloads"]:
        options = dict(entry.get("options") or {})
        if entry["name"] == "tpch" and args.tpch_dir is not None:
            options.setdefault("tpch_dir", str(args.tpch_dir))
        for seed in seed_range(args):
            workload = build_workload(entry["name"], seed, **options)
            dags = [job.dag for job in workload.jobs]
            seen.append(workload_features(dags, workload.num_executors))
    low = [round(min(f[i] for f in seen), 3) for i in range(len(seen[0]))]
    high = [round(max(f[i] for f in seen), 3) for i in range(len(seen[0]))]
    return {"trained_on": trained_on, "low": low, "high": high}


def _rows(case: brain.Case, args: argparse.Namespace, runs: dict[str, float]) -> list[Any]:
    """The fixed rows, then the analytic rule over the best plain rule."""
    rows = brain.fixed_rows(case, brain.BRAIN)
    plain = [lab for lab, _ in rows if brain.kind_of(lab) == "rule" and "?" not in lab]
    base = min(plain, key=lambda lab: float(np.mean(_means(case, lab, lab, args, runs))))
    config, _ = brain.portfolio_config(brain.SchedulerSpec.parse(brain.BRAIN), {})
    return rows + [(s, s) for s in brain.analytic_specs(config, base)]


def _means(
    case: brain.Case, label: str, spec: str, args: argparse.Namespace, runs: dict[str, float]
) -> list[float]:
    out = []
    for seed in case.seeds:
        key = f"{case.key}|{args.jobs_count}|{label}|{seed}"
        if key not in runs:
            try:
                run = brain.run_task(brain.Task(case, label, spec, seed))
            except IdlegateError as exc:  # (a rule that raises on a stream: inf, left out)
                print(f"{key}: {exc}", flush=True)
                runs[key] = math.inf
            else:
                runs[key] = float(np.mean(run.jct))
        out.append(runs[key])
    return out


if __name__ == "__main__":
    main()
