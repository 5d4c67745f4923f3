"""`idlegate forecast evaluate`: the baselines' known answers, the scoring and the command."""

from __future__ import annotations

import io
import json
from math import isnan, log
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.cli_forecast import seeds_text
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.evaluation.forecast_eval import (
    EvalSettings,
    Prediction,
    SeedRun,
    Watch,
    checkpoints,
    evaluate,
    evaluate_seed,
    measured_view,
)
from idlegate.evaluation.forecast_report import MD_COLUMNS, MD_HEAD, figures, render, report
from idlegate.policy import make_scheduler
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.engine import Engine, Fidelity, JobArrival, Workload, simulate
from idlegate.sim.forecast import Span, forecast
from idlegate.sim.forecast_arrivals import (
    STREAM_SENDS,
    queue_futures,
    queue_posterior,
    queue_rate,
    queue_share,
    still_sending,
    stream_lasts,
)
from idlegate.sim.pool import effective_executors
from idlegate.sim.protocol import JobRecord
from idlegate.sim.queues import QueueSpec
from tests.helpers import chain, load_benchmark, workload


def test_baselines_from_the_queues_past() -> None:
    # one executor; jobs of 10 s arrive at 0, 1, 2, 3: at t=20.5, a and b have run (waits 0
    # and 9: b started at 10), c runs since 20, d waits, first in line
    w = workload(*((float(t), n, chain(10.0)) for t, n in enumerate("abcd")))
    engine = Engine.for_workload(w, make_scheduler("fifo"), 0)
    engine.run(20.5)
    watch = Watch()
    watch.see(engine.cluster)
    d = next(j for j in engine.cluster.jobs if j.name == "d")
    # admissions at 0, 10, 20: three in the 20.5 s since the first, one every 6.83 s
    assert watch.by_rate(d.queue, 1, 20.5) == pytest.approx(20.5 + 20.5 / 3)
    # waits 0, 9, 18 in start order: EMA 0 → 1.8 → 5.04; d arrived at 3
    assert watch.by_ema(d, 20.5) == 20.5  # (3 + 5.04 is past: no earlier than now)
    assert watch.queues[0].ema == 0.2 * 18 + 0.8 * (0.2 * 9)
    # run times of the finished (a and b): 10 s each
    assert watch.run_time(d.queue, d.dag.critical_path) == 10.0


def test_baselines_need_a_queue_that_admitted() -> None:
    w = workload((0.0, "a", chain(10.0)), (1.0, "b", chain(10.0)))
    engine = Engine.for_workload(w, make_scheduler("fifo"), 0)
    engine.run(1.0)
    watch = Watch()
    watch.see(engine.cluster)
    b = engine.cluster.jobs[1]
    assert watch.by_rate(b.queue, 1, 1.0) is None  # (one admission: no rate yet)
    assert watch.by_ema(b, 1.0) == 1.0  # (a waited 0 s: b is due now)
    assert (
        watch.run_time(b.queue, b.dag.critical_path) == 10.0
    )  # (none finished: its critical path)


def test_checkpoints_are_arrivals_and_with_every_their_multiples() -> None:
    w = workload((0.0, "a", chain(1.0)), (25.0, "b", chain(1.0)), (25.0, "c", chain(1.0)))
    assert list(checkpoints(w, None)) == [(0.0, False), (25.0, False)]
    assert list(checkpoints(w, 10.0)) == [(0.0, False), (10.0, True), (20.0, True), (25.0, False)]


def run_of(*predictions: Prediction) -> SeedRun:
    # b arrived at 0, started at 100, finished at 150 (wait 100 s, JCT 150 s)
    run = SeedRun(0, list(predictions))
    run.actual = {1: JobRecord(1, "b", 0.0, 100.0, 150.0, 50.0, 50.0, 0.0)}
    return run


