"""How right the operator's forecasts are on a live pool, against the real starts and finishes.

On the test API server of tests/k8s, whose simulated kubelets run each pod for its declared
duration stretched by a lognormal draw (σ `--stretch`, 0.3: median 1) and start it after a
latency (uniform in [L/2, 3L/2], L = `--latency` seconds; tests/k8s/kubelet.py), the real
operator runs with its forecasts on (``--forecast-interval 30``, `--interval`), in a process of its own
on a clock `--speed` times the wall's (benchmarks/live_operator.py). A burst of `BURST`
workflows is submitted at once, and `LATER` more `--later` seconds after (`SHAPES`, in
turn: four DAGs of 1-CPU tasks declaring 10-40 s). The pools (`--pools`):

* ``node``: three Nodes of 8 CPU and 32 GiB (a kube-scheduler stand-in binds the pods,
  tests/k8s/scheduler.py) and one ExecutorPool that follows them, no queues. One operator
  runs two bursts in turn: the first on a pool that has seen nothing (*cold*), the second,
  once the first ended, on the same pool (*warm*: it has seen every task of the first);
* ``fixed``: no Nodes, an ExecutorPool of `FIXED_PODS` pods with two queues of half of them
  each, ``a`` and ``b`` (the burst alternates between them); one burst, cold.

Scored as `idlegate forecast evaluate` scores (`evaluation.forecast_report.figures`), with
waits of at least `WAITED` seconds: each workflow's first forecast made while it waited (its
``status.firstForecast``: the operator's own record, on its clock) against its real start
(``firstForecast.startedAt``) and finish (``completionTime``), the arrival being the finish
less ``jctSeconds``. Position × rate (Kueue #13159) is `forecast_eval.Watch`'s, told the
pool's starts and finishes as they happened, at the time each first forecast was made.

The table's columns are the issue's: workflows scored (waited ≥ `WAITED` s), the median of
the start's error ÷ the wait (and the median signed error: early or late), of the finish's
÷ the JCT, the shares of starts and finishes inside the 80 % interval shown, and position ×
rate's start and finish errors. Under it, the same of the replays' own interval (before the
pool's calibration widened it: ``firstForecast.startReplayed``).

A second table scores every forecast a workflow was shown while it waited, not only its
first: each refresh's ``status.forecast``, read from the operator's writes as the run goes
(`ForecastRecorder`), per lead band (the forecast's start less when it was made: within a
doubling from `FLOOR`, as the calibration bands its scores), with the misses' direction
(*early*: it started past the interval's top). A burst's first forecasts are made at one
refresh and share one error; the later refreshes' are made with more of the pool seen.

    python -m benchmarks.live_forecast [--pools node,fixed] [--speed 5] [--latency 3]
        [--stretch 0.3] [--interval 30] [--later 60] [--policy default] [--seed 0] [--runs 3]
        [--against /tmp/before/src] [--json out.json] [--log operators.log]

`--runs` N runs each pool N times, the kubelets' seeds `--seed` on, and scores them
together (one run's forecasts share its errors: a burst's are all made at once). The
clock's default pace, 5, is the fastest at which the operator's own work stays small
against a task's: at 10 its writes in a burst took the pods' latency from the kubelets' 3 s
to about 10 s of its clock, and a burst took several seconds of its clock to admit.

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.live_figures import Recorder
from benchmarks.live_operator import (
    POOLS,
    ROOT,
    check_live_options,
    harness_missing,
    operator_process,
    prepare,
    wait_ended,
    wait_pool,
)
from idlegate.api.kinds import API_VERSION, POOL_KIND
from idlegate.evaluation.forecast_eval import Prediction, SeedRun, Watch
from idlegate.evaluation.forecast_report import Figures, figures
from idlegate.flags import description, run_script
from idlegate.sim.dag import Dag
from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import FLOOR, band
from idlegate.sim.protocol import JobRecord
from idlegate.sim.spec import parse_workflow
from idlegate.sim.timestamps import from_datetime

try:  # (the test API server: tests/ and the dev and operator extras)
    from benchmarks.live_harness import DWF, ApiServer, SimKubelet, node, stage, workflow
except ModuleNotFoundError as exc:
    if __name__ != "__main__":
        raise
    sys.exit(harness_missing(exc, "benchmarks.live_forecast"))

Stages = tuple[tuple[str, int, float, tuple[str, ...]], ...]
"""A workflow's stages: (name, tasks, declared seconds, the stages it depends on)."""

