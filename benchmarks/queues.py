"""Teams sharing one pool: idlegate's queues against today's single queue, a Kueue-like
admission and plain DRF, on held-out seeds (issue 59's targets; docs/research/queues.md).

    python benchmarks/queues.py --seeds 10 --first-seed 1000 [--json out.json]
    python benchmarks/queues.py --cost            # a question's cost with 20 queues

Scenarios (`-w teams`, three teams of equal quota on 30 executors, TPC-H-like DAGs at load
0.85 in all, `--jobs` workflows a steady team): ``flood`` (the first team submits five times
as many at t = 0), ``flood100`` (it submits 100 at t = 0), ``large`` (the first team's
stream carries one workflow of 30 times its mean work) and ``steady`` (none does), with a wait bound of `--bound` seconds on every queue but a flooding
team's (a backlog of five times its share cannot meet one: docs/queues.md). ``shared``
is issue 96's shape instead: `-w shared` with a queue per team (96 executors, three
queues of 32 pods: Alibaba's held-out DAG jobs, scientific workflows, small jobs with a
burst of `--burst` times their hourly work an hour in; load 0.7 over `--hours`), no wait
bound, its bursting team ``small`` left out of the steady teams. Rows, each on the same arrivals per seed:

* ``queues:POLICY``: idlegate's admission in front of POLICY (srpt by default);
* ``pooled:POLICY``: idlegate's admission with POLICY asked of the whole pool, its caps
  over every workflow (the admission before its policy was scoped to the queue);
* ``one-queue:POLICY``: the same policy on today's single queue (``admission?mode=none``);
* ``kueue:fifo``: whole workflows admitted against quota, BestEffortFIFO, pods in order;
* ``drf:POLICY``: plain dominant-resource fairness across queues;
* ``reclaim:POLICY``: ``queues:POLICY`` with every queue's ``preemption.reclaim: Any``
  (a team under its quota stops the least work of the teams above theirs: issue 82);
* ``reclaim-kueue:POLICY``: the same, its victims chosen as Kueue does (whole workflows,
  lowest priority, newest admitted first);
* ``reclaim-forecast:POLICY``: ``reclaim:POLICY`` with every queue's ``preemption.decide:
  Forecast`` (a stop goes ahead only where a replay with and without it says it pays:
  `idlegate.sim.reclaim_forecast`).

Per row: the mean JCT over all teams (and paired against ``queues:POLICY``: the mean of
each seed's change, and the worst seed's), each steady
team's mean ρ (its mean JCT over its mean JCT alone on its quota under the row's policy),
Jain's index over contended time, the tasks started past the bound plus its allowed
overshoot, the worst and p99.9 wait, and each team's mean JCT. With reclaim rows, a
second table: each row's tasks stopped, its work lost (% of all executor-seconds run,
over the seeds, and its worst seed's), the seeds on which it lost more than the row with
the Kueue-like victims, each steady team's ρ beside, the starts later than the bound plus
the reclaim's grace (`GRACE`), and the steady teams' latest start past their bound.
With forecast rows, a third: each row's verdicts by case and the CPU time of a decision
(median, p99, worst). `--grace S` gives the reclaim rows' lent tasks a grace of S seconds
(``admission?grace=S``; the starts counted past bound + grace use it too); `--patience S`
and `--ending R` their claimants' patience and the ending ratio
(`idlegate.sim.reclaim_patience`; 0 and 0: the rules without them); `--rate R`
the forecast rows' exchange rate (`idlegate.sim.reclaim_verdict.RATE`); `--events N`,
`--first-pairs K` and `--shortest S` the judge's budget (`idlegate.sim.reclaim_forecast`).
`--from-json FILE` prints the tables of a `--json` file again, without running.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, run_script, seed_range
from idlegate.policy import make_scheduler
from idlegate.progress import stderr_progress
from idlegate.sim.engine import Engine, Workload
from idlegate.sim.queue_metrics import jain, queue_figures, queue_jcts, replay_alone, rho
from idlegate.sim.queues import Preemption
from idlegate.sim.reclaim_forecast import EVENTS, FIRST_PAIRS, SHORTEST, forecast_judge
from idlegate.sim.reclaim_ledger import Calm
from idlegate.sim.reclaim_verdict import RATE
from idlegate.sim.workloads import build_workload
from idlegate.textfiles import check_out_file

SCENARIOS = ("flood", "large", "flood100", "steady", "shared")
BURST = 2.5
"""``shared``: the small team's burst, times its hourly work (about 480 workflows at once,
issue 96's held-out streams)."""
FLOOD = 100
"""Workflows the flooding team submits at once in ``flood100``."""
GRACE = Calm().grace
"""Seconds a lent task is spared by the reclaim (`idlegate.sim.reclaim_ledger.Calm`)."""