def test_figures_score_start_over_the_wait_and_finish_over_the_jct() -> None:
    run = run_of(
        Prediction("forecast", 1, 0.0, False, Span(80.0, 90.0, 110.0), Span(120.0, 135.0, 140.0)),
        Prediction("forecast", 1, 50.0, False, Span(95.0, 100.0, 105.0), Span(145.0, 150.0, 155.0)),
    )
    f = figures([run], "forecast")
    assert (f.start_n, f.start_abs_median, f.start_rel_median) == (2, 5.0, 0.05)
    assert (f.finish_n, f.finish_abs_median, f.finish_rel_median) == (2, 7.5, 0.05)
    assert (f.start_inside, f.finish_inside) == (1.0, 0.5)  # (150 is outside 120-140)


def test_a_started_workflows_start_is_not_scored_and_baselines_have_no_interval() -> None:
    run = run_of(
        Prediction("ema-wait", 1, 120.0, True, Span(100.0, 100.0, 100.0), Span(1.0, 1.0, 1.0))
    )
    f = figures([run], "ema-wait")
    assert f.start_n == 0 and isnan(f.start_abs_median) and f.finish_n == 1
    assert isnan(f.start_inside) and isnan(f.finish_inside)


def test_a_baseline_is_paired_with_the_forecasts_made_at_its_own_times() -> None:
    # b waited 100 s and ran 50 (JCT 150). The shipped forecast was made at 0 and 50,
    # position × rate only at 50 (no rate at 0): its paired figures are the forecast's
    # error at 50 alone, 10 s of the wait and 30 s of the JCT; at 0 it was off by 40 s
    point = Span(120.0, 120.0, 120.0)
    run = run_of(
        Prediction("calibrated", 1, 0.0, False, Span(50.0, 60.0, 70.0), Span(100.0, 110.0, 120.0)),
        Prediction("calibrated", 1, 50.0, False, Span(80.0, 90.0, 95.0), Span(110.0, 120.0, 130.0)),
        Prediction("position×rate", 1, 50.0, False, point, Span(170.0, 170.0, 170.0)),
    )
    ours, rate = figures([run], "calibrated"), figures([run], "position×rate")
    assert (rate.start_n, rate.start_rel_median, rate.finish_rel_median) == (1, 0.2, 20 / 150)
    assert (rate.paired_start_n, rate.paired_start_rel_median) == (1, 0.1)
    assert rate.paired_finish_rel_median == 30 / 150
    # the forecast's own: over both of its forecasts, paired with itself
    assert (ours.start_n, ours.start_rel_median) == (2, 0.25)
    assert (ours.paired_start_n, ours.paired_start_rel_median) == (2, 0.25)
    assert ours.paired_finish_rel_median == ours.finish_rel_median
    # a method that scored no start has no paired start
    none = figures([run], "ema-wait")
    assert none.paired_start_n == 0 and isnan(none.paired_start_rel_median)


@pytest.mark.parametrize("width", [80, 120])
def test_the_table_fits_the_console_and_folds_below_100(width: int) -> None:
    # (issue 80: at 80 columns its rows were 100 wide, cut by the terminal)
    from rich.console import Console

    run = run_of(
        Prediction("forecast", 1, 0.0, False, Span(80.0, 90.0, 110.0), Span(120.0, 135.0, 140.0))
    )
    table = render(report([run]), width)
    out = io.StringIO()
    Console(file=out, width=width).print(table)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= width
    methods = ["calibrated", "forecast", "position×rate", "ema-wait", "declared"]
    assert [line.split()[0] for line in lines if line.split()[:1] in ([m] for m in methods)] == (
        methods  # (each whole, one row each: not cut, "position×r…")
    )
    folded = width < 100
    assert len(table.columns) == (8 if folded else len(MD_COLUMNS))
    # the finish's figures: a column each, or (issue 82: they ran together with the
    # start's under a method column 45 wide) a line under the start's, in their columns
    starts = [i for i, line in enumerate(lines) if line.split()[:2][-1:] == ["start"]]
    starts = [i for i in starts if lines[i].split()[0] in methods]
    assert len(starts) == (len(methods) if folded else 0)
    for i in starts:
        start, finish = lines[i], lines[i + 1]
        assert finish.split()[0] == "finish" and len(finish) == len(start)
        assert finish.index("finish") == start.index("start") < len("position×rate") + 4
    if folded:
        head = next(line for line in lines if line.split()[:1] == ["method"])
        assert head.split() == [
            "method",
            "n",
            "med",
            "s",
            "p90",
            "s",
            "med",
            "p90",
            "in",
            "80",
            "%",
        ]