SHAPES: tuple[Stages, ...] = (
    (("extract", 2, 20.0, ()), ("load", 1, 30.0, ("extract",))),
    (
        ("split", 1, 10.0, ()),
        ("left", 3, 20.0, ("split",)),
        ("right", 2, 15.0, ("split",)),
        ("join", 1, 10.0, ("left", "right")),
    ),
    (("scan", 6, 15.0, ()),),
    (("train", 1, 40.0, ()), ("score", 2, 20.0, ("train",))),
)
"""The workflows submitted, in turn: about 90 task-seconds each, declared."""
BURST, LATER = 40, 8
"""Workflows submitted at once, and more `--later` seconds after."""
WAITED = 20.0
"""Seconds a workflow must have waited for its start forecast to be scored (the issue's)."""
NODE_COUNT, NODE_CPU, NODE_MEMORY = 3, "8", "32Gi"
FIXED_PODS = 16
"""The fixed pool's size; each of its two queues has half of it, nominal."""
NAMESPACES = {"node": ("forecast-n",), "fixed": ("forecast-a", "forecast-b")}
"""Each pool's namespaces; a fixed pool's queues are its namespaces, in order."""
INTERVAL = 30.0
"""The operator's ``--forecast-interval`` by default (issue 80's; issue 97's was 10:
`--interval`)."""