def rows(policy: str) -> dict[str, str]:
    """Row label → scheduler spec."""
    return {
        f"queues:{policy}": policy,
        f"pooled:{policy}": f"admission?mode=pooled:{policy}",
        f"one-queue:{policy}": f"admission?mode=none:{policy}",
        "kueue:fifo": "admission?mode=kueue:fifo",
        f"drf:{policy}": f"admission?mode=drf:{policy}",
        f"reclaim:{policy}": policy,
        f"reclaim-kueue:{policy}": f"admission?victims=kueue:{policy}",
        f"reclaim-forecast:{policy}": policy,
    }


def graced(label: str, spec: str, grace: float | None, **more: float | None) -> str:
    """A row's spec with the reclaim's grace `grace` and `more` of its settings
    (`patience`, `ending`: `idlegate.sim.reclaim_ledger.Calm`; None: the default)."""
    given = {"grace": grace, **more}
    keys = "&".join(f"{k}={v:g}" for k, v in given.items() if v is not None)
    if not keys or not label.startswith("reclaim"):
        return spec
    if spec.startswith("admission?"):
        head, tail = spec.split(":", 1)
        return f"{head}&{keys}:{tail}"
    return f"admission?{keys}:{spec}"


def reclaims(label: str) -> str:
    """A row's queues' ``preemption.reclaim`` (the ``reclaim`` rows: ``Any``)."""
    return "Any" if label.startswith("reclaim") else "Never"


def decides(label: str) -> str:
    """A row's queues' ``preemption.decide`` (the ``reclaim-forecast`` rows: ``Forecast``)."""
    return "Forecast" if label.startswith("reclaim-forecast") else "Rules"


def inner(spec: str) -> str:
    """The policy inside a row's spec (what its teams replay alone with)."""
    return spec.rsplit(":", 1)[-1] if spec.startswith("admission") else spec


