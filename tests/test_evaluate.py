"""`idlegate evaluate`: scheduler specs, the paired suite, headline arithmetic, Fig. 6, CLI."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import (
    CompareConfig,
    WorkloadOptions,
    run_comparison,
)
from idlegate.evaluation.evaluation_report import write_evaluation
from idlegate.evaluation.headlines import HEADLINES, IdleUse, best_baseline, compute_headlines
from idlegate.evaluation.running import run_evaluation
from idlegate.evaluation.suites import (
    BASELINES,
    DEMO_EXECUTORS,
    DEMO_LOAD,
    EvaluateConfig,
    check_model,
    suite_cases,
)
from idlegate.evaluation.sweep import SweepConfig, run_idle_sweep
from idlegate.evaluation.training_log import read_training_log
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.sim.metrics import paired_relative_change, t_quantile

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

runner = CliRunner()

TRAIN_LOG = """iteration,wall_seconds,mean_return,val_avg_jct,ref_fifo,ref_fair
0,1.0,-5.0,40.5,50,45
1,2.0,-4.0,,50,45
2,3.0,-3.5,38.25,50,45
3,4.0,-3.0,bad,50,45
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Two tiny untrained policies, exported: with the idle head and without."""
    from idlegate.policy.actions import ActionConfig
    from idlegate.policy.model import PolicyNet
    from idlegate.policy.model_config import ModelConfig
    from idlegate.policy.onnx_export import export_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = {}
    root = tmp_path_factory.mktemp("models")
    configs = {
        "learned": ModelConfig(mp_steps=2),
        "learned-no-idle": ModelConfig(mp_steps=2, actions=ActionConfig(idle_head=False)),
    }
    try:
        for i, (label, config) in enumerate(configs.items()):
            torch.manual_seed(i)
            out[label] = root / f"{label}.onnx"
            export_model(PolicyNet(config).eval(), out[label])
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.fixture(scope="module")
def evaluation(models, tmp_path_factory):
    """The quick suite on one small workload, 2 seeds, with the sweep and a training log."""
    root = tmp_path_factory.mktemp("eval")
    log = root / "train_log.csv"
    log.write_text(TRAIN_LOG)
    config = EvaluateConfig(
        models=tuple(f"{k}={v}" for k, v in models.items()),
        suite="quick",
        seeds=2,
        workloads=("synthetic-0.8",),
        training_log=log,
    )
    calls: list[tuple[int, int, str]] = []
    ev = run_evaluation(config, lambda *a: calls.append(a))
    paths = write_evaluation(ev, root / "out")
    return ev, paths, root / "out", calls


# ---------------------------------------------------------------------------------------
# scheduler specs


def test_learned_spec_builds_an_onnx_policy(models):
    path = models["learned"]
    policy = make_scheduler(f"learned:{path}")
    assert type(policy).__name__ == "StarvationGuard"  # policy.guard, around the ONNX policy
    assert type(policy.inner).__name__ == "OnnxPolicy"
    assert policy.name == path.stem
    assert make_scheduler(f"learned:{path}", name="mine").name == "mine"
    assert make_scheduler("analytic:fair").name == "analytic+fair"
    assert make_scheduler("fair").name == "fair"


@pytest.mark.parametrize(
    ("spec", "params", "needle"),
    [
        ("learned:", {}, "needs a path"),
        ("learned:/no/such/model.onnx", {}, "does not exist"),
        ("learned:{learned}", {"colour": 1}, "no parameter 'colour'"),
        ("analytic:", {}, "needs a base"),
        ("analytic:fair", {"base": "fifo"}, "drop base"),
        ("bogus:x", {}, "unknown scheduler 'bogus' in 'bogus:x'; valid names are fifo"),
    ],
)
def test_bad_specs_raise_idlegate_errors(models, spec, params, needle):
    with pytest.raises(IdlegateError, match=needle):
        make_scheduler(spec.format(learned=models["learned"]), **params)


def test_compare_accepts_learned_specs_and_labels(models):
    learned = f"learned:{models['learned']}"
    config = CompareConfig(
        workload="synthetic",
        schedulers=("fair", learned, f"mine={learned}"),
        seeds=2,
        first_seed=1000,
        options=WorkloadOptions(num_jobs=15, num_executors=2),
    )
    cmp = run_comparison(config)
    assert [r.name for r in cmp.results] == ["fair", learned, "mine"]
    # the same policy under two names: identical runs
    assert [m.avg_jct for m in cmp[learned].runs] == [m.avg_jct for m in cmp["mine"].runs]
    with pytest.raises(IdlegateError, match="listed twice"):
        CompareConfig(workload="synthetic", schedulers="fair,fair=fifo")


# ---------------------------------------------------------------------------------------
# the suite


def test_evaluation_writes_every_report(evaluation):
    _, paths, out, _ = evaluation
    for rel in (
        "evaluation.md",
        "evaluation.json",
        "idle_sweep.png",
        "training_curve.png",
        "synthetic-0.8/compare.json",
        "synthetic-0.8/compare.md",
        "synthetic-0.8/jct_cdf.png",
    ):
        assert (out / rel).is_file(), rel
    for png in out.rglob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(paths.values()) == {p for p in out.rglob("*") if p.is_file()}


def test_table_rows_and_seeds(evaluation):
    ev, _, out, calls = evaluation
    (case,) = ev.cases
    cmp = case.comparison
    expected = ["learned", "learned-no-idle", *(b for b, _ in BASELINES)]
    assert [r.name for r in cmp.results] == expected
    assert cmp.config.seed_list == (1000, 1001)
    assert cmp.config.baseline_name == "fair"
    md = (out / "evaluation.md").read_text()
    for name in expected:
        assert f"| {name} |" in md or f"| **{name}** |" in md
    assert "JCT / bound" in md and "avg JCT vs fair" in md
    # progress: one call per run, counted over the whole evaluation
    assert [c[0] for c in calls] == list(range(1, len(calls) + 1))
    assert {c[1] for c in calls} == {len(calls)}


def test_headlines_are_the_paired_changes(evaluation):
    ev, _, out, _ = evaluation
    cmp = ev.cases[0].comparison

    def avg(name):
        return [m.avg_jct for m in cmp[name].runs]

    heads = ev.cases[0].headlines
    # no learned-no-cp, lookahead or lookahead-base model: those headlines are absent
    assert set(heads) == {"learned_vs_best", "idle_vs_no_idle"}
    baselines = [b for b, _ in BASELINES]
    best = min(baselines, key=lambda b: cmp[b].summary["avg_jct"].mean)
    assert heads["learned_vs_best"].reference == best
    assert heads["learned_vs_best"].estimate == paired_relative_change(avg("learned"), avg(best))
    assert heads["idle_vs_no_idle"].estimate == paired_relative_change(
        avg("learned"), avg("learned-no-idle")
    )
    data = json.loads((out / "evaluation.json").read_text())
    (w,) = data["workloads"]
    lvb = w["headlines"]["learned_vs_best"]
    assert lvb["mean"] == pytest.approx(heads["learned_vs_best"].estimate.mean)
    assert lvb["reference"] == best
    assert f"(vs {best})" in (out / "evaluation.md").read_text()
    assert data["config"]["seeds"] == [1000, 1001]
    assert data["models"]["learned"]["idle_head"] is True
    assert data["models"]["learned-no-idle"]["idle_head"] is False


def test_headline_arithmetic_known_answer():
    heads = compute_headlines(
        {
            "learned": [8.0, 9.0],
            "fair": [10.0, 10.0],
            "fifo": [12.0, 14.0],
            "learned-no-idle": [10.0, 9.0],
            "learned-no-cp": [8.8, 9.0],
            "lookahead": [9.0, 9.0],
            "lookahead-base": [10.0, 9.0],
        }
    )
    # the best baseline is fair (lowest mean); mean of ratios minus one;
    # CI = t(0.975, 1) * sd / sqrt(2)
    t = t_quantile(0.975, 1)
    assert t == pytest.approx(12.7062047, abs=1e-6)
    lvb = heads["learned_vs_best"]
    assert lvb.reference == "fair"
    assert lvb.estimate.mean == pytest.approx(-0.15)
    assert lvb.estimate.half_width == pytest.approx(t * math.sqrt(0.005) / math.sqrt(2))
    assert heads["idle_vs_no_idle"].estimate.mean == pytest.approx((0.8 + 1.0) / 2 - 1)
    assert heads["no_cp_vs_full"].estimate.mean == pytest.approx((1.1 + 1.0) / 2 - 1)
    assert heads["lookahead_vs_base"].estimate.mean == pytest.approx((0.9 + 1.0) / 2 - 1)
    assert heads["lookahead_vs_base"].reference == "lookahead-base"
    # only the given labels count as baselines; none present: no "vs best" headline
    assert compute_headlines({"learned": [8.0], "fifo": [9.0]}, baselines=["fair"]) == {}
    assert compute_headlines({"learned": [1.0]}) == {}
    assert (
        best_baseline({"fair": [3.0, 7.0], "srpt": [4.5, 4.5], "x": [1.0]}, ["fair", "srpt"])
        == "srpt"
    )


def test_headline_targets_by_family():
    heads = {h.key: h for h in HEADLINES}
    est = paired_relative_change([9.6, 9.6], [10.0, 10.0])  # -4 %
    vs_best = heads["learned_vs_best"]
    assert vs_best.met("synthetic", est) is True  # <= 0 everywhere
    assert vs_best.met("tpch", est) is False and vs_best.met("tpch-like", est) is False
    idle = heads["idle_vs_no_idle"]
    assert idle.met("bursty", est) is False and idle.target("mixed") == 0.01
    worse = paired_relative_change([10.2, 10.2], [10.0, 10.0])  # +2 %
    assert idle.met("synthetic", worse) is False
    assert heads["lookahead_vs_base"].target("synthetic") is None
    no_cp = heads["no_cp_vs_full"]
    assert no_cp.met("tpch", worse) is False and no_cp.met("bursty", worse) is None


def test_idle_slots_are_counted(evaluation):
    ev, _, out, _ = evaluation
    (case,) = ev.cases
    data = json.loads((out / "evaluation.json").read_text())["workloads"][0]["idle"]
    for r in case.comparison.results:
        use = case.idle[r.name]
        assert use.jobs == sum(m.jobs for m in r.runs)
        assert use.seconds == pytest.approx(sum(m.idle_inserted for m in r.runs))
        assert 0 <= use.delayed_jobs <= use.jobs
        assert (use.delayed_jobs > 0) == (use.seconds > 0)
        assert data[r.name] == use.to_dict()
    assert case.idle["fair"] == IdleUse(case.idle["fair"].jobs, 0, 0.0)  # fair never idles
    assert "## Idle slots fired" in (out / "evaluation.md").read_text()


def test_sweep_records_idle_and_does_not_depend_on_jobs(models):
    config = SweepConfig(loads=(0.5, 0.9), long_seconds=(40.0, 80.0), options={"num_stream": 15})
    entries = [f"learned=learned:{models['learned']}", "analytic-sjf-cp=analytic:sjf-cp"]
    one = run_idle_sweep(config, entries, seeds=(1000, 1001), jobs=1)
    two = run_idle_sweep(config, entries, seeds=(1000, 1001), jobs=2)
    assert one.to_dict() == two.to_dict()
    rates = [p.value for p in one.series("learned", "rate")]
    assert rates == sorted(rates) and rates[0] == pytest.approx(0.5 * 4 / 30)
    assert [p.value for p in one.series("analytic-sjf-cp", "long_seconds")] == [40.0, 80.0]
    for p in one.points:
        assert p.idle_per_decision.mean >= 0 and p.avg_jct.mean > 0


def test_fig6_sweep_in_the_evaluation(evaluation):
    ev, _, out, _ = evaluation
    assert ev.sweep is not None
    # only models with an idle head are swept, next to the analytic rule
    assert ev.sweep.schedulers == ["learned", "analytic-sjf-cp"]
    assert "Fig. 6" in (out / "evaluation.md").read_text()


def test_training_log_is_read_defensively(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text(TRAIN_LOG)
    curve = read_training_log(p)
    assert curve.iterations == (0.0, 2.0) and curve.values == (40.5, 38.25)
    assert curve.references == {"fifo": 50.0, "fair": 45.0}
    p.write_text("Step,Validation_Avg_JCT_seconds\n1,3\n2,2\n")
    curve = read_training_log(p)
    assert curve.iteration_column == "Step" and curve.values == (3.0, 2.0)
    p.write_text("iteration,loss\n1,3\n")
    with pytest.raises(IdlegateError, match="validation JCT column"):
        read_training_log(p)


def test_suite_has_the_issues_workloads(tmp_path):
    full = {c.key: c for c in suite_cases("full", tmp_path / "no-traces")}
    quick = {c.key: c for c in suite_cases("quick", tmp_path / "no-traces")}
    assert set(full) == set(quick)
    assert {c.family for c in full.values()} == {
        "synthetic",
        "tpch",
        "tpch-like",
        "bursty",
        "k8s-batch",
        "follow",
        "push",
        "recurring",
        "mixed",
        "alibaba",
    }
    k8s = "k8s-batch-0.7"
    assert quick[k8s].options.extra["num_jobs"] < full[k8s].options.extra["num_jobs"]
    demo = full["tpch-like-0.85"].options
    assert (demo.num_executors, demo.load, demo.extra["num_stream"]) == (
        DEMO_EXECUTORS,
        DEMO_LOAD,
        100,
    )
    assert full["bursty-0.7"].options.to_kwargs() == {"num_stream": 99}
    for key in ("tpch-like-0.85", "bursty-0.7"):
        assert quick[key].options.extra["num_stream"] < full[key].options.extra["num_stream"]
    alibaba = full["alibaba-0.85"].options
    assert (alibaba.num_executors, alibaba.load, alibaba.extra["num_jobs"]) == (100, 0.85, 200)
    assert quick["alibaba-0.85"].options.extra["num_jobs"] == 40


def test_the_alibaba_case_is_skipped_without_the_trace(tmp_path, models):
    missing = tmp_path / "no-trace"
    case = {c.key: c for c in suite_cases("full", alibaba_dir=missing)}["alibaba-0.85"]
    assert case.skip_reason == (
        f"skipped: Alibaba trace directory {missing} does not exist; pass --alibaba-dir "
        "or set IDLEGATE_ALIBABA_DIR"
    )
    config = EvaluateConfig(
        models=(SchedulerSpec.parse(f"learned={models['learned']}"),),
        workloads=("alibaba",),
        alibaba_dir=missing,
        sweep=False,
    )
    ev = run_evaluation(config)
    assert [c.skipped for c in ev.cases] == [True]
    assert "--alibaba-dir" in config.command_line()


def test_tpch_cases_are_skipped_without_traces(tmp_path, models, monkeypatch):
    monkeypatch.delenv("IDLEGATE_TPCH_DIR", raising=False)
    missing = tmp_path / "no-traces"
    cases = {c.key: c for c in suite_cases("full", missing)}
    assert cases["tpch-15s"].skip_reason and "skipped" in cases["tpch-15s"].skip_reason
    assert cases["mixed-0.5"].skip_reason is None
    assert cases["mixed-0.5"].options.extra["dags"] == "tpch-like"
    quick = {c.key: c for c in suite_cases("quick", missing)}
    assert (
        quick["tpch-25s"].options.extra["num_stream"]
        < cases["tpch-25s"].options.extra["num_stream"]
    )
    config = EvaluateConfig(
        models=(SchedulerSpec.parse(f"learned={models['learned']}"),),
        workloads=("tpch",),
        tpch_dir=missing,
        sweep=False,
    )
    ev = run_evaluation(config)
    assert [c.skipped for c in ev.cases] == [True, True]
    write_evaluation(ev, tmp_path / "out")
    assert "skipped" in (tmp_path / "out" / "evaluation.md").read_text()


# ---------------------------------------------------------------------------------------
# config and CLI errors


def test_models_are_specs_with_optional_labels():
    config = EvaluateConfig(models=["a=x.onnx,b=lookahead:srpt", "learned:p/d.onnx"])
    assert [m.title for m in config.models] == ["a", "b", "learned:p/d.onnx"]
    assert config.to_dict()["models"] == {
        "a": "learned:x.onnx",  # a bare PATH.onnx is learned:PATH.onnx
        "b": "lookahead:srpt",
        "learned:p/d.onnx": "learned:p/d.onnx",
    }
    assert "--schedulers a=learned:x.onnx --schedulers b=lookahead:srpt" in config.command_line()
    for bad in ("=x.onnx", "a=", "a b=x.onnx", "typo:sjf"):
        with pytest.raises(IdlegateError):
            EvaluateConfig(models=(bad,))
    with pytest.raises(IdlegateError, match="given twice"):
        EvaluateConfig(models="a=x.onnx,a=y.onnx")
    with pytest.raises(IdlegateError, match="baseline"):
        EvaluateConfig(models="fair=x.onnx")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--schedulers", "learned=/no/such/model.onnx"], "does not exist"),
        (["--schedulers", "learned"], "learned needs a path, e.g. learned:default"),
        (["--schedulers", "typo:sjf"], "unknown scheduler 'typo' in 'typo:sjf'"),
        (
            ["--schedulers", "learned=x.onnx", "--suite", "huge"],
            "--suite: Input should be 'quick' or 'full'",
        ),
        (["--schedulers", "{learned}", "--workloads", "nope"], "unknown workload"),
        (["--schedulers", "{learned}", "--seeds", "0"], "--seeds"),
        (["--schedulers", "srpt"], "--schedulers: 'srpt' is a baseline"),
        (["--schedulers", "srpt"], "write LABEL=SPEC, e.g. my-srpt=srpt"),
        (["--schedulers", "a=srpt,a=fair"], "--schedulers: 'a' is given twice"),
        (["--schedulers", ""], "--schedulers: give at least one scheduler spec"),
    ],
)
def test_cli_errors_are_one_line_and_exit_1(models, args, needle):
    args = [a.format(learned=f"learned={models['learned']}") for a in args]
    r = runner.invoke(app, ["evaluate", *args])
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0]


def test_missing_model_names_the_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IdlegateError, match=re.escape(str(tmp_path / "rel" / "m.onnx"))):
        check_model(SchedulerSpec.parse("learned=rel/m.onnx"))
    with pytest.raises(IdlegateError, match=r"model 'h': scheduler 'srpt' has no parameter 'x'"):
        check_model(SchedulerSpec.parse("h=lookahead:srpt?x=1"))


def test_cli_runs_a_tiny_evaluation(models, tmp_path):
    r = runner.invoke(
        app,
        [
            "evaluate",
            "--schedulers",
            f"learned={models['learned']}",
            "--schedulers",
            "lookahead-base=srpt",
            "--seeds",
            "2",
            "--workloads",
            "synthetic-0.6",
            "--no-sweep",
            "--out",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "Headline deltas" in r.stdout and "learned" in r.stdout
    data = json.loads((tmp_path / "evaluation.json").read_text())
    assert data["config"]["models"]["lookahead-base"] == "srpt"  # a spec, not a file
    assert "lookahead-base" in data["workloads"][0]["schedulers"]
    assert (tmp_path / "evaluation.md").is_file()
    assert not (tmp_path / "idle_sweep.png").exists()


@pytest.mark.parametrize("given", ["", " , "])
def test_an_empty_workload_list_is_refused(given):
    # it ran no workload and wrote an empty evaluation, exit 0
    result = runner.invoke(
        app, ["evaluate", "--workloads", given, "--schedulers", "l=learned:default"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: --workloads: give at least one workload")
