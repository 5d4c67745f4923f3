"""benchmarks/brain.py: the self-tuning scheduler against every fixed candidate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from idlegate.evaluation.comparison import WorkloadOptions
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from tests.helpers import load_benchmark

pytest.importorskip(
    "idlegate.policy.portfolio", reason="the portfolio scheduler the benchmark evaluates"
)

SMALL_BRAIN = (
    "portfolio?candidates=fifo+srpt+fair+analytic&tune=false&window=20&min_window=5&every=5"
)
"""A portfolio of three rules and the idle rule that replays every 5 finished workflows: quick, and it
has rounds to report on a short stream."""


@pytest.fixture(scope="module")
def brain():
    return load_benchmark("brain")


@pytest.fixture(scope="module")
def runs(brain):
    # (the module brain.py imports its runs from, beside it)
    return sys.modules["brain_runs"]


def test_a_run_pairs_every_candidate_and_reports_the_shift(brain, tmp_path: Path) -> None:
    out = tmp_path / "brain.json"
    argv = ["--workloads", "synthetic-0.6,shift", "--seeds", "2", "--jobs-count", "40"]
    argv += ["-j", "1", "--brain", SMALL_BRAIN, "--windows", "3", "--json", str(out)]
    argv += ["--tpch-dir", str(tmp_path / "no-traces")]
    checks = brain.main(argv)
    data = json.loads(out.read_text())
    assert set(data["cases"]) == {"synthetic-0.6", "shift"}
    ranks = data["windows"]["synthetic-0.6"]  # the rounds on full windows of 20 workflows
    assert ranks["rounds"] > 0 and 0 <= ranks["ahead_1pc"] <= ranks["ahead"] <= 1
    parts = data["losses"]["synthetic-0.6"]  # every job is counted once, the first ones cold
    shares = [parts[f"{k} jobs"] for k in ("cold start", "the best", "another")]
    assert sum(shares) == pytest.approx(1) and shares[0] > 0
    for case in data["cases"].values():
        labels = set(case["mean_jct"])
        # the portfolio's fixed candidates, the analytic rule over the best of them, the brain
        assert {"brain", "fifo", "srpt", "fair"} <= labels
        assert any(lab.startswith("analytic?") for lab in labels)
        assert all(len(v) == 2 for v in case["mean_jct"].values())
    shift = data["cases"]["shift"]
    assert shift["options"]["first"] == "tpch-like"  # no traces: TPC-H-like DAGs first
    assert any(shift["brain_rounds"].values())
    assert len(data["shift"]["windows"]) == 3
    assert set(data["shift"]["adaptation"]["minutes_to_good"]) == {"1000", "1001"}
    limits = {c.target.split(" (")[0]: c.limit for c in checks}
    assert limits == {  # a stream of 40 workflows is a short one: its mean and its worst seed
        "synthetic-0.6: brain vs best fixed": brain.SHORT_TARGET,
        "synthetic-0.6: worst seed vs best fixed": brain.SEED_TARGET,
        "shift: brain vs best fixed": brain.SHIFT_TARGET,
    }
    for c in checks:
        assert c.passed == (c.value <= c.limit)


def _run(brain, start: str, rounds: list[tuple[float, float, str]], end: float):
    return brain.Run(np.zeros(1), np.zeros(1), None, rounds, start, end, 0.0)


def test_adaptation_counts_from_the_switch_to_the_first_good_candidate(brain) -> None:
    run = _run(brain, "fair", [(50, 60, "fair"), (90, 100, "fifo"), (140, 150, "srpt")], 400)
    assert brain.timeline(run) == [
        (0.0, 60, "fair"),
        (60, 100, "fair"),
        (100, 150, "fifo"),
        (150, 400, "srpt"),
    ]
    # switch at 70 s: fifo from 100 s (30 s = 0.5 min later), srpt from 150 s
    assert brain._first_following(run, 70.0, {"fifo", "srpt"}) == pytest.approx(0.5)
    assert brain._first_following(run, 70.0, {"srpt"}) == pytest.approx(80 / 60)
    # already following a good candidate at the switch: adapted at once
    assert brain._first_following(run, 120.0, {"fifo"}) == 0.0
    assert brain._first_following(run, 70.0, {"sjf-cp"}) is None
    # for good: from the start of the last stretch of good candidates to the end
    assert brain._settled(run, 70.0, {"fifo", "srpt"}) == pytest.approx(0.5)
    assert brain._settled(run, 70.0, {"fair", "srpt"}) == pytest.approx(80 / 60)
    assert brain._settled(run, 70.0, {"fair", "fifo"}) is None
    assert brain._switches(run) == 2
    assert brain.followed_longest({0: run}) == ("srpt", pytest.approx(250 / 400))


def test_long_streams_have_the_stated_length(runs) -> None:
    from idlegate.evaluation.comparison import WorkloadOptions
    from idlegate.sim.workloads import workload_config

    stream = runs.long_options("tpch-like", WorkloadOptions(extra={"num_stream": 5}), 1000)
    assert stream.extra["num_stream"] == 999  # 1 at t = 0 and 999 streamed
    assert runs.long_options("follow", WorkloadOptions(), 300).extra["num_jobs"] == 300
    pods = runs.long_options("k8s-batch", WorkloadOptions(), 1000).extra["num_jobs"]
    gap = workload_config("k8s-batch").mean_gap()
    assert abs(pods * gap - 24 * 3600) <= gap  # 24 hours of arrivals


def test_the_shift_starts_with_tpch_from_the_given_traces(runs, tmp_path: Path) -> None:
    (tmp_path / "2g").mkdir()
    (tmp_path / "2g" / "q1.json").write_text("{}")
    extra = runs.shift_case(tmp_path, 10, (1,)).options.extra
    assert extra["first"] == "tpch" and f"tpch_dir={tmp_path}" in extra["first_options"]
    assert (extra["first_jobs"], extra["second_jobs"]) == (5, 5)
    missing = runs.shift_case(tmp_path / "none", 10, (1,)).options.extra
    assert missing["first"] == "tpch-like"


def test_a_brain_runs_account_is_what_the_portfolio_followed(brain, runs) -> None:
    options = WorkloadOptions(extra={"num_jobs": 60})
    case = brain.Case("k8s-batch-0.7", "k8s-batch", "k8s-batch", options, (3,))
    run = runs.run_task(runs.Task(case, "brain", SMALL_BRAIN, 3))
    portfolio = make_scheduler(SMALL_BRAIN)
    simulate(runs.build("k8s-batch", 3, options), portfolio, seed=3)
    assert len(run.rounds) > 1  # (a run that switches, so the account has stretches)
    assert run.followed == portfolio.followed_from()
    assert brain.Run(run.jct, run.arrival, None, [], None, 1.0, 0.0).followed == []  # a rule's


def test_window_lags_count_only_full_windows_that_scored_the_best(brain) -> None:
    def choice(workflows: int, scores: dict[str, float]) -> dict:
        return {"workflows": workflows, "scores": scores}

    run = _run(brain, "fair", [], 10.0)
    run.choices = [
        choice(40, {"fair": 12.0, "srpt": 10.0}),  # a window not yet full: not counted
        choice(200, {"fair": 10.0, "srpt": 11.0}),  # the best scored best
        choice(200, {"fair": 10.5, "srpt": 10.0, "fifo": float("inf")}),  # 5 % behind
        choice(250, {"srpt": 9.0}),  # the best left out of the round: not counted
    ]
    assert brain.window_lags(run, "fair", 200) == pytest.approx([0.0, 0.05])


def test_brain_only_pairs_a_rule_against_a_run_before_seed_by_seed(brain) -> None:
    only = load_benchmark("brain_only")  # (after `brain`: it imports the modules beside it)

    def run(mean: float, cpu: list[float]) -> dict[str, object]:
        return {"mean": mean, "followed": [], "why": [], "round_cpu": cpu}

    before = {"a": {"1": run(100.0, [2.0, 2.0]), "2": run(50.0, [1.0])}}
    after = {"a": {"1": run(101.0, [1.0]), "2": run(49.0, [0.5])}, "b": {"1": run(9.0, [])}}
    lines = only.paired(before, after)
    assert lines[0] == (
        "a: mean JCT -0.50 % ± 1.50 over 2 seeds (per seed +1.00, -2.00); "
        "rounds' CPU 5.0 s -> 1.5 s"
    )
    assert lines[1] == (
        "all: mean JCT -0.50 % ± 1.50 over 2 runs, the worst +1.00 % (a seed 1); "
        "rounds' CPU 5.0 s -> 1.5 s"
    )
    assert len(lines) == 2  # ("b" has no run before: not paired)