def body(name: str, stages: Stages) -> dict[str, Any]:
    """A DagWorkflow of `stages`, each task requesting 1 CPU and 1 GiB."""
    container = {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    template = {"spec": {"containers": [container]}}
    return workflow(
        name,
        *(stage(s, n, seconds, deps, template=template) for s, n, seconds, deps in stages),
    )


def pool_body(kind: str, policy: str) -> dict[str, Any]:
    """The ExecutorPool of `kind` (``node`` or ``fixed``, the module docstring)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"live-pool": "yes"}},
        "policy": policy,
    }
    if kind == "node":
        spec |= {"size": NODE_COUNT * 110, "nodeSelector": {}}
    else:
        half = FIXED_PODS // 2
        queues = [
            {"name": q, "nominal": {"pods": half}, "namespaces": [ns]}
            for q, ns in zip("ab", NAMESPACES["fixed"], strict=True)
        ]
        spec |= {"size": FIXED_PODS, "queues": queues}
    return {
        "apiVersion": API_VERSION,
        "kind": POOL_KIND,
        "metadata": {"name": f"forecast-{kind}"},
        "spec": spec,
    }


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One workflow as its final status tells it (operator clock seconds)."""

    name: str
    queue: int
    arrival: float
    start: float
    finish: float
    critical_path: float
    made: float | None = None
    """When its first forecast was made (None: it had none)."""
    shown: tuple[Span, Span] | None = None
    """That forecast's start and finish, with the intervals shown."""
    replayed: tuple[Span, Span] | None = None
    """The same with the replays' own intervals (before the calibration widened them)."""
    work: float = 0.0
    """Its DAG's total declared work (task-seconds)."""
    every: tuple[tuple[float, Span, Span], ...] = ()
    """Every forecast it was shown while it waited: (made, start, finish), in time order."""


class ForecastRecorder(Recorder):
    """A :class:`Recorder` that also keeps every ``status.forecast`` each DagWorkflow was
    shown (by its ``computedAt``), as the operator wrote them."""

    def __init__(self, api: Any) -> None:
        self.shown: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        super().__init__(api)

    def _on_change(self, res: Any, etype: str, obj: dict[str, Any]) -> None:
        super()._on_change(res, etype, obj)
        forecast = (obj.get("status") or {}).get("forecast") or {}
        if res.plural != "dagworkflows" or "startInterval" not in forecast:
            return
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        with self._lock:
            self.shown.setdefault(key, {}).setdefault(forecast["computedAt"], forecast)

    def every(self, key: tuple[str, str], start: float) -> tuple[tuple[float, Span, Span], ...]:
        """The forecasts workflow `key` was shown before its `start` (made, start, finish)."""
        t = from_datetime
        with self._lock:
            found = list((self.shown.get(key) or {}).values())
        out = []
        for f in found:
            (s_low, s_high), (f_low, f_high) = f["startInterval"], f["finishInterval"]
            start_span = Span(t(s_low), t(f["start"]), t(s_high))
            out.append((t(f["computedAt"]), start_span, Span(t(f_low), t(f["finish"]), t(f_high))))
        return tuple(sorted(e for e in out if e[0] < start))


def outcome(obj: dict[str, Any], queue: int, recorder: ForecastRecorder | None = None) -> Outcome:
    """The :class:`Outcome` of a finished DagWorkflow `obj` of `queue` (with every forecast
    it was shown, from `recorder`)."""
    found = _outcome(obj, queue)
    if recorder is None:
        return found
    key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
    return dataclasses.replace(found, every=recorder.every(key, found.start))


def _outcome(obj: dict[str, Any], queue: int) -> Outcome:
    status = obj.get("status") or {}
    finish = from_datetime(status["completionTime"])
    arrival = finish - float(status["jctSeconds"])
    dag = Dag.from_spec(parse_workflow(obj["spec"], "spec"))
    first = status.get("firstForecast")
    if first is None or first.get("startedAt") is None:
        start = from_datetime(status["startSummary"])  # (to the second)
        name = obj["metadata"]["name"]
        return Outcome(name, queue, arrival, start, finish, dag.critical_path, work=dag.total_work)
    t = from_datetime

    def span(which: str, interval: str) -> Span:
        low, high = first[interval]
        return Span(t(low), t(first[which]), t(high))

    return Outcome(
        obj["metadata"]["name"],
        queue,
        arrival,
        t(first["startedAt"]),
        finish,
        dag.critical_path,
        made=t(first["computedAt"]),
        shown=(span("start", "startInterval"), span("finish", "finishInterval")),
        replayed=(span("start", "startReplayed"), span("finish", "finishReplayed")),
        work=dag.total_work,
    )


def seed_run(outcomes: Sequence[Outcome]) -> SeedRun:
    """The forecasts of `outcomes` as `idlegate forecast evaluate` records them: per
    workflow with a first forecast, ``calibrated`` (the interval shown), ``forecast`` (the
    replays' own) and ``position×rate`` (`Watch`, told every start and finish before the
    forecast was made; a workflow's position is among those of its queue that arrived
    before it and had not started then)."""
    run = SeedRun(0)
    ids = {o.name: i for i, o in enumerate(sorted(outcomes, key=lambda o: (o.arrival, o.name)))}
    for o in outcomes:
        run.actual[ids[o.name]] = JobRecord(
            ids[o.name], o.name, o.arrival, o.start, o.finish, 0.0, o.critical_path, 0.0
        )
    # (in time order: a start or finish at the forecast's very time is known to it)
    happened = sorted(
        [(o.start, 0, o) for o in outcomes] + [(o.finish, 1, o) for o in outcomes],
        key=lambda e: (e[0], e[1], e[2].name),
    )
    watch, told = Watch(), 0
    for o in sorted((o for o in outcomes if o.made is not None), key=lambda o: (o.made, o.name)):
        assert o.made is not None and o.shown is not None and o.replayed is not None
        while told < len(happened) and happened[told][0] <= o.made:
            _, ended, e = happened[told]
            if ended:
                watch.ended(ids[e.name], e.queue, e.start, e.finish)
            else:
                watch.started(ids[e.name], e.queue, e.start, e.start - e.arrival)
            told += 1
        job = ids[o.name]
        for method, (start, finish) in (("calibrated", o.shown), ("forecast", o.replayed)):
            run.predictions.append(Prediction(method, job, o.made, False, start, finish))
        ahead = [
            w for w in outcomes if w.queue == o.queue and ids[w.name] < job and w.start > o.made
        ]
        by_rate = watch.by_rate(o.queue, len(ahead) + 1, o.made)
        if by_rate is None:
            run.unavailable.append(("position×rate", job, "its queue has admitted too few yet"))
            continue
        end = by_rate + watch.run_time(o.queue, o.critical_path)
        point = Span(by_rate, by_rate, by_rate), Span(end, end, end)
        run.predictions.append(Prediction("position×rate", job, o.made, False, *point))
    return run


def scored(outcomes: Sequence[Outcome], waited: float = 0.0) -> list[tuple[Outcome, Span, Span]]:
    """The workflows with a first forecast, each with its shown start and finish: those
    whose interval `figures` scores (all), or whose start error (`waited`: `WAITED`)."""
    return [
        (o, *o.shown)
        for o in outcomes
        if o.shown is not None and o.made is not None and o.start - o.arrival >= waited
    ]


def width(outcomes: Sequence[Outcome]) -> float:
    """The median of the shown start interval's width ÷ the wait (of at least `WAITED`)."""
    out = [(s.high - s.low) / (o.start - o.arrival) for o, s, _ in scored(outcomes, WAITED)]
    return statistics.median(out) if out else float("nan")


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the table: a run's figures."""

    run: str
    ours: Figures
    replays: Figures
    by_rate: Figures
    workflows: int
    forecast: int
    """Workflows with a first forecast made while they waited."""
    outcomes: tuple[Outcome, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        figs = {"ours": self.ours, "replays": self.replays, "by_rate": self.by_rate}
        return {
            "run": self.run,
            "workflows": self.workflows,
            "forecast": self.forecast,
            **{k: f.to_dict() for k, f in figs.items()},
            "outcomes": [dataclasses.asdict(o) for o in self.outcomes],
        }


def row_of(run: str, outcomes: Sequence[Sequence[Outcome]]) -> Row:
    """The row of `run`: its runs' `outcomes` (one list per run), scored together."""
    scored = [seed_run(o) for o in outcomes]
    every = [o for one in outcomes for o in one]
    return Row(
        run,
        figures(scored, "calibrated", WAITED),
        figures(scored, "forecast", WAITED),
        figures(scored, "position×rate", WAITED),
        len(every),
        sum(o.made is not None for o in every),
        tuple(every),
    )


BAND = (0.70, 0.90)
"""The share of starts and finishes a first forecast's 80 % interval must hold (issue 97)."""


def firsts_line(label: str, runs: Sequence[Sequence[Outcome]]) -> str:
    """Row `label`'s first forecasts run by run (the share of each run's starts and finishes their intervals held,
    start / finish, and their start interval's median width ÷ the wait), and how many runs
    held both within `BAND`: a burst's first forecasts share one refresh's errors, so a
    run is one draw of them (issue 97: judged on several seeds)."""
    cells, inside = [], 0
    for i, outcomes in enumerate(runs):
        f = row_of(label, [outcomes]).ours
        held = (f.start_inside, f.finish_inside)
        inside += all(BAND[0] <= x <= BAND[1] for x in held)
        cells.append(
            f"run {i}: {_share(held[0])} / {_share(held[1])} (n {f.start_n}, width ÷ wait "
            f"{width(outcomes):.2f})"
        )
    band = f"{100 * BAND[0]:.0f}-{100 * BAND[1]:.0f} %"
    return f"  {label}: " + "; ".join(cells) + f"; {inside} of {len(runs)} runs in {band}"


def _pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f} %"


def _share(x: float) -> str:
    return "—" if x != x else f"{100 * x:.0f} %"


def _bias(x: float) -> str:
    if x != x:
        return ""
    return f" ({'early' if x < 0 else 'late'} by a median {abs(x):.0f} s)"


HEADER = (
    "| run | n | start error ÷ wait | finish error ÷ JCT | in the 80 % interval: start / "
    "finish | position × rate |\n|---|---|---|---|---|---|"
)


def line(r: Row, code: str = "") -> str:
    """`r` as a row of the issue's table (`code`: whose operator, if several)."""
    f, b = r.ours, r.by_rate
    name = f"{r.run}{f' ({code})' if code else ''}"
    return (
        f"| {name} | {f.start_n} | {_pct(f.start_rel_median)}{_bias(f.start_bias_median)} | "
        f"{_pct(f.finish_rel_median)}{_bias(f.finish_bias_median)} | "
        f"{_share(f.start_inside)} / {_share(f.finish_inside)} | "
        f"{_pct(b.start_rel_median)} / {_pct(b.finish_rel_median)} |"
    )


def note(r: Row) -> str:
    """What the row leaves out: the replays' own interval, the forecasts made."""
    return (
        f"  {r.run}: {r.forecast} of {r.workflows} workflows forecast while they waited; "
        f"the replays' own interval held {_share(r.replays.start_inside)} of starts and "
        f"{_share(r.replays.finish_inside)} of finishes"
    )


EVERY_HEADER = (
    "| run | forecasts | in the 80 % interval: start / finish | starts missed: early / late | "
    "starts held per lead band (forecasts) |\n|---|---|---|---|---|"
)


def every_line(run: str, outcomes: Sequence[Outcome], code: str = "") -> str:
    """Every forecast `outcomes` were shown while they waited (`Outcome.every`), scored:
    the shares whose interval held the start and the finish, the starts missed (*early*:
    it started past the top; *late*: before the bottom), and the starts held per lead band
    (`forecast_calibration.band`)."""
    starts: list[bool] = []
    finishes: list[bool] = []
    early = late = 0
    per_band: dict[int, list[bool]] = {}
    for o in outcomes:
        for made, start, finish in o.every:
            held = start.low <= o.start <= start.high
            starts.append(held)
            finishes.append(finish.low <= o.finish <= finish.high)
            early += o.start > start.high
            late += o.start < start.low
            per_band.setdefault(band(start.median - made), []).append(held)
    if not starts:
        return f"| {run} | 0 | — | — | — |"
    bands = ", ".join(
        f"{FLOOR * 2**b:.0f}-{FLOOR * 2 ** (b + 1):.0f} s: "
        f"{_share(sum(held) / len(held))} ({len(held)})"
        for b, held in sorted(per_band.items())
    )
    name = f"{run}{f' ({code})' if code else ''}"
    return (
        f"| {name} | {len(starts)} | {_share(sum(starts) / len(starts))} / "
        f"{_share(sum(finishes) / len(finishes))} | {early} / {late} | {bands} |"
    )


def run(
    kind: str, src: Path, args: argparse.Namespace, seed: int, log: Any
) -> dict[str, list[Outcome]]:
    """The pool `kind`'s bursts (two on ``node``: cold, warm; one on ``fixed``) under
    `src`'s operator, the kubelets drawing from `seed`: each one's outcomes by its row."""
    namespaces = NAMESPACES[kind]
    phases = ("cold", "warm") if kind == "node" else ("cold",)
    nodes = (
        [node(f"node-{i}", cpu=NODE_CPU, memory=NODE_MEMORY) for i in range(NODE_COUNT)]
        if kind == "node"
        else []
    )
    rows: dict[str, list[Outcome]] = {}
    with tempfile.TemporaryDirectory() as tmp, ApiServer(Path(tmp)) as api:
        prepare(api, namespaces, nodes)
        recorder = ForecastRecorder(api)
        try:
            with contextlib.ExitStack() as stack:
                for ns in namespaces:
                    kubelet = SimKubelet(
                        api,
                        ns,
                        time_factor=1 / args.speed,
                        stretch=args.stretch,
                        start_latency=args.latency,
                        seed=seed,
                    )
                    stack.enter_context(kubelet)
                flags = [f"--forecast-interval={args.interval:g}", f"--pool-size={FIXED_PODS}"]
                proc, _ = stack.enter_context(
                    operator_process(api, src, args.speed, time.time(), log, namespaces, flags)
                )
                api.create(POOLS, pool_body(kind, args.policy))
                wait_pool(recorder, proc)
                for phase in phases:
                    names = submit(api, namespaces, phase, args.later / args.speed)
                    wait_ended(recorder, names, proc, f"the {phase} burst")
                    outcomes = [
                        outcome(api.get(DWF, ns, name), namespaces.index(ns), recorder)
                        for ns, name in names
                    ]
                    label = f"{kind} pool, {phase}" if kind == "node" else "fixed pool, 2 queues"
                    rows[label] = outcomes
        finally:
            recorder.close()
        api.assert_no_internal_errors()
    return rows


def submit(api: Any, namespaces: Sequence[str], phase: str, later: float) -> list[tuple[str, str]]:
    """`BURST` workflows at once, `LATER` more `later` wall seconds after, in turn of
    `SHAPES` and of `namespaces`: their (namespace, name)."""
    out = [(namespaces[i % len(namespaces)], f"{phase}-{i:02d}") for i in range(BURST + LATER)]
    resource = api.resource(DWF)

    def create(names: Sequence[tuple[str, str]], first: int) -> None:
        for i, (ns, name) in enumerate(names, first):
            api.emulator.create(resource, body(name, SHAPES[i % len(SHAPES)]), ns)

    api.call(create, out[:BURST], 0)  # (at once: in one turn of the API server's loop)
    time.sleep(later)
    api.call(create, out[BURST:], BURST)
    return out


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run of the bursts (this benchmark's and its paired scoring's)."""
    parser.add_argument(
        "--pools", default="node,fixed", help="node, fixed or both, in turn (default node,fixed)"
    )
    parser.add_argument(
        "--speed", type=float, default=5.0, help="simulated seconds per wall second (default 5)"
    )
    parser.add_argument(
        "--stretch",
        type=float,
        default=0.3,
        help="σ of the lognormal the kubelets stretch each task's seconds by (default 0.3)",
    )
    parser.add_argument(
        "--latency", type=float, default=3.0, help="pods' mean start latency, s (default 3)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=INTERVAL,
        help=f"the operator's --forecast-interval, s (default {INTERVAL:g})",
    )
    parser.add_argument(
        "--later",
        type=float,
        default=60.0,
        help=f"simulated seconds after a burst's {BURST} workflows that {LATER} more are "
        "submitted (default 60)",
    )
    parser.add_argument(
        "--policy", default="default", help="the pools' scheduler spec (default default)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the kubelets' seed in the first run (default 0)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="runs of each pool, the seed one more each run (default 1)",
    )


def main(argv: list[str] | None = None) -> list[tuple[str, Row]]:
    return run_script(parser(), measure, argv)


def parser() -> argparse.ArgumentParser:
    """The script's options."""
    parser = argparse.ArgumentParser(description=description(__doc__))
    add_run_options(parser)
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        help="another checkout's src directory: its operator runs the same, in turn "
        "(default: none)",
    )
    parser.add_argument(
        "--json", type=Path, help="write every row's figures there (default: not written)"
    )
    parser.add_argument("--log", type=Path, help="the operators' output (default: discarded)")
    return parser


