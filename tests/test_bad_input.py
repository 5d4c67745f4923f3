"""Bad input a new user gave (issue 69, items 4-9): each is one line ``Error: ...`` naming
the value and the file, exit 1, no traceback; nothing is accepted silently."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate.cli import app

runner = CliRunner()

WORKFLOW = "name: w\nstages:\n- {name: a, tasks: 2, taskDurationSeconds: 3}\n"
LATIN1 = "- name: team-a\n  nominal: {pods: 10}\n# équipe\n".encode("latin-1")
BINARY = bytes(range(128, 256)) * 2


def invoke(*args: str):
    return runner.invoke(app, list(args))


def one_error(r, *needles: str) -> str:
    """The one line of a refused command, which says every one of `needles`."""
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit), r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW)
    return path


# -- 4: a file that is not UTF-8, in every reader ---------------------------------------


@pytest.mark.parametrize("content", [LATIN1, BINARY], ids=["latin-1", "binary"])
@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_queues_file_that_is_not_utf8_is_one_line_naming_it(
    tmp_path: Path, workflow: Path, content: bytes, command: str
):
    queues = tmp_path / "queues.yaml"
    queues.write_bytes(content)
    more = ["--seeds", "1", "--schedulers", "fifo"] if command == "compare" else []
    r = invoke(command, "-w", "file", "--file", str(workflow), "--queues", str(queues), *more)
    one_error(r, str(queues), "is not UTF-8 text (byte 0x")


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (("simulate", "-w", "file", "--file"), "workflow file"),
        (("advise",), "workflow file"),
        (("history", "export"), "document"),
        (("train", "--config"), "config file"),
    ],
)
def test_every_file_reader_names_a_file_that_is_not_utf8(tmp_path: Path, args, what):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(LATIN1)
    one_error(invoke(*args, str(bad)), f"the {what} {bad} is not UTF-8 text (byte 0xe9")


def test_the_batch_task_file_and_the_training_log_name_a_file_that_is_not_utf8(tmp_path: Path):
    from idlegate.errors import IdlegateError
    from idlegate.evaluation.training_log import read_training_log

    bad = tmp_path / "batch_task.csv"
    bad.write_bytes(b"M1,1,j_1,1,Terminated,1,2,100,1\n" + LATIN1)
    one_error(invoke("history", "alibaba", str(bad)), f"the batch task file {bad} is not UTF-8")
    with pytest.raises(IdlegateError, match=r"the training log .* is not UTF-8 text"):
        read_training_log(bad)


def test_standard_input_that_is_not_utf8_is_said_so():
    linted = runner.invoke(app, ["lint", "-"], input=BINARY)
    assert linted.exit_code == 1
    assert "<stdin>: is not UTF-8 text (byte 0x80 at offset 0)" in linted.stdout
    exported = runner.invoke(app, ["history", "export", "-"], input=LATIN1)
    one_error(exported, "standard input is not UTF-8 text (byte 0xe9")


def test_lint_names_a_file_that_is_not_utf8_and_counts_it(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(BINARY)
    r = invoke("lint", str(bad))
    assert r.exit_code == 1
    assert f"{bad}: is not UTF-8 text (byte 0x80 at offset 0)" in r.stdout
    assert "in 1 file(s)" in r.stdout  # (read or not, the file was checked)


# -- 7: a suggestion is a value the CLI accepts ------------------------------------------


@pytest.mark.parametrize("nodes", ["100000", "1000"])
def test_the_k_that_nodes_suggest_is_one_the_cli_accepts(nodes: str):
    pool = ["-w", "k8s-batch", "-o", "requests=true", "--resources", "cpu=8", "--jobs-count", "5"]
    said = one_error(invoke("simulate", *pool, "--nodes", nodes, "-k", "10"), f"--nodes {nodes}")
    suggested = re.search(r"-k (\d+)\)$", said)
    assert suggested is not None, said
    followed = invoke("simulate", *pool, "--nodes", nodes, "-k", suggested[1], "--json")
    assert followed.exit_code == 0, followed.output


def test_more_nodes_than_a_pool_has_pods_is_refused_at_the_flag():
    one_error(invoke("simulate", "--nodes", "100001", "-k", "10"), "--nodes", "100000")


# -- 8: history alibaba names the value, the file and the line ---------------------------


@pytest.mark.parametrize("cpu", ["nan", "inf", "-50", "1e300"])
def test_a_plan_cpu_no_request_can_be_is_named_with_its_line(tmp_path: Path, cpu: str):
    path = tmp_path / "batch_task.csv"
    path.write_text(f"M1,1,j_2,1,Terminated,1,2,100,1\nR2_1,2,j_2,1,Terminated,2,3,{cpu},0.4\n")
    said = one_error(
        invoke("history", "alibaba", str(path)), str(path), f"line 2: plan_cpu '{cpu}'"
    )
    assert "Terminated" not in said  # (the hint of another reason: a cut of the trace)
    assert said.endswith("correct the row or leave its job out")


# -- 5: what the API server refuses of a template, refused by lint and admission alike ----


def dag_workflow(pod_spec: dict) -> dict:
    container = {"name": "c", "image": "busybox"}
    stage = {"name": "a", "tasks": 1, "taskDurationSeconds": 3}
    stage["template"] = {"spec": {"containers": [container], **pod_spec}}
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": "w"},
        "spec": {"stages": [stage]},
    }


GPU = {"nvidia.com/gpu": 1}
BAD_TEMPLATES = [
    ({"nodeSelector": {"bad key!/x@y": "v"}}, "'bad key!/x@y' is not a label key"),
    ({"nodeSelector": {"pool": "not a value!"}}, "'not a value!' (of label 'pool') is not a"),
    ({"nodeSelector": {"gpu": True}}, "must be a string, not true: quote it"),
]
BAD_REQUESTS = [
    ({"requests": GPU, "limits": {"nvidia.com/gpu": 2}}, "nvidia.com/gpu: 1 is not its limit 2"),
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "cpu: '2' is more than its limit '1'"),
]


def _with_requests(resources: dict) -> dict:
    body = dag_workflow({})
    body["spec"]["stages"][0]["template"]["spec"]["containers"][0]["resources"] = resources
    return body


CASES = [(dag_workflow(spec), said) for spec, said in BAD_TEMPLATES]
CASES += [(_with_requests(resources), said) for resources, said in BAD_REQUESTS]


@pytest.mark.parametrize("level", ["baseline", "restricted"])
@pytest.mark.parametrize(("body", "said"), CASES)
def test_lint_refuses_what_the_api_server_refuses_of_a_template(
    tmp_path: Path, body: dict, said: str, level: str
):
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(body))
    r = invoke("lint", "--pod-security", level, str(path))
    assert r.exit_code == 1, r.output
    assert said in r.stdout
    assert f"{path}[0] spec.stages[0]" in r.stdout  # (the file and the field)


@pytest.mark.parametrize(("body", "said"), CASES)
def test_the_operators_admission_refuses_them_with_the_same_check(body: dict, said: str):
    from idlegate.api.podsecurity import NamespacePolicy
    from idlegate.api.settings import Settings
    from idlegate.errors import SpecError
    from idlegate.operator.kinds.workflow import new_workflow

    with pytest.raises(SpecError, match=re.escape(said)):
        new_workflow(body, 0.0, Settings(pool_size=4), NamespacePolicy())


def test_a_request_equal_to_its_limit_or_a_limit_alone_passes(tmp_path: Path):
    for resources in ({"requests": GPU, "limits": GPU}, {"limits": GPU}):
        path = tmp_path / "wf.json"
        path.write_text(json.dumps(_with_requests(resources)))
        assert invoke("lint", str(path)).exit_code == 0


# -- 6: lint and simulate agree on a queues file, and say which workflow and file --------

QUEUES = "- {name: team-a, nominal: {pods: 4}}\n"
NAMING = "name: w\nqueueName: team-zzz\nstages:\n- {name: a, tasks: 2, taskDurationSeconds: 3}\n"


@pytest.mark.parametrize(
    "text",
    [
        "name: team-a\nnominal: {pods: 4}\n",  # one queue, not in a list
        "team-a: {nominal: {pods: 4}}\nteam-b: {nominal: {pods: 4}}\n",  # keyed by name
    ],
)
def test_a_queues_file_that_is_no_list_is_refused_by_lint_as_by_simulate(
    tmp_path: Path, workflow: Path, text: str
):
    queues = tmp_path / "queues.yaml"
    queues.write_text(text)
    said = "give a non-empty list of queues"
    one_error(invoke("simulate", "-w", "file", "--file", str(workflow), "--queues", str(queues)))
    linted = invoke("lint", str(queues))
    assert linted.exit_code == 1 and said in linted.stdout and "skipped" not in linted.stdout


def test_a_workflow_naming_a_queue_the_file_lacks_is_named_by_both(tmp_path: Path):
    queues, flow = tmp_path / "queues.yaml", tmp_path / "flow.yaml"
    queues.write_text(QUEUES)
    flow.write_text(NAMING)
    lacks = f"names queue 'team-zzz', which the queues file {queues} does not declare"
    one_error(
        invoke("simulate", "-w", "file", "--file", str(flow), "--queues", str(queues)),
        f"of {flow} {lacks}",
    )
    linted = invoke("lint", "--pool-size", "4", str(flow), str(queues))
    assert linted.exit_code == 1
    assert f"workflow 'w' of {flow} {lacks}" in linted.stdout
    assert "1 bare workflow(s) and 1 queues file(s) in 2 file(s): 1 invalid" in linted.stdout


def test_lint_says_it_checked_a_queues_file_and_whether_against_a_pool(tmp_path: Path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    alone = invoke("lint", str(queues))
    assert alone.exit_code == 0
    assert "1 queues file(s) in 1 file(s)" in alone.stdout
    assert f"note: {queues}: its quotas were not checked against a pool" in alone.stdout
    pooled = invoke("lint", "--pool-size", "4", str(queues))
    assert pooled.exit_code == 0 and "note:" not in pooled.stdout


# -- 9: the smaller ones ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_advise_says_nothing_before_the_error_of_a_history_that_does_not_load(tmp_path: Path):
    bad = tmp_path / "binary.yaml"
    bad.write_bytes(BINARY)
    said = one_error(invoke("advise", str(bad)), str(bad))
    assert "replaying" not in said


def test_an_empty_workload_file_says_what_the_file_should_be(tmp_path: Path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    one_error(
        invoke("simulate", "-w", "file", "--file", str(empty)),
        f"{empty} holds no workflow",
        "or a history file (a list of workflows",
    )


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (("lint",), "idlegate lint [OPTIONS] {FILE}..."),
        (("history", "alibaba"), "idlegate history alibaba [OPTIONS] {BATCH_TASK.CSV}"),
        (("history", "export"), "idlegate history export [OPTIONS] [DOCUMENT]"),
        (("export-onnx",), "idlegate export-onnx [OPTIONS] {CHECKPOINT} {OUTPUT.ONNX}"),
    ],
)
def test_usage_lines_name_the_arguments_readably(command, usage):
    r = invoke(*command, "--help")
    assert r.stdout.splitlines()[0] == f"Usage: {usage}"


def test_the_example_historys_commands_name_a_path_that_exists_from_the_root():
    example = ROOT / "src" / "idlegate" / "training" / "examples" / "history.yaml"
    paths = re.findall(r"--file (\S+)", example.read_text())
    assert paths and all((ROOT / p).is_file() for p in paths), paths


GPU_TASK = {"cpu": "2", "nvidia.com/gpu": "1"}


def test_the_operators_pod_for_a_stage_of_gpus_has_the_limit_kubernetes_requires():
    # (resources alone became a request with no limit, which the API server refuses of an
    # extended resource: every such pod would have been refused at creation)
    from idlegate.api.task_pods import Owner, task_pod
    from idlegate.sim.resources import request_problem
    from idlegate.sim.spec import StageSpec

    stage = StageSpec.model_validate(
        {"name": "train", "tasks": 1, "taskDurationSeconds": 5, "resources": GPU_TASK}
    )
    asked = task_pod(Owner("default", "w", "uid"), stage, 0)["spec"]["containers"][0]["resources"]
    assert asked == {
        "requests": {"cpu": "2", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    assert all(request_problem(n, q, asked["limits"]) is None for n, q in asked["requests"].items())


# -- issue 80, item 11: what a new user tried ---------------------------------------------


@pytest.mark.parametrize("content", [LATIN1, BINARY], ids=["latin-1", "binary"])
def test_forecast_names_a_file_that_is_not_utf8(tmp_path: Path, content: bytes):
    bad = tmp_path / "wf.yaml"
    bad.write_bytes(content)
    one_error(invoke("forecast", str(bad)), f"the workflow file {bad} is not UTF-8 text (byte 0x")


def test_forecast_says_a_directory_is_one(tmp_path: Path):
    one_error(invoke("forecast", str(tmp_path)), f"{tmp_path}: it is a directory; give a")


BAD_KEY = "bad key!/with spaces"
SELECTING = {
    "apiVersion": "idlegate.io/v1alpha1",
    "kind": "DagWorkflow",
    "metadata": {"name": "w"},
    "spec": {
        "stages": [
            {
                "name": "a",
                "tasks": 1,
                "taskDurationSeconds": 3,
                "template": {
                    "spec": {
                        "nodeSelector": {BAD_KEY: "v"},
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                },
            }
        ]
    },
}


@pytest.mark.parametrize(
    "command",
    [("forecast",), ("simulate", "-w", "file", "--file"), ("advise",)],
)
def test_a_node_selector_lint_refuses_is_refused_by_every_reader(tmp_path: Path, command):
    # (one check, sim.pod_template's: forecast's local one, the simulator's files, lint's)
    path = tmp_path / "wf.yaml"
    path.write_text(json.dumps(SELECTING))
    linted = invoke("lint", str(path))
    said = f"{BAD_KEY!r} is not a label key"
    assert linted.exit_code == 1 and said in linted.stdout
    # (no operator is asked: the port is one nothing listens on, and no answer comes)
    url = ["--url", "http://127.0.0.1:9"] if command == ("forecast",) else []
    one_error(invoke(*command, str(path), *url), said, "spec.stages[0].template.spec.nodeSelector")


def test_train_refuses_an_out_that_is_a_file_before_it_trains(tmp_path: Path, monkeypatch):
    import idlegate.training.reinforce as reinforce

    def trained(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started before --out was checked")

    monkeypatch.setattr(reinforce, "train", trained)
    taken = tmp_path / "taken"
    taken.write_text("")
    for out in (taken, taken / "run"):
        one_error(invoke("train", "--out", str(out)), "is a file, not a directory")


def test_history_airflow_refuses_its_out_before_it_asks_airflow(tmp_path: Path, monkeypatch):
    # (as train and history alibaba: the runs of every DAG were fetched, then a traceback)
    import idlegate.integrations.airflow as airflow

    def fetched(*args: object, **kwargs: object) -> None:
        raise AssertionError("Airflow was asked before --out was checked")

    monkeypatch.setattr(airflow, "import_history", fetched)
    monkeypatch.setenv("AIRFLOW_PASSWORD", "secret")
    taken = tmp_path / "taken"
    taken.write_text("")
    asked = ["history", "airflow", "--url", "http://127.0.0.1:9", "--dag", "etl"]
    asked += ["--username", "admin"]
    for raw in ([], ["--raw"]):
        said = one_error(invoke(*asked, *raw, "--out", str(tmp_path)), "it is a directory")
        assert said.startswith(f"Error: cannot write the history file {tmp_path}:"), said
        one_error(invoke(*asked, *raw, "--out", str(taken / "h.yaml")), f"{taken / 'h.yaml'}")


def test_an_out_that_cannot_be_made_is_one_line_before_the_training(monkeypatch):
    # (a traceback after the run's set-up; train-window's only once it had trained)
    import idlegate.training.reinforce as reinforce
    import idlegate.training.window as window

    def trained(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started before --out was checked")

    monkeypatch.setattr(reinforce, "_Run", trained)
    monkeypatch.setattr(window, "_validate", trained)
    nowhere = "/proc/idlegate"  # (no folder can be made there, not even by root)
    one_error(invoke("train", "--out", nowhere), f"cannot create directory {nowhere}")
    one_error(
        invoke("train-window", "--out", f"{nowhere}/w.onnx"),
        f"cannot write the ONNX policy {nowhere}/w.onnx (",
        "give a path in a folder you can write to",
    )


@pytest.mark.parametrize("text", ["", "# settings to come\n", "{}\n"])
def test_train_refuses_a_config_with_no_setting(tmp_path: Path, text: str):
    empty = tmp_path / "empty.yaml"
    empty.write_text(text)
    one_error(invoke("train", "--config", str(empty)), str(empty), "give at least one")


def test_a_directory_given_for_a_file_is_said_to_be_one(tmp_path: Path):
    one_error(invoke("export-onnx", str(tmp_path), str(tmp_path / "p.onnx")), "is a directory")
    said = one_error(invoke("history", "export", "--from-sink", str(tmp_path)), "is a directory")
    assert f"e.g. {tmp_path / 'history.jsonl'}" in said
    # (they said "does not exist", or the system's "Is a directory": issue 80)
    said = one_error(invoke("train", "--config", str(tmp_path)), f"config file {tmp_path}: it is")
    assert said.endswith("it is a directory; give a YAML mapping of settings")
    said = one_error(invoke("history", "alibaba", str(tmp_path)), "it is a directory; give the")
    assert said.endswith(f"(e.g. {tmp_path / 'batch_task.csv'})")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:99999", "port '99999' is out of range (1-65535)"),
        ("http://127.0.0.1:0", "port '0' is out of range (1-65535)"),
        ("http://localhost:90x", "port '90x' is not a port number"),
        ("http:///visibility", "is not an http:// URL with a host"),
    ],
)
def test_an_operator_url_that_is_no_address_is_said_so(tmp_path: Path, url: str, said: str):
    one_error(invoke("visibility", "--url", url), f"--url {url.removesuffix('/visibility')}", said)
    flow = tmp_path / "wf.yaml"
    flow.write_text(json.dumps(dag_workflow({})))
    one_error(invoke("forecast", str(flow), "--url", url), said)


@pytest.mark.parametrize("where", ["queues file", "ExecutorPool"])
def test_a_quota_past_what_kubernetes_holds_is_refused_as_written(tmp_path: Path, where: str):
    queue = {"name": "team-a", "nominal": {"pods": "1e30"}}
    if where == "queues file":
        doc: object = [queue]
    else:
        doc = {
            "apiVersion": "idlegate.io/v1alpha1",
            "kind": "ExecutorPool",
            "metadata": {"name": "p"},
            "spec": {"size": 4, "queues": [queue]},
        }
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc))
    linted = invoke("lint", "--pool-size", "4", str(path))
    assert linted.exit_code == 1
    assert "pods=1e30 is beyond the largest quantity Kubernetes holds" in linted.stdout
    assert "9223372036854775807" not in linted.stdout


def test_a_queues_quota_past_what_kubernetes_holds_is_refused_by_simulate(
    tmp_path: Path, workflow: Path
):
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: team-a, nominal: {pods: 1e30}}\n")  # (a number, as to kubectl)
    one_error(
        invoke("simulate", "-w", "file", "--file", str(workflow), "--queues", str(queues)),
        "pods=1e+30 is beyond the largest quantity",
    )


@pytest.mark.parametrize(
    "content", ["", "# nothing yet\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"]
)
def test_lint_fails_on_files_with_nothing_to_check(tmp_path: Path, content: str):
    path = tmp_path / "manifests.yaml"
    path.write_text(content)
    one_error(invoke("lint", str(path)), "nothing to check in 1 file(s)")
    assert json.loads(invoke("lint", "--json", str(path)).stdout)["valid"] is False


def test_a_containers_requests_written_as_a_resource_list_say_so(tmp_path: Path):
    # (it said "requests: {'cpu': '1'} is not a quantity": true, and no help)
    stage = "{name: a, tasks: 1, taskDurationSeconds: 3, resources: {requests: {cpu: 1}}}"
    path = tmp_path / "wf.yaml"
    path.write_text(f"stages:\n- {stage}\n")
    said = "requests: a ResourceList names its quantities directly (cpu: 500m, memory: 1Gi)"
    one_error(invoke("simulate", "-w", "file", "--file", str(path), "-k", "2"), said)
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: a, nominal: {limits: {pods: 2}}}\n")
    linted = invoke("lint", str(queues))
    assert linted.exit_code == 1
    assert "queues[0][a].nominal.limits: a ResourceList names its quantities" in linted.stdout
    assert "move the limits' quantities up a level, in place of limits" in linted.stdout


def test_a_key_given_twice_is_refused_by_every_reader_as_by_lint(tmp_path: Path):
    # (simulate read the last `tasks:` silently where lint refused the file; then every
    # reader but lint said "it is not YAML or JSON (while constructing a mapping in
    # "<unicode string>" ...)" of a file that is YAML: issue 82)
    path = tmp_path / "wf.yaml"
    path.write_text(
        "kind: DagWorkflow\nspec:\n  stages:\n    - name: a\n      tasks: 1\n"
        "      tasks: 2\n      taskDurationSeconds: 3\n"
    )
    said = f"{path} line 6, column 7: the key 'tasks' is given twice in one mapping; keep one"
    linted = invoke("lint", str(path))
    assert linted.exit_code == 1
    assert f"{path}[0] line 6, column 7: the key 'tasks' is given twice" in linted.stdout
    # (a file that does not parse is no "0 invalid" alone: issue 82)
    assert "0 workflow(s) in 1 file(s): 0 invalid, 1 file unreadable, 1 problem(s)" in (
        linted.stdout
    )
    for args in (
        ["simulate", "-w", "file", "--file", str(path), "-k", "2"],
        ["forecast", str(path)],
    ):
        line = one_error(invoke(*args), said)
        assert "YAML or JSON" not in line and "constructing" not in line, line
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: a, nominal: {pods: 2}, nominal: {pods: 3}}\n")
    twice = "line 1, column 33: the key 'nominal' is given twice in one mapping; keep one"
    assert twice in invoke("lint", str(queues)).stdout
    one_error(invoke("simulate", "--queues", str(queues)), f"{queues} {twice}")
