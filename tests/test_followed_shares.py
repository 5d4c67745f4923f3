"""What a portfolio row followed, in compare's, evaluate's and the demo's reports: the share
of the run per candidate, mean over seeds, in the printed table, the JSON and markdown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.evaluation.compare_report import followed_lines, to_markdown
from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions, run_comparison, run_one
from idlegate.evaluation.console import print_compare
from idlegate.policy.account import followed_line, mean_shares, percents, shares

BRAIN = "portfolio?candidates=fifo+srpt+fair&min_window=5&every=5&confidence=0&prior=false"
"""A portfolio with rounds early enough that a 30-job run follows several candidates."""
OPTS = WorkloadOptions(num_jobs=30)


def test_shares_are_fractions_of_the_run_largest_first():
    assert shares({"fair": 30.0, "srpt": 90.0, "fifo": 0.0}) == {"srpt": 0.75, "fair": 0.25}
    assert shares({}) == {} and shares({"fifo": 0.0}) == {}


def test_mean_shares_count_a_candidate_a_seed_never_followed_as_zero():
    runs = [{"srpt": 0.5, "fair": 0.5}, {"srpt": 1.0}]
    assert mean_shares(runs) == {"srpt": 0.75, "fair": 0.25}
    assert mean_shares([]) == {}


def test_printed_percents_add_up_to_100_by_the_largest_remainders():
    # each rounds to 33: the point left goes to the largest remainder, the first of a tie
    assert percents({"a": 0.335, "b": 0.335, "c": 0.33}) == {"a": 34, "b": 33, "c": 33}
    assert percents({"a": 0.996, "b": 0.004}) == {"a": 100, "b": 0}
    assert percents({"srpt": 0.714, "fair": 0.216, "learned:default": 0.07}) == {
        "srpt": 71,
        "fair": 22,
        "learned:default": 7,
    }


def test_the_followed_line_says_each_share_and_over_how_many_seeds():
    fractions = {"srpt": 0.714, "fair": 0.216, "learned:default": 0.07}
    assert followed_line("portfolio", fractions, runs=3) == (
        "portfolio followed srpt 71 %, fair 22 %, learned:default 7 % of the run "
        "(mean over 3 seeds)"
    )
    assert followed_line("brain", {"fifo": 1.0}) == "brain followed fifo 100 % of the run"
    # followed briefly: not "0 %" (the shares still add up to 100)
    assert followed_line("default", {"srpt": 0.998, "learned:default": 0.002}) == (
        "default followed srpt 100 %, learned:default < 1 % of the run"
    )


@pytest.fixture(scope="module")
def cmp():
    """fifo and a portfolio on 2 seeds, run in 2 worker processes (the shares come back
    from them as plain data)."""
    config = CompareConfig(
        workload="synthetic",
        schedulers=("fifo", f"brain={BRAIN}"),
        seeds=2,
        first_seed=3,
        options=OPTS,
        jobs=2,
    )
    return run_comparison(config)


def _percent_sum(line: str) -> int:
    return sum(int(p) for p in re.findall(r" (\d+) %", line))


def test_a_portfolio_row_has_its_shares_per_seed_and_their_mean(cmp):
    brain = cmp["brain"]
    assert len(brain.shares_per_seed) == 2
    for seed, per_seed in zip((3, 4), brain.shares_per_seed, strict=True):
        assert sum(per_seed.values()) == pytest.approx(1.0)
        assert per_seed == run_one("synthetic", BRAIN, seed, OPTS).shares  # as one run
    assert len(brain.shares) >= 2  # (the rounds switched: the test says something)
    assert sum(brain.shares.values()) == pytest.approx(1.0)
    assert cmp["fifo"].shares is None and cmp["fifo"].shares_per_seed == ()


def test_the_shares_are_in_the_json_the_table_and_the_markdown(cmp):
    rows = cmp.to_dict(include_jct=False)["schedulers"]
    assert rows["brain"]["followed"] == pytest.approx(cmp["brain"].shares)
    assert len(rows["brain"]["followed_per_seed"]) == 2
    assert "followed" not in rows["fifo"]
    [line] = followed_lines(cmp)
    assert line.startswith("brain followed ") and line.endswith("(mean over 2 seeds)")
    assert _percent_sum(line) == 100
    for name in cmp["brain"].shares:
        assert f" {name} " in line
    console = Console(record=True, width=200)
    print_compare(console, cmp, {}, 1.0)
    assert line in console.export_text()
    assert f"- {line}" in to_markdown(cmp)


def test_compare_json_and_evaluate_reports_carry_the_shares(tmp_path: Path):
    runner = CliRunner()
    args = ["-w", "synthetic", "--jobs-count", "30", "--seeds", "2", "--jobs", "1"]
    r = runner.invoke(app, ["compare", *args, "--schedulers", f"fifo,brain={BRAIN}", "--json"])
    assert r.exit_code == 0, r.output
    followed = json.loads(r.stdout)["schedulers"]["brain"]["followed"]
    assert sum(followed.values()) == pytest.approx(1.0)

    r = runner.invoke(
        app,
        [
            "evaluate",
            "--schedulers",
            f"brain={BRAIN}",
            "--workloads",
            "synthetic-0.6",
            "--seeds",
            "2",
            "--jobs",
            "1",
            "--no-sweep",
            "--out",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    [line] = [x for x in r.stdout.splitlines() if x.startswith("brain followed ")]
    assert _percent_sum(line) == 100
    case = json.loads((tmp_path / "evaluation.json").read_text())["workloads"][0]
    assert sum(case["schedulers"]["brain"]["followed"].values()) == pytest.approx(1.0)
    assert f"- {line}" in (tmp_path / "evaluation.md").read_text()
    assert f"- {line}" in (tmp_path / case["key"] / "compare.md").read_text()