def run_row(
    workload: Workload,
    spec: str,
    seed: int,
    grace: float = GRACE,
    rate: float = RATE,
    budget: dict[str, Any] | None = None,
    alone: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """One row on one seed: the run's figures and each queue's (and, deciding on
    forecasts at `rate` within `budget`, `forecast_judge`'s ``events``, ``first_pairs``
    and ``shortest``, the verdicts by case and each decision's CPU seconds). `alone`
    keeps the teams' replays alone (they have no queues, so rows that differ only in
    their queues' settings share them) by workload, seed and policy."""
    scheduler = make_scheduler(spec)
    judge = functools.partial(forecast_judge, clock=time.thread_time, rate=rate, **(budget or {}))
    engine = Engine.for_workload(workload, scheduler, seed, record_tasks=True, judge=judge)
    engine.run()
    result = engine.result(workload.name, getattr(scheduler, "name", spec), seed)
    admission = engine.cluster.admission
    reclaimer = None if admission is None else admission.reclaimer
    verdicts = [] if reclaimer is None else reclaimer.verdicts
    overdue = [] if result.queues is None else result.queues.overdue
    key = (workload.name, len(workload.jobs), seed, inner(spec))
    cache = {} if alone is None else alone
    if key not in cache:
        cache[key] = replay_alone(workload, lambda: make_scheduler(inner(spec)), seed)
    alone_runs = cache[key]
    figures = queue_figures(workload, result, alone_runs)
    return {
        "mean_jct": float(np.mean([r.jct for r in result.records])),
        "unfinished": result.unfinished,
        "rho": rho(workload, result, alone_runs),
        "team_jct": {
            q.name: float(np.mean(jcts)) if jcts else None
            for q, jcts in zip(workload.queues, queue_jcts(workload, result), strict=True)
        },
        "jain": jain(result),
        "queues": [f.to_dict() for f in figures],
        "beyond_allowed": sum(f.beyond_allowed for f in figures),
        "overdue": sum(f.overdue for f in figures),
        "worst_wait": max((f.worst_wait for f in figures), default=None),
        "p999_wait": max((f.p999_wait for f in figures), default=None),
        "preempted": result.preempted,
        "lost_seconds": result.preempted_seconds,
        "busy_seconds": result.busy_seconds,
        "over_grace": sum(1 for _q, due, start in overdue if start - due > grace + 1e-6),
    } | (
        {
            "verdicts": result.verdicts,  # (the run's count: `SimResult.verdicts`)
            "decision_cpu": [v.spent for v in verdicts],
        }
        if result.verdicts
        else {}
    )


def parser() -> argparse.ArgumentParser:
    """The command line's options, each with its default in its help."""
    p = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(p, 10, 1000)
    p.add_argument(
        "--policy", default="srpt", help="the rows' policy, a scheduler spec (default %(default)s)"
    )
    p.add_argument(
        "--bound",
        type=float,
        default=600.0,
        help="every queue's wait bound, s, but a flooding team's (default %(default)g)",
    )
    p.add_argument(
        "--scenarios",
        default="flood,large",
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default %(default)s)",
    )
    p.add_argument(
        "--rows",
        help="only the rows whose label starts with one of these, comma-separated (default: "
        "every row)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=60,
        help="workflows a steady team sends (default %(default)s)",
    )
    p.add_argument(
        "--burst",
        type=float,
        default=BURST,
        help="shared: the small team's burst, times its hourly work (default %(default)g)",
    )
    p.add_argument(
        "--hours",
        type=float,
        default=8.0,
        help="shared: the streams' hours (default %(default)g)",
    )
    p.add_argument("--json", help="write every figure to this file (default: none written)")
    p.add_argument(
        "--cost", action="store_true", help="only a question's cost, with 20 queues and one"
    )
    p.add_argument(
        "--from-json",
        help="only print the tables of a --json file written (default: run the rows)",
    )
    p.add_argument("--grace", type=float, help=f"the reclaim rows' grace (s; default {GRACE:g})")
    p.add_argument(
        "--events",
        type=int,
        default=EVENTS,
        help="the judge's events a decision (default %(default)s)",
    )
    p.add_argument(
        "--first-pairs",
        type=int,
        default=FIRST_PAIRS,
        help="pairs of replays the judge's budget is shared out for (default %(default)s)",
    )
    p.add_argument(
        "--shortest",
        type=float,
        default=SHORTEST,
        help="seconds a pair of replays must look ahead to count (default %(default)g)",
    )
    p.add_argument(
        "--patience",
        type=float,
        help=f"the reclaim rows' patience (s; default {Calm().patience:g})",
    )
    p.add_argument(
        "--ending",
        type=float,
        help=f"the reclaim rows' ending ratio (default {Calm().ending:g})",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=RATE,
        help="the forecast rows' exchange rate (s of wait an executor-second lost is worth; "
        "default %(default)g)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run what the command line asks; a user's mistake is one line ``Error: ...``, exit 1."""
    options = parser()
    return run_script(options, run, argv)


def run(args: argparse.Namespace) -> int:
    """The tables `args` ask for, printed (and written to ``--json``)."""
    if args.cost:
        return cost(args.first_seed, args.policy)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            for scenario, table in json.load(f).items():
                report(scenario, table, args.policy, args.grace)
        return 0
    scenarios = args.scenarios.split(",")
    if unknown := [s for s in scenarios if s not in SCENARIOS]:
        raise IdlegateError(
            f"no scenario {unknown[0]!r}; give --scenarios of {', '.join(SCENARIOS)}, "
            "comma-separated"
        )
    make_scheduler(args.policy)  # (a bad spec stops here, before any run)
    seeds = seed_range(args)
    if args.grace is not None and not args.grace >= 0:
        raise IdlegateError(f"--grace must be 0 or more seconds, got {args.grace:g}")
    if args.json:
        check_out_file(args.json, "the figures")
    out: dict[str, Any] = {}
    wanted = args.rows.split(",") if args.rows else [""]
    chosen = {
        label: spec
        for label, spec in rows(args.policy).items()
        if any(label.startswith(w) for w in wanted)
    }
    if not chosen:
        raise IdlegateError(
            f"no row's label starts with any of --rows {args.rows}; the rows are "
            f"{', '.join(rows(args.policy))}"
        )
    total = len(scenarios) * len(chosen) * len(seeds)
    done = 0
    alone: dict[Any, Any] = {}
    with stderr_progress("simulating", total) as bar:
        for scenario in scenarios:
            out[scenario] = {}
            for label, spec in chosen.items():
                per_seed = []
                for seed in seeds:
                    workload = scenario_workload(scenario, seed, label, args)
                    grace = GRACE if args.grace is None else args.grace
                    spec_g = graced(
                        label, spec, args.grace, patience=args.patience, ending=args.ending
                    )
                    budget = {
                        "events": args.events,
                        "first_pairs": args.first_pairs,
                        "shortest": args.shortest,
                    }
                    row = run_row(workload, spec_g, seed, grace, args.rate, budget, alone)
                    per_seed.append(row)
                    done += 1
                    bar(done, total, f"{scenario} {label} seed {seed}")
                out[scenario][label] = per_seed
            report(scenario, out[scenario], args.policy, args.grace)
            alone.clear()
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


def scenario_workload(scenario: str, seed: int, label: str, args: argparse.Namespace) -> Workload:
    """The arrivals of `scenario` on `seed`, its queues' preemption the row `label`'s."""
    if scenario != "shared":
        return build_workload(
            "teams",
            seed,
            wait_bound=args.bound,
            num_jobs=args.jobs,
            reclaim=reclaims(label),
            decide=decides(label),
            **scenes(scenario, args.jobs),
        )
    workload = build_workload(
        "shared", seed, queues="teams", split="test", burst=args.burst, hours=args.hours
    )
    settings = Preemption(reclaim=reclaims(label), decide=decides(label))
    return replace(workload, queues=tuple(replace(q, preemption=settings) for q in workload.queues))


def scenes(scenario: str, jobs: int) -> dict[str, Any]:
    """The `teams` workload's options of a scenario (``flood100``: a flood of `FLOOD`
    workflows, whatever the steady teams' count)."""
    if scenario == "flood100":
        return {"scenario": "flood", "flood": FLOOD / jobs}
    return {"scenario": scenario}


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def report(
    scenario: str, table: dict[str, list[dict[str, Any]]], policy: str, grace: float | None = None
) -> None:
    """The scenario's table and its targets."""
    ours = table.get(f"queues:{policy}")  # (absent: "vs queues" is nan)
    other = disturber(scenario)
    print(f"\n## {scenario}")
    print(
        "| row | mean JCT (s) | vs queues (worst seed) | steady teams' mean ρ (worst seed) | "
        "Jain | beyond bound | worst / p99.9 wait (s) | each team's mean JCT (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, runs in table.items():
        mean = _mean([r["mean_jct"] for r in runs])
        changes = [
            r["mean_jct"] / o["mean_jct"] - 1 for r, o in zip(runs, ours or [], strict=False)
        ]
        paired, worst_change = _mean(changes), max(changes, default=float("nan"))
        steady = [[v for k, v in r["rho"].items() if k != other] for r in runs if r["rho"]]
        rho = _mean([_mean(s) for s in steady])
        worst_rho = max((max(s) for s in steady if s), default=float("nan"))
        jains = [r["jain"] for r in runs if r["jain"] is not None]
        waits = [r["worst_wait"] for r in runs if r["worst_wait"] is not None]
        p999 = [r["p999_wait"] for r in runs if r["p999_wait"] is not None]
        beyond = sum(r["beyond_allowed"] for r in runs)
        overdue = sum(r["overdue"] for r in runs)
        print(
            f"| {label} | {mean:,.1f} | {paired:+.1%} ({worst_change:+.1%}) | "
            f"{rho:.2f} ({worst_rho:.2f}) | "
            f"{_mean(jains):.3f} | {beyond} of {overdue} overdue | "
            + (f"{max(waits):,.0f} / {max(p999):,.0f} |" if waits else "— |")
            + f" {team_jcts(runs)} |"
        )
    if any(label.startswith("reclaim") for label in table):
        report_reclaim(table, GRACE if grace is None else grace, other)
    if any("verdicts" in r for runs in table.values() for r in runs):
        report_verdicts(table)


def report_reclaim(
    table: dict[str, list[dict[str, Any]]], grace: float = GRACE, other: str = "team-a"
) -> None:
    """The reclaim's table: tasks stopped, work lost (over the seeds, its worst seed's,
    and the seeds losing more than the Kueue-like victims' row), the steady teams' ρ
    (mean, worst seed; `other` is the team left out) and the starts later than the bound
    plus `grace`, per row."""
    print(
        "\n| row | tasks stopped | work lost (% of executor-seconds; worst seed) | seeds "
        "losing more than Kueue-like | steady teams' mean ρ (worst seed) | starts past "
        f"bound + {grace:.0f} s | steady teams' worst start past bound (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    kueue = next((runs for label, runs in table.items() if label.startswith("reclaim-kueue")), [])
    for label, runs in table.items():
        lost = sum(r["lost_seconds"] for r in runs) / sum(r["busy_seconds"] for r in runs)
        shares = [r["lost_seconds"] / r["busy_seconds"] for r in runs]
        theirs = [k["lost_seconds"] / k["busy_seconds"] for k in kueue]
        more = sum(m > t for m, t in zip(shares, theirs, strict=False)) if kueue else "—"
        steady = [[v for k, v in r["rho"].items() if k != other] for r in runs if r["rho"]]
        worst = max((max(s) for s in steady if s), default=float("nan"))
        late = [q["worst_overshoot"] for r in runs for q in r["queues"] if q["queue"] != other]
        print(
            f"| {label} | {sum(r['preempted'] for r in runs)} | {lost:.2%} ({max(shares):.2%}) "
            f"| {more} | {_mean([_mean(s) for s in steady]):.2f} ({worst:.2f}) | "
            f"{sum(r['over_grace'] for r in runs)} of {sum(r['overdue'] for r in runs)} | "
            f"{max(late, default=0.0):,.0f} |"
        )


def report_verdicts(table: dict[str, list[dict[str, Any]]]) -> None:
    """The forecast rows' verdicts by case over the seeds, and a decision's CPU time."""
    print(
        "\n| row | stops: bound / pays | declined | cut (the rules' stops) | a decision's CPU "
        "(ms): median / p99 / worst |"
    )
    print("|---|---|---|---|---|")
    for label, runs in table.items():
        got = [r["verdicts"] for r in runs if "verdicts" in r]
        if not got:
            continue
        case = {k: sum(g[k] for g in got) for k in got[0]}
        cpu = [c for r in runs for c in r.get("decision_cpu", []) if c is not None]
        ms = np.array(cpu) * 1000 if cpu else np.array([float("nan")])
        print(
            f"| {label} | {case['bound']} / {case['pays']} | {case['declined']} | {case['cut']} "
            f"| {np.median(ms):.0f} / {np.percentile(ms, 99):.0f} / {ms.max():.0f} |"
        )


def disturber(scenario: str) -> str:
    """The team left out of the steady teams' figures: the flooding or large team, or in
    ``shared`` the bursting one."""
    return "small" if scenario == "shared" else "team-a"


def team_jcts(runs: list[dict[str, Any]]) -> str:
    """Each queue's mean JCT, averaged over the seeds, in queue order ("887 / 69 / 71")."""
    names = list(runs[0]["team_jct"])
    means = [_mean([r["team_jct"][n] for r in runs if r["team_jct"][n] is not None]) for n in names]
    return " / ".join(f"{m:,.0f}" for m in means)


def cost(seed: int, policy: str) -> int:
    """A question's cost (Cluster.decide_once) with 20 queues against one queue, the
    same arrivals and policy, side by side: median and p99 of its thread CPU time in microseconds."""
    workload = build_workload(
        "teams", seed, scenario="flood", teams=20, num_executors=100, num_jobs=10
    )
    print("| admission | questions | median (µs) | p99 (µs) |")
    print("|---|---|---|---|")
    for label, spec in (
        ("20 queues", policy),
        ("one queue", f"admission?mode=none:{policy}"),
    ):
        times: list[int] = []
        engine = Engine.for_workload(workload, make_scheduler(spec), seed)
        engine.cluster.decide_once = _timed(engine.cluster.decide_once, times)  # type: ignore[method-assign]
        engine.run()
        us = np.array(times) / 1000
        print(f"| {label} | {len(us)} | {np.median(us):.0f} | {np.percentile(us, 99):.0f} |")
    return 0


def _timed(fn: Callable[..., Any], times: list[int]) -> Callable[..., Any]:
    def timed(*args: Any) -> Any:
        start = time.thread_time_ns()
        try:
            return fn(*args)
        finally:
            times.append(time.thread_time_ns() - start)

    return timed


if __name__ == "__main__":
    raise SystemExit(main())
