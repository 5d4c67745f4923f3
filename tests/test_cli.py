"""The `idlegate` command line: output, files, error handling, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate import __version__, cli, cli_run
from idlegate.cli import app
from tests.airflow_data import examples

runner = CliRunner()

SMALL = ["--workload", "synthetic", "--jobs-count", "30"]
PNG = Path(__file__).resolve().parents[1] / "docs" / "img" / "idle-slot.png"
AIRFLOW_EXAMPLES = str(Path(__file__).parent / "data" / "airflow" / "examples.json")


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_version():
    r = invoke("version")
    assert r.exit_code == 0
    assert r.stdout.strip() == f"idlegate {__version__}"


def test_simulate_prints_metrics_table():
    r = invoke("simulate", *SMALL, "--scheduler", "fifo", "--seed", "1")
    assert r.exit_code == 0, r.output
    for label in ("average JCT", "p95 JCT", "makespan", "utilisation", "lower bound"):
        assert label in r.stdout
    assert "fifo on synthetic" in r.stdout


def test_simulate_json_parses_and_is_deterministic():
    args = ("simulate", *SMALL, "--scheduler", "sjf-cp", "--seed", "3", "--json")
    first, second = invoke(*args), invoke(*args)
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert data["scheduler"] == "sjf-cp" and data["seed"] == 3 and data["jobs"] == 30
    assert data["unfinished"] == 0 and data["avg_jct"] > 0
    assert first.stdout == second.stdout
    other = invoke("simulate", *SMALL, "--scheduler", "sjf-cp", "--seed", "4", "--json")
    assert json.loads(other.stdout)["avg_jct"] != data["avg_jct"]


def test_simulate_shows_what_a_self_tuning_scheduler_followed():
    spec = "portfolio?candidates=fifo+srpt&start=fifo&min_window=5&every=5"
    r = invoke("simulate", *SMALL, "--scheduler", spec, "--json")
    assert r.exit_code == 0, r.output
    followed = json.loads(r.stdout)["followed"]
    assert followed["start"] == "fifo" and followed["rounds"]
    assert {c["candidate"] for c in followed["rounds"]} <= {"fifo", "srpt"}
    assert sum(followed["time_followed"].values()) == pytest.approx(
        json.loads(r.stdout)["makespan"]
    )
    table = invoke("simulate", *SMALL, "--scheduler", spec)
    assert table.exit_code == 0 and "Followed: " in table.stdout
    assert "started with fifo" in table.stdout  # (the cold start's row)
    plain = invoke("simulate", *SMALL, "--scheduler", "fifo", "--json")
    assert "followed" not in json.loads(plain.stdout)


def test_simulate_passes_workload_flags():
    r = invoke("simulate", *SMALL, "--executors", "3", "--load", "0.5", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["num_executors"] == 3
    assert data["utilisation"] == pytest.approx(0.5, abs=0.2)


def test_compare_writes_three_files(tmp_path: Path):
    out = tmp_path / "cmp"
    r = invoke(
        "compare", *SMALL, "--schedulers", "fifo,fair,sjf-cp", "--seeds", "2", "--out", str(out)
    )
    assert r.exit_code == 0, r.output
    assert "sjf-cp" in r.stdout and "baseline" in r.stdout
    data = json.loads((out / "compare.json").read_text())
    assert data["config"]["baseline"] == "fair"
    assert data["config"]["seeds"] == [0, 1]
    assert list(data["schedulers"]) == ["fifo", "fair", "sjf-cp"]
    fair = data["schedulers"]["fair"]
    assert fair["is_baseline"] and fair["avg_jct_vs_baseline"]["mean"] == 0
    assert len(fair["runs"]) == 2 and len(fair["jct"][0]) == 30
    md = (out / "compare.md").read_text()
    assert "| scheduler |" in md and "| fair |" in md
    assert (out / "jct_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_results_do_not_depend_on_jobs(tmp_path: Path):
    args = ["compare", *SMALL, "--schedulers", "fifo,random,fair", "--seeds", "2"]
    r1 = invoke(*args, "--jobs", "1", "--out", str(tmp_path / "a"))
    r2 = invoke(*args, "--jobs", "2", "--out", str(tmp_path / "b"))
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    a = (tmp_path / "a" / "compare.json").read_text()
    assert a == (tmp_path / "b" / "compare.json").read_text()


def test_demo_runs_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(cli_run, "DEMO_SEEDS", 2)
    monkeypatch.setattr(cli_run, "DEMO_STREAMED_JOBS", 8)
    monkeypatch.setattr(cli_run, "DEMO_EXECUTORS", 10)
    r = invoke("demo", "--out", str(tmp_path), "--jobs", "1")
    assert r.exit_code == 0, r.output
    for name in ("compare.json", "compare.md", "jct_cdf.png"):
        assert (tmp_path / name).is_file()
    data = json.loads((tmp_path / "compare.json").read_text())
    assert set(data["schedulers"]) == set(cli_run.DEMO_SCHEDULERS)
    assert {"learned:default", "default"} <= set(data["schedulers"])  # ONNX, the portfolio
    assert data["config"]["workload"] == "tpch-like"


def test_simulate_builds_its_scheduler_once(monkeypatch: pytest.MonkeyPatch):
    from idlegate.policy.onnx_runtime import OnnxPolicy

    loads: list[object] = []
    load = OnnxPolicy.__init__

    def counted(self: OnnxPolicy, *args: object, **kwargs: object) -> None:
        loads.append(args[0])
        load(self, *args, **kwargs)

    monkeypatch.setattr(OnnxPolicy, "__init__", counted)
    r = invoke("simulate", *SMALL, "--scheduler", "learned:default", "--json")
    assert r.exit_code == 0, r.output
    assert len(loads) == 1  # the shipped learned policy, loaded once


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("simulate", *SMALL, "--scheduler", "nope"), "nope"),
        (("simulate", *SMALL, "--scheduler", "typo:sjf"), "unknown scheduler 'typo'"),
        (("simulate", "--workload", "nope"), "nope"),
        (("simulate", "--workload", "file", "--file", "/no/such/workflow.yaml"), "workflow.yaml"),
        (("simulate", *SMALL, "--load", "-1"), "load"),
        (("simulate", *SMALL, "--alpha", "0.5"), "alpha"),
        (("compare", *SMALL, "--schedulers", "fifo,nope", "--seeds", "1"), "nope"),
        (("compare", *SMALL, "--schedulers", "fifo,sjf", "--baseline", "fair"), "baseline"),
        (("compare", *SMALL, "--seeds", "0"), "--seeds"),
        (("compare", "--workload", "nope", "--seeds", "1"), "nope"),
        # what a new user tripped on: the bound broken, not what was wrong
        (("simulate", *SMALL, "--load", "nan"), "--load: Input should be a finite number"),
        (("simulate", *SMALL, "--interarrival", "inf"), "--interarrival: Input should be a finite"),
        (("simulate", "-w", "lublin", "-o", "interarrival_scale=nan"), "a finite number"),
        (
            ("simulate", *SMALL, "-s", "default?cut_behind=maybe"),
            "(given 'maybe'): give true or false",
        ),
        (
            ("simulate", *SMALL, "--jobs-count", "1000000000000"),
            "--jobs-count (1000000000000) must be at most 1000000",
        ),
        (("compare", *SMALL, "--schedulers", ""), "--schedulers: give at least one scheduler"),
        (("compare", *SMALL, "--schedulers", " , "), "e.g. fair,srpt"),
        (("simulate", "-w", "my-flows.yaml"), "(to run the workflows of a file: --workload file"),
        (("compare", "-w", "trace.swf"), "--workload swf --file trace.swf"),
        (("simulate", "-w", "file", "--file", str(PNG)), "is not UTF-8 text (byte 0x89"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(args, needle):
    r = invoke(*args)
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: ") and needle in lines[0]


def test_an_airflow_refusal_under_a_workload_flag_is_one_line_and_exit_1(tmp_path):
    # Airflow's DAGs refused while a workload flag was given (its error is renamed): a file
    # none of whose DAGs maps (one that some do replays them: tests/test_airflow_offline.py)
    found = examples()
    left = tmp_path / "left.json"
    left.write_text(
        json.dumps([found["example_workday_timetable"], found["example_branch_labels"]])
    )
    args = ("simulate", "-w", "file", "--file", str(left), "-k", "16")
    test_bad_input_is_one_line_and_exit_1(args, "none of its 2 Airflow DAGs has a task idlegate")
    assert invoke("simulate", "-w", "file", "--file", AIRFLOW_EXAMPLES, "-k", "16").exit_code == 0


@pytest.mark.parametrize(
    ("args", "said", "internal"),
    [
        (
            ("simulate", "-w", "tpch-like", "--jobs-count", "0"),
            "--jobs-count (0) must be at least 1",
            "num_jobs",
        ),
        (("simulate", "-w", "tpch-like", "-k", "0"), "-k/--executors: Input", "num_executors"),
        (("compare", "-k", "0", "--seeds", "1"), "-k/--executors: Input", "num_executors"),
        (("compare", "--jobs-count", "2", "-o", "init=3"), "--jobs-count (2) counts", "num_jobs"),
        (("history", "simulate", "-k", "0", "--out", "h.yaml"), "-k/--executors", "num_exec"),
        (("train", "-w", "tpch-like", "-k", "0"), "-k/--executors: Input", "num_executors"),
        (("simulate", "-w", "tpch-like", "--load", "-1"), "--load: Input should be greater", ""),
        (("simulate", "-w", "tpch-like", "-o", "num_jobs=0"), "num_jobs (0) must be", "--jobs"),
        (
            ("simulate", "-w", "file"),
            "--file: Field required (the workload needs it: give --file)",
            "path",
        ),
    ],
    ids=[
        "simulate-jobs",
        "simulate-k",
        "compare-k",
        "compare-init",
        "history",
        "train",
        "load",
        "o",
        "file-missing",
    ],
)
def test_a_bad_workload_option_is_named_as_typed_with_its_value(args, said, internal):
    r = invoke(*args)
    assert r.exit_code == 1, r.output
    assert said in r.stderr, r.stderr
    if internal:
        assert internal not in r.stderr, r.stderr
    if "-k" in args:
        assert "(given 0)" in r.stderr


K8S_TAKES = (
    "-o KEY=VALUE takes adhoc_fraction, burst_size, duration_scale, interarrival (or "
    "--interarrival), jitter, load (or --load), num_executors (or -k/--executors), num_jobs "
    "(or --jobs-count), period, rate, requests, start_latency, task_sigma"
)


@pytest.mark.parametrize("command", ["simulate", "compare", "train"])
@pytest.mark.parametrize(
    "flags", [(), ("--jobs-count", "5", "-k", "3")], ids=["alone", "with-flags"]
)
def test_an_unknown_workload_option_lists_what_o_takes_and_the_flags(command, flags):
    """Every option is -o's, those with a flag of their own are said with it; the list
    reads the same whichever flags were given (it named num_jobs --jobs-count when
    --jobs-count was given, num_jobs else) and whichever command took them."""
    r = invoke(command, "-w", "k8s-batch", *flags, "-o", "bogus=1")
    assert r.exit_code == 1, r.output
    said = f"Error: workload 'k8s-batch' has no option 'bogus'; {K8S_TAKES}"
    assert r.stderr.strip() == said


def test_a_workload_option_with_a_flag_is_taken_by_o_too_and_not_both():
    by_flag = json.loads(
        invoke("simulate", "-w", "k8s-batch", "--jobs-count", "5", "--json").stdout
    )
    by_o = json.loads(invoke("simulate", "-w", "k8s-batch", "-o", "num_jobs=5", "--json").stdout)
    assert by_o == by_flag and by_o["jobs"] == 5
    r = invoke("simulate", "-w", "k8s-batch", "--jobs-count", "7", "-o", "num_jobs=5")
    assert r.exit_code == 1, r.output
    assert r.stderr.strip() == (
        "Error: --jobs-count and -o num_jobs both give the workload option num_jobs; give it "
        "once (either way sets the same option)"
    )
    r = invoke("simulate", "-w", "shared", "--jobs-count", "5")
    assert r.exit_code == 1, r.output
    assert "workload 'shared' has no option --jobs-count (the option num_jobs); -o " in r.stderr
    assert "hours, load (or --load), num_executors (or -k/--executors), queues" in r.stderr


@pytest.mark.parametrize("name", ["README.md", "renamed.onnx"])
def test_a_file_that_is_no_onnx_model_says_so_and_how_to_make_one(tmp_path: Path, name: str):
    text = tmp_path / name
    text.write_text("# not a model\n")
    r = invoke("simulate", *SMALL, "--scheduler", f"learned:{text}")
    assert r.exit_code == 1, r.output
    assert f"policy file '{text}' is not an ONNX model" in r.stderr, r.stderr
    assert "idlegate export-onnx CKPT OUT.onnx" in r.stderr and "ONNXRuntimeError" not in r.stderr


def test_out_path_that_is_a_file_is_a_user_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = invoke("compare", *SMALL, "--schedulers", "fifo", "--seeds", "1", "--out", str(blocker))
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: ") and "Traceback" not in r.output


def test_an_out_folder_that_cannot_be_made_fails_before_the_runs(monkeypatch):
    # it failed after every run (the demo's pool then left leaked semaphores behind)
    from idlegate.evaluation import console

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran before its out folder was checked")

    monkeypatch.setattr(console, "run_comparison", no_run)
    r = invoke("demo", "--out", "/proc/idlegate/demo", "--jobs", "1")
    assert r.exit_code == 1, r.output
    assert (
        r.stderr.strip()
        == "Error: cannot create directory /proc/idlegate/demo: No such file or directory"
    )


def test_demo_names_its_jobs_flag():
    # it said 'the comparison: jobs: ...', the name of a field the user never wrote
    r = invoke("demo", "-j", "0")
    assert r.exit_code == 1
    assert (
        r.stderr.strip() == "Error: -j/--jobs: Input should be greater than or equal to 1 (given 0)"
    )


def test_demo_writes_under_out_by_default():
    # out/ is ignored by git: the demo's default writes nothing into a checkout
    params = cli.commands()["demo"].params
    assert next(p for p in params if p.name == "out").default == Path("out/demo")


def test_usage_errors_keep_typer_exit_code():
    r = invoke("simulate", "--seed", "abc")
    assert r.exit_code == 2


def test_python_dash_m_runs_the_cli():
    r = subprocess.run(
        [sys.executable, "-m", "idlegate", "version"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"idlegate {__version__}"


def test_python_dash_m_error_exit_code():
    r = subprocess.run(
        [sys.executable, "-m", "idlegate", "simulate", "--scheduler", "nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 1
    assert r.stderr.startswith("Error: ") and "Traceback" not in r.stderr


def test_operator_with_a_kubeconfig_that_does_not_exist_is_one_line_and_exit_1(tmp_path):
    missing = tmp_path / "nowhere" / "kubeconfig"
    result = runner.invoke(app, ["operator", "--pool-size", "2", "--kubeconfig", str(missing)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert f"the kubeconfig file {missing} does not exist" in result.output
    # a directory is said as one, not as a file that does not exist
    result = runner.invoke(app, ["operator", "--pool-size", "2", "--kubeconfig", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert f"the kubeconfig {tmp_path} is a directory; pass --kubeconfig" in result.output


PROBE = """
import logging

