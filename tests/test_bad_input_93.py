"""Bad input a new user gave (issue 93, items 8-12), each refused as one line ``Error: ...``
(lint: one problem), exit 1, no traceback, and no empty ``--out`` folder left behind.

Items 8 and 9: documents no reader should walk, nested thousands deep or an alias bomb,
refused by every command that reads a user's YAML or JSON through one guard
(`idlegate.documents`). Item 10: a command that fails after making its ``--out`` removes
the folders it made (`textfiles.discard_empty_dirs`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.documents import MAX_DEPTH, YamlLoader, json_document

runner = CliRunner()


def deep_flow(n: int) -> str:
    return "[" * n + "]" * n


def deep_block(n: int) -> str:
    return "- " * n + "x\n"


def alias_bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


DOCUMENTS = {
    "5000-deep flow list": ("deep.yaml", deep_flow(5000)),
    "5000-deep block list": ("deep.yaml", deep_block(5000)),
    "150-deep list": ("deep.yaml", deep_flow(150)),
    "100000-deep JSON array": ("deep.json", deep_flow(100_000)),
    "150-deep JSON array": ("deep.json", deep_flow(150)),
    "9-level alias bomb": ("bomb.yaml", alias_bomb(9)),
    "a list holding itself": ("self.yaml", "&a [1, *a]\n"),
}
YAML_ONLY = {k for k, (name, _) in DOCUMENTS.items() if name.endswith(".yaml")}

COMMANDS = {
    "simulate -w file": lambda f: ["simulate", "-w", "file", "--file", str(f)],
    "advise": lambda f: ["advise", str(f)],
    "history export": lambda f: ["history", "export", str(f)],
    "history export --from-sink": lambda f: ["history", "export", "--from-sink", str(f)],
    "train --config": lambda f: ["train", "--config", str(f)],
    "train --file": lambda f: ["train", "-w", "file", "--file", str(f), "--preset", "quick"],
    "simulate --queues": lambda f: ["simulate", "--queues", str(f)],
    "forecast": lambda f: ["forecast", str(f), "--url", "http://127.0.0.1:9"],
}
NOT_JSON = {"train --config", "simulate --queues", "forecast"}
"""The readers of YAML alone (a .json file is YAML to them too, but guarded the same)."""


def write(tmp_path: Path, name: str, text: str, command: str) -> Path:
    if command == "history export --from-sink":  # (a sink is JSON Lines)
        name = Path(name).stem + ".jsonl"
        text = text.replace("\n", " ").strip() + "\n"
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_reader_refuses_it_in_one_line(tmp_path: Path, command: str, document: str) -> None:
    name, text = DOCUMENTS[document]
    if command == "history export --from-sink" and document in YAML_ONLY:
        pytest.skip("a sink is JSON Lines")
    path = write(tmp_path, name, text, command)
    r = runner.invoke(app, COMMANDS[command](path))
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit), r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert str(path) in lines[0] or path.name in lines[0], lines[0]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_lint_reports_it_as_one_problem(tmp_path: Path, document: str) -> None:
    name, text = DOCUMENTS[document]
    path = tmp_path / name
    path.write_text(text)
    r = runner.invoke(app, ["lint", str(path)])
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit), r.output
    assert "Traceback" not in r.output
    assert str(path) in r.stdout


def test_the_guard_says_why_and_lets_a_document_at_the_bound_through() -> None:
    assert yaml.load(deep_flow(MAX_DEPTH), Loader=YamlLoader) is not None
    assert json_document(deep_flow(MAX_DEPTH)) is not None
    with pytest.raises(yaml.YAMLError, match=f"more than {MAX_DEPTH} deep"):
        yaml.load(deep_flow(MAX_DEPTH + 1), Loader=YamlLoader)
    with pytest.raises(json.JSONDecodeError, match=f"more than {MAX_DEPTH} deep"):
        json_document('{"a": "[[[", "b": ' + deep_flow(MAX_DEPTH + 1) + "}")
    with pytest.raises(yaml.YAMLError, match="expand it by more than"):
        yaml.load(alias_bomb(7), Loader=YamlLoader)
    anchors = yaml.load(alias_bomb(5), Loader=YamlLoader)  # (9^5 nodes: allowed)
    assert len(anchors["a5"]) == 9


# -- 10: no empty --out folder left behind ----------------------------------------------

CYCLE = (
    "name: c\nstages:\n- {name: a, tasks: 1, taskDurationSeconds: 1, dependsOn: [b]}\n"
    "- {name: b, tasks: 1, taskDurationSeconds: 1, dependsOn: [a]}\n"
)
WORKFLOW = "name: w\nstages:\n- {name: a, tasks: 2, taskDurationSeconds: 3}\n"
FAILING_AFTER_OUT = {
    "compare, a cycle": "compare -w file --file cycle.yaml --seeds 1 --schedulers fifo --out D",
    "compare, bad queues": "compare -w file --file wf.yaml --queues badq.yaml --seeds 1 "
    "--schedulers fifo --out D",
    "compare, not ONNX": "compare -w file --file wf.yaml --seeds 1 "
    "--schedulers fifo,learned:fake.onnx --out D",
    "forecast evaluate": "forecast evaluate -w file --file cycle.yaml --out D",
    "advise": "advise cycle.yaml --out D",
    "history simulate": "history simulate -w file --file cycle.yaml --out D/sub/h.yaml",
    "evaluate, no such workload": "evaluate --suite quick --workloads bogus-0.8 "
    "--schedulers l=learned:default --out D",
    "evaluate, no such ONNX": "evaluate --suite quick --workloads synthetic-0.8 "
    "--schedulers l=learned:missing.onnx --out D",
}


@pytest.mark.parametrize("case", FAILING_AFTER_OUT)
def test_a_failing_command_leaves_no_empty_out_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cycle.yaml").write_text(CYCLE)
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "badq.yaml").write_text("- {name: a, nominal: {pods: -3}}\n")
    (tmp_path / "fake.onnx").write_text("not onnx")
    r = runner.invoke(app, FAILING_AFTER_OUT[case].split())
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "D").exists()


def test_a_folder_that_was_there_or_was_written_into_stays(tmp_path: Path) -> None:
    from idlegate.textfiles import check_out_dir, discard_empty_dirs

    (tmp_path / "had").mkdir()
    check_out_dir(tmp_path / "had")
    check_out_dir(tmp_path / "new" / "written")
    (tmp_path / "new" / "written" / "report.md").write_text("x")
    check_out_dir(tmp_path / "empty" / "deep")
    discard_empty_dirs()
    assert (tmp_path / "had").is_dir() and (tmp_path / "new" / "written").is_dir()
    assert not (tmp_path / "empty").exists()


# -- 13: a script's or a command's output that cannot be what it writes -------------------


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("policy.txt", "it is written as .onnx, so give a name ending so, e.g."),
        ("README", "it is written as .onnx"),
        (".", "it is a directory"),
    ],
)
def test_export_onnx_writes_only_an_onnx_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    kept = tmp_path / "policy.txt"
    kept.write_text("a user's notes")
    r = runner.invoke(app, ["export-onnx", "best.pt", name])
    assert r.exit_code == 1 and r.stderr.startswith("Error: ") and said in r.stderr, r.output
    assert kept.read_text() == "a user's notes"


# -- 12: messages that said the wrong thing ---------------------------------------------

DAG_WORKFLOW = "kind: DagWorkflow\nspec: {stages: [{name: a, tasks: 1, taskDurationSeconds: 1}]}\n"


@pytest.mark.parametrize(
    ("files", "args", "stdin", "said"),
    [
        (  # (YAML with two documents was "not YAML or JSON")
            {"two.yaml": DAG_WORKFLOW + "---\n" + DAG_WORKFLOW},
            ["forecast", "two.yaml"],
            None,
            "two.yaml: it holds 2 documents; a what-if asks about one DagWorkflow",
        ),
        (  # (`-` was a file that does not exist; lint reads standard input)
            {},
            ["forecast", "-"],
            "x: [\n",
            "Error: standard input: it is not YAML or JSON",
        ),
        (  # (a sign was "must be a whole number")
            {},
            ["simulate", "-w", "synthetic", "-o", "num_jobs=-5"],
            None,
            "num_jobs (-5) must be at least 1",
        ),
        (  # (both options were ignored silently: the file's queues replace the teams')
            {"q.yaml": "".join(f"- {{name: team-{t}, nominal: {{pods: 4}}}}\n" for t in "abc")},
            [
                "simulate",
                "-w",
                "teams",
                "-o",
                "reclaim=Any",
                "-o",
                "wait_bound=5",
                "--queues",
                "q.yaml",
            ],
            None,
            "-o wait_bound and -o reclaim set the teams workload's own queues, which --queues",
        ),
        (  # (was "line 1 column 81" of the line alone, and advice to give YAML)
            {"h.jsonl": '{"name": "w", "stages": []}\n{"name": "cut, "sta\n'},
            ["simulate", "-w", "file", "--file", "h.jsonl"],
            None,
            "h.jsonl line 2, column 17: Expecting ',' delimiter; each line of a .jsonl file",
        ),
        (  # (the last of the two was taken silently)
            {"c.yaml": "preset: quick\npreset: full\n"},
            ["train", "--config", "c.yaml"],
            None,
            "c.yaml' line 2, column 1: the key 'preset' is given twice in one mapping",
        ),
    ],
)
def test_a_message_says_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files, args, stdin, said
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r = runner.invoke(app, args, input=stdin)
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1
    assert said in r.stderr, r.stderr


def test_an_exponent_without_a_dot_is_a_number_as_kubernetes_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "e3.yaml"
    path.write_text("name: w\nstages:\n- {name: a, tasks: 2, taskDurationSeconds: 1e3}\n")
    assert runner.invoke(app, ["simulate", "-w", "file", "--file", str(path)]).exit_code == 0
    assert runner.invoke(app, ["lint", str(path)]).exit_code == 0
    assert yaml.load("[1e3, -2E-1, 1_0e1, '1e3', 1e3x]", Loader=YamlLoader) == [
        1000.0,
        -0.2,
        100.0,
        "1e3",
        "1e3x",
    ]


# -- 11: what lint refuses, forecast refuses; one name rule, one integer bound ------------


def _object(kind: str, name: str, spec: dict) -> str:
    meta = {"apiVersion": "idlegate.io/v1alpha1", "kind": kind, "metadata": {"name": name}}
    return yaml.safe_dump({**meta, "spec": spec}, allow_unicode=True)


ONE_STAGE = {"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}]}
MANY_STAGES = {
    "stages": [{"name": f"s{i}", "tasks": 1, "taskDurationSeconds": 1} for i in range(10_000)]
}
WORKFLOWS = {
    "a 300-character name": (_object("DagWorkflow", "a" * 300, ONE_STAGE), "longer than 63"),
    "café-ünï": (_object("DagWorkflow", "café-ünï", ONE_STAGE), "not a valid Kubernetes object"),
    "10,000 stages": (_object("DagWorkflow", "big", MANY_STAGES), "Kubernetes stores per object"),
}


@pytest.mark.parametrize("case", WORKFLOWS)
def test_forecast_refuses_what_lint_refuses(tmp_path: Path, case: str) -> None:
    text, said = WORKFLOWS[case]
    path = tmp_path / "w.yaml"
    path.write_text(text)
    linted = runner.invoke(app, ["lint", str(path)])
    assert linted.exit_code == 1 and said in linted.stdout, linted.output
    asked = runner.invoke(app, ["forecast", str(path), "--url", "http://127.0.0.1:9"])
    assert asked.exit_code == 1 and said in asked.stderr, asked.output  # (before it asks)
    assert "cannot reach the operator" not in asked.stderr


POOLS = {
    "a 300-character name": ("p" * 300, {}, "metadata.name: the name 'ppp"),
    "pööl": ("pööl", {}, "metadata.name: the name 'pööl' is not a valid Kubernetes object"),
    "a priority past int64": (
        "p",
        {"priority": 99999999999999999999},
        "priority: 99999999999999999999 is beyond the CRD's 64-bit integers",
    ),
    "a borrowBelow past int64": (
        "p",
        {"preemption": {"borrowBelow": 99999999999999999999999}},
        "99999999999999999999999 is beyond the CRD's 64-bit integers",
    ),
}


@pytest.mark.parametrize("case", POOLS)
def test_lint_refuses_a_pool_the_api_server_or_the_operator_would(tmp_path: Path, case: str):
    name, queue, said = POOLS[case]
    spec = {"size": 4, "queues": [{"name": "a", "nominal": {"pods": 2}, **queue}]}
    path = tmp_path / "pool.yaml"
    path.write_text(_object("ExecutorPool", name, spec))
    linted = runner.invoke(app, ["lint", str(path)])
    assert linted.exit_code == 1 and said in linted.stdout, linted.output


def test_lint_reads_a_queues_file_with_a_bad_entry_as_simulate_does(tmp_path: Path) -> None:
    # (issue 93, item 12: "a list, not a Kubernetes object... nothing to check")
    path = tmp_path / "q.yaml"
    path.write_text("- {name: a, nominal: {pods: 4}}\n- 3\n")
    simulated = runner.invoke(app, ["simulate", "-w", "teams", "--queues", str(path)])
    linted = runner.invoke(app, ["lint", str(path)])
    said = "a queue is a mapping with a name and a nominal quota"
    assert simulated.exit_code == 1 and said in simulated.stderr, simulated.output
    assert linted.exit_code == 1 and said in linted.stdout, linted.output


def test_lint_notes_a_decide_that_has_no_stop_to_judge(tmp_path: Path) -> None:
    # (issue 93, item 11: `decide: Forecast` on a queue with nothing stoppable passed)
    queues = [
        {"name": "a", "nominal": {"pods": 2}, "preemption": {"decide": "Forecast"}},
        {
            "name": "b",
            "nominal": {"pods": 2},
            "preemption": {"decide": "Forecast", "reclaim": "Any"},
        },
    ]
    path = tmp_path / "pool.yaml"
    path.write_text(_object("ExecutorPool", "p", {"size": 4, "queues": queues}))
    r = runner.invoke(app, ["lint", str(path)])
    assert r.exit_code == 0, r.output
    notes = [line for line in r.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "queue 'a' of ExecutorPool 'p' sets decide: Forecast" in notes[0]
    assert "stops nothing" in notes[0]


def test_lint_reads_a_queues_file_without_quotas_as_simulate_does(tmp_path: Path) -> None:
    # (issue 93, item 12: "a list, not a Kubernetes object... nothing to check")
    path = tmp_path / "q.yaml"
    path.write_text("- {name: team-a}\n- {name: team-b, weight: 2}\n- {name: team-c}\n")
    assert runner.invoke(app, ["simulate", "-w", "teams", "--queues", str(path)]).exit_code == 0
    linted = runner.invoke(app, ["lint", str(path)])
    assert linted.exit_code == 0 and "1 queues file(s) in 1 file(s): 0 invalid" in linted.stdout