def test_every_workflow_is_forecast_at_its_arrival() -> None:
    settings = EvalSettings("k8s-batch", "fifo", replays=2)
    settings.options.extra["num_jobs"] = 12
    run = evaluate_seed(settings, 3)
    ours = {p.job_id for p in run.predictions if p.method == "forecast"}
    assert ours == set(run.actual) and len(ours) == 12
    assert all(p.made_at == run.actual[p.job_id].arrival for p in run.predictions)
    # the calibrated forecast is the replays' median, its interval at least as wide
    raw = {p.job_id: p for p in run.predictions if p.method == "forecast"}
    for p in (p for p in run.predictions if p.method == "calibrated"):
        assert p.finish.median == raw[p.job_id].finish.median
        assert p.finish.low <= raw[p.job_id].finish.low or p.finish.low == p.finish.median


def test_a_seeds_checkpoints_are_its_progress() -> None:
    # a seed of a few hundred arrivals takes minutes: its progress is counted in
    # checkpoints, each seed taken to have as many as the one running, so that one seed's
    # line off a terminal gives a share done and a time left
    settings = EvalSettings("k8s-batch", "fifo", replays=1)
    settings.options.extra["num_jobs"] = 6
    said: list[tuple[int, int, str]] = []
    evaluate(settings, [3, 4], lambda done, total, what: said.append((done, total, what)))
    first = len(list(checkpoints(build("k8s-batch", 3, settings.options), None)))
    second = len(list(checkpoints(build("k8s-batch", 4, settings.options), None)))
    assert said[0] == (1, 2 * first, f"seed 3, checkpoint 1 of {first}")
    assert said[first - 1] == (first, 2 * first, f"seed 3, checkpoint {first} of {first}")
    assert said[first] == (second + 1, 2 * second, f"seed 4, checkpoint 1 of {second}")
    assert said[-1] == (2 * second, 2 * second, f"seed 4, checkpoint {second} of {second}")


def test_forecasting_does_not_change_the_run() -> None:
    # `random` draws from its generator at every decision: a replay resetting the run's
    # own scheduler would change which workflows ran when
    settings = EvalSettings("k8s-batch", "random", replays=2)
    settings.options.extra["num_jobs"] = 15
    run = evaluate_seed(settings, 5)
    alone = simulate(build("k8s-batch", 5, settings.options), make_scheduler("random"), 5)
    assert {r.id: (r.first_start, r.finish) for r in alone.records} == {
        i: (r.first_start, r.finish) for i, r in run.actual.items()
    }


def test_the_docs_tables_are_the_reports_table() -> None:
    """The forecasts' accuracy tables (docs/research/forecasts.md) have the columns of the
    report's forecast.md, all of them in its order (they had 11 of its 13: no finish n, no
    finish p90 s), so a reader's own run reads as the page (`make docs-check` fills their
    rows from it)."""
    docs_figures = load_benchmark("docs_figures")
    page = (Path(__file__).resolve().parents[1] / "docs" / "research" / "forecasts.md").read_text()
    tables = [m for m in docs_figures.TABLE.finditer(page) if "<!-- table forecast-" in m[1]]
    assert len(tables) >= 7
    width = len(docs_figures._cells(MD_HEAD))
    for m in tables:
        head, rule, *rows = m[2].splitlines()
        assert head == MD_HEAD, m[1]
        assert len(docs_figures._cells(rule)) == width
        assert all(len(docs_figures._cells(row)) == width for row in rows), m[1]


