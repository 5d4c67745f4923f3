"""A held-out stream of issue 96's shape, written as a history file and a queues file.

    .venv/bin/python -m benchmarks.burst_stream --seed 9601 --out out/burst-9601
        [--hours 8] [--load 0.7] [--burst 480] [--burst-at 3600] [--burst-span 120]
        [--heavy alibaba|generated] [--alibaba-dir DIR]

96 executors, three queues of 32 pods each, three teams (each a third of the offered
`--load`, Poisson arrivals for `--hours`):

* ``prod``: heavy production DAG jobs: the odd-numbered jobs of Alibaba's 2018 trace (the
  split `shared`'s tuning never reads) of at least two stages and at most two hours of
  the team's share, or, with ``--heavy generated`` (or no trace), layered DAGs of 3-10
  stages whose task counts are log-normal with a heavy tail;
* ``sci``: scientific workflows shaped as Montage's mosaic: per input image a project,
  a difference fit and a background stage, a concatenation and a background model
  between them, then a table, an add, a shrink and a picture (23 to 155 stages);
* ``adhoc``: small jobs (one or two stages of 1-12 tasks of 10-120 s), and at
  `--burst-at` a burst of `--burst` more (named ``burst-N``), spread over
  `--burst-span` seconds.

Every stage's tasks get measured durations (a log-normal factor of spread 0.35 around
the stage's figure, at most 40 a stage: a replay draws from them), so the file replays
as a cluster's own history (`-w file`, docs/workloads.md). Written: ``stream.yaml``
(the workflows, each naming its queue) and ``queues.yaml`` (the three queues). Use:

    idlegate forecast evaluate -w file --file out/burst-9601/stream.yaml \\
        --queues out/burst-9601/queues.yaml --seed 9601

and without ``--queues`` for the pool as one queue. Nothing here was tuned on: the
seeds 9601-9609 are this stream's own.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script

EXECUTORS = 96
TEAMS = ("prod", "sci", "adhoc")
SPREAD = 0.35
"""The log-normal spread of a task's duration around its stage's figure."""
MEASURED = 40
"""Measured durations written per stage at most (a replay resamples them)."""

Stage = dict[str, Any]
Draw = Callable[[np.random.Generator], list[Stage]]


def _stage(name: str, tasks: int, seconds: float, parents: list[str]) -> Stage:
    out: Stage = {"name": name, "tasks": int(tasks), "taskDurationSeconds": round(seconds, 2)}
    if parents:
        out["dependsOn"] = parents
    return out


def heavy_generated(rng: np.random.Generator) -> list[Stage]:
    """A layered DAG of 3-10 stages, each depending on one or two of the layer before;
    tasks log-normal (median 12, a tail to thousands), 20-240 s a task."""
    count = int(rng.integers(3, 11))
    stages: list[Stage] = []
    for i in range(count):
        tasks = min(3000, max(1, round(float(rng.lognormal(np.log(12), 1.3)))))
        seconds = float(np.exp(rng.uniform(np.log(20), np.log(240))))
        parents = []
        if i:
            parents = sorted({f"s{int(rng.integers(i))}", f"s{i - 1}"})
        stages.append(_stage(f"s{i}", tasks, seconds, parents))
    return stages


def heavy_from_trace(directory: str | None, cap: float) -> Draw:
    """Draws of the odd-numbered (held-out) jobs of Alibaba's trace of two stages or more
    and at most `cap` executor-seconds of work."""
    from idlegate.sim.alibaba import open_alibaba_trace

    dags = [
        j.dag
        for j in open_alibaba_trace(directory).jobs
        if j.number % 2 == 1 and j.dag.num_stages >= 2 and j.dag.total_work <= cap
    ]

    def draw(rng: np.random.Generator) -> list[Stage]:
        dag = dags[int(rng.integers(len(dags)))]
        return [
            _stage(
                f"s{i}",
                dag.tasks[i],
                max(1.0, dag.durations[i]),
                [f"s{p}" for p in dag.parents[i]],
            )
            for i in range(dag.num_stages)
        ]

    return draw


def montage(rng: np.random.Generator) -> list[Stage]:
    """A Montage-shaped mosaic of `width` images (module docstring)."""
    width = int(rng.integers(6, 51))

    def secs(lo: float, hi: float) -> float:
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    def tasks() -> int:
        return int(rng.integers(1, 4))

    stages = [_stage(f"project-{i}", tasks(), secs(20, 60), []) for i in range(width)]
    stages += [
        _stage(f"diff-{i}", tasks(), secs(5, 20), [f"project-{i}", f"project-{(i + 1) % width}"])
        for i in range(width)
    ]
    stages.append(_stage("concat", 1, secs(10, 40), [f"diff-{i}" for i in range(width)]))
    stages.append(_stage("bgmodel", 1, secs(30, 120), ["concat"]))
    stages += [
        _stage(f"background-{i}", tasks(), secs(5, 15), [f"project-{i}", "bgmodel"])
        for i in range(width)
    ]
    stages.append(_stage("imgtbl", 1, secs(5, 20), [f"background-{i}" for i in range(width)]))
    stages.append(_stage("add", int(rng.integers(1, 5)), secs(60, 300), ["imgtbl"]))
    stages.append(_stage("shrink", 1, secs(5, 20), ["add"]))
    stages.append(_stage("jpeg", 1, secs(3, 10), ["shrink"]))
    return stages


def small(rng: np.random.Generator) -> list[Stage]:
    """One stage (or two, a third of the time) of 1-12 tasks of 10-120 s."""
    count = 1 if rng.random() < 2 / 3 else 2
    return [
        _stage(
            f"s{i}",
            int(rng.integers(1, 13)),
            float(np.exp(rng.uniform(np.log(10), np.log(120)))),
            [f"s{i - 1}"] if i else [],
        )
        for i in range(count)
    ]


def work(stages: list[Stage]) -> float:
    return float(sum(s["tasks"] * s["taskDurationSeconds"] for s in stages))


def measured(stages: list[Stage], rng: np.random.Generator) -> list[Stage]:
    """`stages` with their measured task durations (module docstring)."""
    out = []
    for s in stages:
        n = min(s["tasks"], MEASURED)
        factors = rng.lognormal(-(SPREAD**2) / 2, SPREAD, n)  # (mean 1)
        seconds = [round(float(s["taskDurationSeconds"] * f), 2) for f in factors]
        out.append({**s, "measuredDurationSeconds": seconds})
    return out


def team_stream(
    team: str, draw: Draw, rng: np.random.Generator, rate: float, horizon: float
) -> list[tuple[float, list[Stage]]]:
    """Poisson arrivals of `draw`'s workflows offering `rate` executor-seconds a second
    (the mean gap from 500 draws of a stream of their own)."""
    probe = np.random.default_rng(int(rng.integers(2**63)))
    gap = float(np.mean([work(draw(probe)) for _ in range(500)])) / rate
    out = []
    t = float(rng.exponential(gap))
    while t < horizon:
        out.append((t, draw(rng)))
        t += float(rng.exponential(gap))
    return out


def build(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    """The stream's workflows (history records) and which heavy jobs it has."""
    rng = np.random.default_rng(args.seed)
    seeds = rng.integers(2**63, size=len(TEAMS) + 1)
    share = EXECUTORS / len(TEAMS)
    rate = args.load / len(TEAMS) * EXECUTORS
    horizon = args.hours * 3600.0
    heavy: Draw = heavy_generated
    which = "generated"
    if args.heavy == "alibaba":
        heavy = heavy_from_trace(args.alibaba_dir, 2 * 3600.0 * share)
        which = "alibaba (odd-numbered jobs)"
    draws: dict[str, Draw] = {"prod": heavy, "sci": montage, "adhoc": small}
    arrivals: list[tuple[float, str, list[Stage]]] = []
    for team, s in zip(TEAMS, seeds, strict=False):
        team_rng = np.random.default_rng(int(s))
        arrivals += [
            (t, team, st) for t, st in team_stream(team, draws[team], team_rng, rate, horizon)
        ]
    burst_rng = np.random.default_rng(int(seeds[-1]))
    times = np.sort(burst_rng.uniform(args.burst_at, args.burst_at + args.burst_span, args.burst))
    arrivals += [(float(t), "burst", small(burst_rng)) for t in times]
    arrivals.sort(key=lambda a: a[0])
    records = []
    durations = np.random.default_rng(int(rng.integers(2**63)))
    counts = dict.fromkeys((*TEAMS, "burst"), 0)
    for t, kind, stages in arrivals:
        counts[kind] += 1
        records.append(
            {
                "name": f"{kind}-{counts[kind]}",
                "arrival": round(t, 3),
                "queueName": "adhoc" if kind == "burst" else kind,
                "poolSize": EXECUTORS,
                "stages": measured(stages, durations),
            }
        )
    return records, which