def measure(args: argparse.Namespace) -> list[tuple[str, Row]]:
    """Run the pools' bursts as `args` say and print the tables (the options are checked
    before anything starts)."""
    check_live_options(args.speed, [args.policy], args.runs)
    kinds = args.pools.split(",")
    if not set(kinds) <= set(NAMESPACES):
        sys.exit(f"Error: --pools takes node and fixed, not {args.pools}")
    sources = [ROOT / "src", *(p.resolve() for p in args.against)]
    for src in sources:
        if not (src / "idlegate" / "__init__.py").exists():
            sys.exit(f"Error: {src} holds no idlegate package: give a checkout's src directory")
    command = " ".join(
        [
            "python -m benchmarks.live_forecast",
            f"--pools {args.pools} --speed {args.speed:g} --stretch {args.stretch:g}",
            f"--latency {args.latency:g} --interval {args.interval:g} --later {args.later:g}",
            f"--policy {args.policy}",
            f"--seed {args.seed} --runs {args.runs}",
            *(f"--against {shlex.quote(str(p))}" for p in sources[1:]),
        ]
    )
    print(command, flush=True)
    print(HEADER, flush=True)
    found: list[tuple[str, Row]] = []
    notes: list[str] = []
    firsts: list[str] = []
    every = [EVERY_HEADER]
    log = open(args.log, "ab") if args.log else open(os.devnull, "wb")  # noqa: SIM115
    with log:
        for kind in kinds:
            for src in sources:
                code = "" if len(sources) == 1 else "this" if src == sources[0] else str(src)
                runs: dict[str, list[list[Outcome]]] = {}
                for i in range(args.runs):
                    try:
                        found_now = run(kind, src, args, args.seed + i, log)
                    except (RuntimeError, TimeoutError) as exc:
                        sys.exit(f"Error: {exc} (the operators' output: --log FILE)")
                    for label, outcomes in found_now.items():
                        runs.setdefault(label, []).append(outcomes)
                        if args.runs > 1:
                            notes.append(f"  run {i}: " + line(row_of(label, [outcomes]), code))
                            every.append(every_line(f"{label}, run {i}", outcomes, code))
                for label, outcomes_per_run in runs.items():
                    firsts.append(firsts_line(label + (f" ({code})" if code else ""),
                                              outcomes_per_run))  # fmt: skip
                    r = row_of(label, outcomes_per_run)
                    print(line(r, code), flush=True)
                    every.append(every_line(label, r.outcomes, code))
                    notes.append(note(r) + (f" ({code})" if code else ""))
                    found.append((str(src), r))
    print("\n".join(notes))
    print("\nFirst forecasts run by run, in the 80 % interval: start / finish (issue 97):")
    print("\n".join(firsts))
    print("\nEvery forecast shown while its workflow waited (each refresh's):")
    print("\n".join(every))
    if args.json:
        rows_json = [
            {"code": code, **{k: v for k, v in dataclasses.asdict(r).items()}} for code, r in found
        ]
        args.json.write_text(json.dumps(rows_json, indent=1))
    print("rerun: " + command)
    return found


if __name__ == "__main__":
    main()