from typer.testing import CliRunner

from idlegate.cli import app


def test_a_runs_the_operator_cli_in_this_process(tmp_path):
    missing = str(tmp_path / "kubeconfig")
    assert CliRunner().invoke(app, ["operator", "--pool-size", "2", "--kubeconfig", missing]).exit_code == 1


def test_b_then_logs_as_the_api_emulator_does():
    logging.getLogger("aiohttp.access").info("GET /api/v1/pods HTTP/1.1 200")
"""


def test_the_operator_cli_run_in_a_test_leaves_no_logging_error_behind(tmp_path):
    # kopf's log handler, bound to the runner's closed stderr, outlived the test: every
    # later record (the API emulator's access log) printed a 'Logging error' traceback
    pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent(PROBE))
    root = Path(__file__).resolve().parents[1]
    args = ["-p", "tests.conftest", "-p", "no:xdist", "-p", "no:randomly", "-p", "no:cacheprovider"]
    r = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-q", "-s", str(probe)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Logging error" not in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize(
    ("content", "said"),
    [("garbage: [\n", "while parsing"), ("", "file is empty")],
    ids=["malformed", "empty"],
)
def test_operator_with_an_unreadable_kubeconfig_is_one_line_and_exit_1(tmp_path, content, said):
    bad = tmp_path / "kubeconfig"
    bad.write_text(content)
    result = runner.invoke(app, ["operator", "--pool-size", "2", "--kubeconfig", str(bad)])
    assert result.exit_code == 1, result.output
    assert f"cannot read Kubernetes credentials from {bad}" in result.output
    assert said in result.output and "fix that file" in result.output
    assert "Traceback" not in result.output


KUBECONFIG_USER = "users: [{name: u, user: {token: t}}]\ncurrent-context: x\n"
KUBECONFIG_CONTEXT = "contexts: [{name: x, context: {cluster: c, user: u}}]\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"a line of garbage\n", "holds a str, not a mapping"),
        (b"- a list\n", "holds a list, not a mapping"),
        (b"\x83\xff\x00 not text", "it is not text"),
        (b"clusters: 5\n", "its clusters must be a list of mappings"),
        (b"users: [{name: u, user: [1]}]\n", "its users must be a list of mappings"),
        (
            f"clusters: [{{name: c, cluster: {{server: 5}}}}]\n{KUBECONFIG_CONTEXT}"
            f"{KUBECONFIG_USER}".encode(),
            "is not a valid kubeconfig (",
        ),
        (
            f"clusters: [{{name: c, cluster: {{server: k8s.example}}}}]\n{KUBECONFIG_CONTEXT}"
            f"{KUBECONFIG_USER}".encode(),
            "names the API server 'k8s.example', which is no URL",
        ),
    ],
    ids=["garbage", "list", "binary", "clusters-number", "user-list", "server-number", "no-url"],
)
def test_operator_with_a_kubeconfig_of_the_wrong_shape_is_one_line_and_exit_1(
    tmp_path, content, said
):
    # the kubernetes client indexes the file unchecked: a TypeError's 61-line traceback
    bad = tmp_path / "kubeconfig"
    bad.write_bytes(content)
    result = runner.invoke(app, ["operator", "--pool-size", "2", "--kubeconfig", str(bad)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert said in result.output, result.output
    assert "kubeconfig" in result.output and "Traceback" not in result.output


def test_a_garbage_file_in_a_kubeconfig_list_is_named(tmp_path, monkeypatch):
    garbage = tmp_path / "garbage"
    garbage.write_text("garbage\n")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}{os.pathsep}{garbage}")
    result = runner.invoke(app, ["operator", "--pool-size", "2"])
    assert result.exit_code == 1, result.output
    assert f"{garbage} is not a kubeconfig" in result.output


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        ("kopf", ["operator", "--pool-size", "2"], "operator"),
        ("torch", ["train", "--preset", "quick", "--iterations", "0"], "train"),
    ],
)
def test_a_command_whose_extra_is_missing_says_which_to_install(blocked, args, extra):
    # a base install (`make demo`) has neither kopf nor torch: one sentence, not a traceback
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from idlegate.cli import main\n"
        f"main({args!r})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert f"needs the '{extra}' extra" in out.stderr and f"idlegate[{extra}]" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("script", "blocked", "extra"),
    [
        ("optimum", "ortools", "dev"),
        ("operator_burst", "kmock", "dev"),
        ("live_forecast", "kopf", "operator"),  # (built on operator_burst's pieces)
        ("live_scores", "kopf", "operator"),
    ],
)
def test_a_benchmark_whose_extra_is_missing_says_which_to_install(script, blocked, extra):
    root = Path(__file__).parents[1]
    code = (
        f"import runpy, sys; sys.modules[{blocked!r}] = None; sys.argv = ['x', '--help']\n"
        f"runpy.run_module('benchmarks.{script}', run_name='__main__', alter_sys=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root
    )
    assert out.returncode == 1, out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith("Error: ") and f"-e '.[{extra}]'" in line and blocked in line


@pytest.mark.parametrize(
    "document",
    [
        {"metadata": {"generateName": "runs-"}, "spec": {"entrypoint": "main"}},  # no kind
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}},
    ],
)
def test_simulating_a_document_that_is_no_workflow_says_which_kinds_a_file_takes(
    tmp_path: Path, document: dict
):
    from idlegate.sim.argo import WORKFLOW_KINDS

    f = tmp_path / "runs.yaml"
    f.write_text(json.dumps(document))
    r = invoke("simulate", "--workload", "file", "--file", str(f))
    assert r.exit_code == 1, r.output
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    assert all(kind in line for kind in ("DagWorkflow", *WORKFLOW_KINDS))


def test_a_workflow_file_that_is_no_yaml_says_which_format_it_wants(tmp_path: Path):
    notes = tmp_path / "README.md"
    notes.write_text("# notes\n\nkey: value: more\n")
    r = invoke("simulate", "-w", "file", "--file", str(notes))
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert "is not valid YAML" in r.stderr and "not valid md" not in r.stderr, r.stderr
    assert "a workflow or history file in YAML" in r.stderr, r.stderr


def test_train_blames_the_flags_given_not_the_preset():
    r = invoke("train", "-w", "file")
    assert r.exit_code == 1, r.output
    assert "preset 'quick' with the flags given is invalid" in r.stderr, r.stderr
    assert "--file: Field required (the workload needs it: give --file)" in r.stderr, r.stderr


def test_the_base_install_runs_without_any_extras_packages():
    # `make demo` installs the base package (and plots): nothing beyond its own dependencies
    # may be imported on the way to a run. click came only through kopf once typer stopped
    # requiring it, and the base install then failed at `import idlegate.cli`.
    blocked = ["click", "kopf", "kubernetes", "prometheus_client", "torch", "aiohttp", "ray"]
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({blocked!r}))\n"
        "from idlegate.cli import main\n"
        "main(['simulate', '-w', 'k8s-batch', '--jobs-count', '5'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("command", [["operator"], ["simulate"], ["lint"], ["compare"]])
def test_help_fits_80_columns(command: list[str]):
    # (issue 82's trial: --pod-gc's five choices made an 84-column line of operator --help)
    shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0
    wide = [line for line in shown.output.splitlines() if len(line) > 80]
    assert not wide, wide
    if command == ["operator"]:
        assert "--pod-gc <choice>" in shown.output and "OnWorkflowSuccess or Never" in shown.output