def queues_file(reclaim: str | None) -> dict[str, Any]:
    """The three queues of 32 pods (with `reclaim`: every queue's preemption.reclaim)."""
    share = EXECUTORS // len(TEAMS)
    out = []
    for team in TEAMS:
        q: dict[str, Any] = {"name": team, "nominal": {"pods": share}}
        if reclaim is not None:
            q["preemption"] = {"reclaim": reclaim}
        out.append(q)
    return {"queues": out}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description(__doc__))
    add = parser.add_argument
    add("--seed", type=int, default=9601, help="the stream's seed (default: %(default)s)")
    add("--out", type=Path, required=True, help="directory for stream.yaml and queues.yaml")
    add("--hours", type=float, default=8.0, help="the steady arrivals' span (default: 8)")
    add("--load", type=float, default=0.7, help="the teams' load on 96 executors (default: 0.7)")
    add("--burst", type=int, default=480, help="small workflows in the burst (default: 480)")
    add(
        "--burst-at",
        type=float,
        default=3600.0,
        help="seconds from the start the burst begins, within --hours (default: 3600)",
    )
    add("--burst-span", type=float, default=120.0, help="the burst's seconds (default: 120)")
    add(
        "--heavy",
        choices=("alibaba", "generated"),
        default=None,
        help="the heavy team's jobs (default: Alibaba's when its data is found)",
    )
    add("--alibaba-dir", default=None, help="Alibaba's DAG jobs (default: ../shared/data's)")
    add(
        "--reclaim",
        choices=("LowerPriority", "Any"),
        default=None,
        help="every queue's preemption.reclaim in queues.yaml (default: none)",
    )
    return parser