def test_the_command_prints_the_table_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["forecast", "evaluate", "-w", "k8s-batch", "--jobs-count", "10", "-s", "fifo"]
    table = runner.invoke(app, [*args, "-m", "2", "--seed", "1"], env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert "position×rate" in table.output and "k8s-batch, fifo, seed 1:" in table.output
    # (the summary sentence, 249 wide, wrapped at the console's width: issue 80)
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    assert "refreshes of 2 replays" in " ".join(table.stdout.split())
    out = runner.invoke(app, [*args, "-m", "2", "--seed", "1", "--json", "--out", str(tmp_path)])
    data = json.loads(out.stdout)
    assert json.loads((tmp_path / "forecast.json").read_text()) == data
    md = (tmp_path / "forecast.md").read_text().splitlines()
    assert md[0] == MD_HEAD and md[2].startswith("| calibrated | ") and len(md) == 7
    assert set(data["figures"]) == {
        "calibrated",
        "forecast",
        "position×rate",
        "ema-wait",
        "declared",
    }
    assert data["figures"]["forecast"]["finish_n"] == 10
    # bad values are one sentence and exit 1, before any run (the README's promise)
    readme = tmp_path / "README.md"
    readme.write_text("a file\n")
    for flag, said in [
        (["--arrivals", "sometimes"], "--arrivals is one of none, poisson, queues or oracle"),
        (["--durations", "guessed"], "--durations is model or measured"),
        (["-m", "0"], "--replays (-m) is a whole number of at least 1, not 0"),
        (["--every", "0"], "--every is a number of seconds of at least 1"),
        (["--start-quantile", "0.95"], "--start-quantile is a quantile from 0.1 to 0.9"),
        (["--out", str(readme)], "it is a file, not a directory"),
    ]:
        bad = runner.invoke(app, [*args, *flag])
        assert bad.exit_code == 1, bad.output
        assert said in bad.output and "Usage" not in bad.output and "Traceback" not in bad.output


def test_the_groups_help_says_the_file_shortcut_and_whole_first_lines() -> None:
    # its commands' lines were cut ("... during simulated runs,...") and FILE unsaid
    shown = CliRunner().invoke(app, ["forecast", "--help"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    assert "idlegate forecast FILE is short for idlegate forecast what-if FILE." in shown.output
    commands = shown.output.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in commands] == ["evaluate", "what-if"]
    assert all(line.endswith(".") and not line.endswith("...") for line in commands)


def test_the_footer_says_seed_for_one_and_seeds_for_more() -> None:
    assert seeds_text([100]) == "seed 100"
    assert seeds_text([100, 101, 102]) == "seeds 100, 101, 102"


def test_queues_arrivals_need_a_run_with_queues() -> None:
    # as the operator refuses --forecast-arrivals queues without --queues (not run as poisson)
    runner = CliRunner()
    args = ["forecast", "evaluate", "--jobs-count", "5", "-m", "2", "--seed", "1"]
    bad = runner.invoke(app, [*args, "-w", "k8s-batch", "--arrivals", "queues"])
    assert bad.exit_code == 1 and "Traceback" not in bad.output and "Usage" not in bad.output
    assert bad.output == (
        "Error: --arrivals queues invents a forecast's arrivals per queue, but the workload "
        "k8s-batch has no queues; give it --queues FILE, or choose poisson (arrivals at the "
        "pool's rate) or none\n"
    )
    good = runner.invoke(app, [*args, "-w", "teams", "--arrivals", "queues"])
    assert good.exit_code == 0, good.output
    said = " ".join(good.output.split())  # (the footer wraps at the console's width)
    assert "teams, default, seed 1: " in said and "arrivals queues" in said


class TwoSeconds:
    """Every task lasts 2 s (its estimate says 5)."""

    def sample(self, stage: int, job_executors: int, first: bool, moved: bool, u: object) -> float:
        return 2.0


def test_the_measured_view_draws_what_ended_else_the_estimate() -> None:
    jobs = (
        JobArrival(0.0, "a", chain(5.0, tasks=3), TwoSeconds()),
        JobArrival(1.0, "b", chain(5.0), TwoSeconds()),
    )
    w = Workload("two", jobs, 1, Fidelity(moving_delay=0.0))
    engine = Engine.for_workload(w, make_scheduler("fifo"), 0, record_tasks=True)
    engine.run(4.5)  # (a's first two tasks ended at 2 and 4, its third runs)
    view = measured_view(engine.cluster, engine.task_log or [])
    a, b = view.jobs
    assert isinstance(a.payload, MeasuredDurations) and isinstance(b.payload, MeasuredDurations)
    assert (a.payload.measured, b.payload.measured) == ([[2.0, 2.0]], [[]])
    # a's third task ends at 6 (a draw of 2 s), b then takes its estimate: 6 + 5
    f = forecast(view, make_scheduler("fifo"), replays=3)
    assert f.of(1).finish == Span(11.0, 11.0, 11.0)  # type: ignore[union-attr]
    assert engine.cluster.jobs[0].payload is jobs[0].durations  # (the run's own untouched)


def test_a_queues_rate_is_gamma_poisson_with_half_its_share_as_prior() -> None:
    # prior: half of 10 executors busy with workflows of 100 s of work: 0.05 a second;
    # a flood (both at t = 0) counts no arrival after the first: 2 / (2 / 0.05 + 100)
    assert queue_rate([(0.0, 100.0), (0.0, 100.0)], 100.0, 10.0) == pytest.approx(2 / 140)
    # two arrivals after the first over 20 s: (2 + 2) / (2 / 0.05 + 20)
    stream = [(0.0, 100.0), (10.0, 100.0), (20.0, 100.0)]
    assert queue_rate(stream, 20.0, 10.0) == pytest.approx(4 / 60)
    assert queue_rate([], 20.0, 10.0) == 0.0


def test_a_queues_share_is_its_nominal_quota_over_all() -> None:
    specs = (
        QueueSpec("a", {"cpu": 0, "pods": 10_000}),
        QueueSpec("b", {"pods": 30_000}),
    )
    assert queue_share(specs, 0) == 0.25 and queue_share(specs, 1) == 0.75
    assert queue_share((QueueSpec("a"), QueueSpec("b")), 1) == 0.5


def test_a_stream_silent_for_long_has_likely_stopped() -> None:
    # P = (K+1)E / (1 + K E), E = (b / (b + (1 + 1/K) g))^a, K = 50
    assert still_sending(4.0, 100.0, 0.0) == 1.0  # (it just sent)
    e = (100.0 / (100.0 + 30.0 * (1 + 1 / STREAM_SENDS))) ** 4.0
    assert still_sending(4.0, 100.0, 30.0) == pytest.approx(51 * e / (1 + 50 * e))
    # a rate known well (a = 1000 arrivals over b = 10,000 s: 0.1 a second): a half
    # chance where E = 1/(K+1), near rate × silence = ln K; ten gaps of it: all but over
    half = log(STREAM_SENDS + 1) / 0.1 / (1 + 1 / STREAM_SENDS)
    assert still_sending(1000.0, 10_000.0, half) == pytest.approx(0.5, abs=0.01)
    assert still_sending(1000.0, 10_000.0, 100.0) < 0.01
    assert still_sending(0.0, 100.0, 0.0) == 0.0  # (no stream)


def test_a_stopped_stream_sends_nothing_and_a_live_one_stops_at_its_hazard() -> None:
    rng = np.random.default_rng(3)
    assert stream_lasts(0.0, 0.1, rng) == 0.0
    lasts = [stream_lasts(1.0, 0.1, rng) for _ in range(4000)]
    # memoryless at hazard rate / K: a mean of K gaps of 10 s
    assert np.mean(lasts) == pytest.approx(STREAM_SENDS / 0.1, rel=0.05)


def test_queue_futures_draw_a_silent_queue_as_stopped_as_often_as_likely() -> None:
    # Each queue sends in a future with the model's own chance, from both sides: it still
    # sends with P = `alive` (`still_sending`), and then, at its rate r and a stop hazard
    # of r / K, its first arrival comes before the stream stops and within the horizon H
    # with P = K / (K + 1) (1 - exp(-r (1 + 1/K) H)).
    built = build("teams", 0, WorkloadOptions(num_jobs=3))
    engine = Engine.for_workload(built, make_scheduler("fifo"), 0)
    engine.run(built.jobs[-1].time)
    cluster = engine.cluster
    seen = list(cluster.jobs)
    cluster.advance(cluster.now + 3600.0)  # (an hour on, nothing come since)
    assert cluster.admission is not None
    specs = cluster.admission.queues
    pool = effective_executors(cluster, [j.dag for j in seen])
    samples, horizon, k = 2000, 5000.0, STREAM_SENDS
    futures = queue_futures(cluster, seen, horizon, samples, np.random.default_rng(1))
    for q, spec in enumerate(specs):
        works = [(j.arrival, j.dag.total_work) for j in seen if j.queue == q]
        executors = queue_share(specs, q) * pool
        silence = cluster.now - max(t for t, _ in works)
        alive = still_sending(*queue_posterior(works, executors), silence)
        rate = queue_rate(works, cluster.now, executors)
        likely = alive * k / (k + 1) * (1 - np.exp(-rate * (1 + 1 / k) * horizon))
        sent = np.mean([any(a.queue == spec.name for a in f.arrivals) for f in futures])
        # (four standard errors of `samples` draws)
        assert abs(sent - likely) <= 4 * np.sqrt(likely * (1 - likely) / samples) + 1e-9
        # (the flood came at once and no more since: its rate's prior gave it an hour's
        # silence at 93 % of futures with arrivals within 5,000 s; now one in twenty)
        assert alive < 0.1


def test_queue_futures_send_each_queues_copies_to_it() -> None:
    built = build("teams", 0, WorkloadOptions(num_jobs=3))
    engine = Engine.for_workload(built, make_scheduler("fifo"), 0)
    engine.run(built.jobs[-1].time)
    cluster = engine.cluster
    assert cluster.admission is not None
    names = [q.name for q in cluster.admission.queues]
    futures = queue_futures(cluster, cluster.jobs, 5000.0, 3, np.random.default_rng(1))
    again = queue_futures(cluster, cluster.jobs, 5000.0, 3, np.random.default_rng(1))
    assert [f.arrivals for f in futures] == [f.arrivals for f in again]
    arrivals = [a for f in futures for a in f.arrivals]
    assert arrivals and all(cluster.now < a.time <= cluster.now + 5000.0 for a in arrivals)
    assert {a.queue for a in arrivals} <= set(names)
    for f in futures:
        assert [a.time for a in f.arrivals] == sorted(a.time for a in f.arrivals)
        for a in f.arrivals:  # (a copy of a workflow of the queue it joins)
            assert a.name.startswith(f"{a.queue}-")


def test_the_start_quantile_follows_the_arrivals_unless_set() -> None:
    # as the operator's pool takes it: 0.75 where the replays invent no arrivals, the
    # median where they do; --start-quantile overrides it, and the JSON and footer say it
    runner = CliRunner()
    args = ["forecast", "evaluate", "-w", "k8s-batch", "--jobs-count", "10", "-s", "fifo"]
    args += ["-m", "2", "--seed", "1"]
    plain = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert plain["start_quantile"] == 0.75
    poisson = json.loads(runner.invoke(app, [*args, "--json", "--arrivals", "poisson"]).stdout)
    assert poisson["start_quantile"] == 0.5
    median = json.loads(runner.invoke(app, [*args, "--json", "--start-quantile", "0.5"]).stdout)
    assert median["start_quantile"] == 0.5
    assert median["figures"]["forecast"]["finish_n"] == plain["figures"]["forecast"]["finish_n"]
    table = " ".join(runner.invoke(app, args).output.split())  # (wrapped at the width)
    assert "durations model, a waiting workflow's start at their 0.75 quantile; start" in table
    table = " ".join(runner.invoke(app, [*args, "--start-quantile", "0.5"]).output.split())
    assert "durations model, a waiting workflow's start at their median; start" in table
    refused = runner.invoke(app, [*args, "--start-quantile", "0.95"])
    assert refused.exit_code == 1 and "--start-quantile is a quantile from 0.1 to 0.9" in (
        refused.output
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("kind: ConfigMap\ndata: {}\n", "it is a ConfigMap, not a DagWorkflow"),
        ("kind: ExecutorPool\nspec: {size: 2}\n", "it is an ExecutorPool, not a DagWorkflow"),
        ("not: [valid\n", "it is not YAML or JSON"),
        ("kind: DagWorkflow\nspec: {stages: []}\n", "spec: the workflow has no stages"),
        ("- a list\n", "it is not a DagWorkflow (kind: DagWorkflow, with a spec)"),
    ],
)
def test_what_if_says_what_is_wrong_with_the_file_before_asking_the_operator(
    tmp_path, text: str, said: str
) -> None:
    """Nothing listens at the URL: each file is refused by itself, in one sentence naming
    it, not with "cannot reach the operator" (which a good file gets)."""
    file = tmp_path / "cm.yaml"
    file.write_text(text)
    url = "http://127.0.0.1:9"  # (discard: nothing answers there)
    bad = CliRunner().invoke(app, ["forecast", str(file), "--url", url])
    assert bad.exit_code == 1, bad.output
    assert f"Error: {file}: {said}" in bad.output, bad.output
    assert "cannot reach" not in bad.output and "Traceback" not in bad.output
    file.write_text("spec: {stages: [{name: a, tasks: 1, taskDurationSeconds: 5}]}\n")
    good = CliRunner().invoke(app, ["forecast", str(file), "--url", url])
    assert good.exit_code == 1 and "cannot reach the operator" in good.output, good.output


def test_a_refresh_runs_within_the_operators_budget_of_events(monkeypatch) -> None:
    """What is measured is what runs (issue 96): each refresh's replays get the operator's
    budget of events by default, none with ``budget=None`` (``--budget 0``); the declared
    plan stays one replay."""
    from idlegate.evaluation import forecast_eval
    from idlegate.sim.forecast import BUDGET

    given: list[object] = []
    real = forecast_eval.forecast

    def noted(cluster, scheduler, **kw):
        if kw.get("waves", True):
            given.append(kw.get("budget"))
        return real(cluster, scheduler, **kw)

    monkeypatch.setattr(forecast_eval, "forecast", noted)
    options = WorkloadOptions(num_jobs=6)
    evaluate_seed(EvalSettings("k8s-batch", "fifo", options, replays=2), 1)
    assert given and set(given) == {BUDGET}
    given.clear()
    evaluate_seed(EvalSettings("k8s-batch", "fifo", options, replays=2, budget=None), 1)
    assert given and set(given) == {None}
    runner = CliRunner()
    args = ["forecast", "evaluate", "--jobs-count", "5", "-m", "2", "--seed", "1", "-s", "fifo"]
    bad = runner.invoke(app, [*args, "--budget", "-1"])
    assert bad.exit_code == 1 and bad.output.startswith("Error: --budget is a number of events")
    for flag, budget in ((["--budget", "0"], None), ([], BUDGET)):
        out = runner.invoke(app, [*args, *flag, "--json"])
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["budget"] == budget