def write(args: argparse.Namespace) -> Path:
    """Write the stream and its queues into `args.out` (the module docstring); the
    stream's path."""
    if not 0 <= args.burst_at < args.hours * 3600.0:
        raise IdlegateError(
            f"--burst-at {args.burst_at:g} is not within the stream's {args.hours:g} h "
            f"({args.hours * 3600.0:g} s): give a burst that begins before its end, "
            f"e.g. --burst-at {args.hours * 3600.0 / 3:g}"
        )
    if args.heavy is None:
        from idlegate.sim.alibaba import default_alibaba_dir

        found = args.alibaba_dir is not None or default_alibaba_dir() is not None
        args.heavy = "alibaba" if found else "generated"
    records, which = build(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "stream.yaml").write_text(yaml.safe_dump(records, sort_keys=False))
    (args.out / "queues.yaml").write_text(
        yaml.safe_dump(queues_file(args.reclaim), sort_keys=False)
    )
    per = {team: sum(r["queueName"] == team for r in records) for team in TEAMS}
    print(
        f"{args.out / 'stream.yaml'}: {len(records)} workflows ({per}), heavy jobs {which}, "
        f"burst of {args.burst} at {args.burst_at:g} s over {args.burst_span:g} s; "
        f"{args.out / 'queues.yaml'}: {len(TEAMS)} queues of {EXECUTORS // len(TEAMS)} pods"
    )
    return args.out / "stream.yaml"


if __name__ == "__main__":
    run_script(parser(), write)
