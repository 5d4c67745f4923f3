"""`idlegate history export` (api/history.py) and the history sink's rotation
(operator/features/history.py): a history exported from DagWorkflows, a sink or a kubectl document
reads back as the `file` workload, and replays the same JCTs as the history it came from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from idlegate.api.history import from_document, history_workflow, select, since_time, sink_files
from idlegate.cli import app
from idlegate.errors import IdlegateError
from idlegate.operator.features.history_sink import HistorySink
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.history import HistoryWorkflow, load_history, write_history
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads.file import FileConfig, file_workload
from tests.k8s.harness import ApiServer, serving_crd

START = 1_717_200_000.0


def stamp(t: float) -> str:
    """A time as the operator writes completionTime (microseconds)."""
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def dwf(
    name: str, arrival: float, jct: float, stages: list[dict[str, Any]], phase: str = "Succeeded"
) -> dict[str, Any]:
    """A DagWorkflow as a finished run leaves it: `stages` carry their measured run times
    under ``measured`` (they go to the status, as the operator keeps them)."""
    spec = [{k: v for k, v in s.items() if k != "measured"} for s in stages]
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {
            "name": name,
            "namespace": "team",
            "creationTimestamp": stamp(int(arrival) - 1).replace(".000000", ""),
        },
        "spec": {"stages": spec},
        "status": {
            "phase": phase,
            "jctSeconds": jct,
            "completionTime": stamp(arrival + jct),
            "policy": "fair",
            "poolSize": 4,
            "stages": [
                {"name": s["name"], "tasks": s["tasks"], "measuredDurationSeconds": s["measured"]}
                for s in stages
                if s.get("measured")
            ],
        },
    }


def kubectl_list(objects: list[dict[str, Any]]) -> str:
    """What `kubectl get dwf -A -o json` prints."""
    items = [{k: v for k, v in o.items() if k != "kind"} | {"kind": o["kind"]} for o in objects]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}})


def replay_jcts(path: Path, seed: int = 0) -> list[float]:
    workload = file_workload(FileConfig(path=str(path), num_executors=3), seed)
    result = simulate(workload, make_scheduler("fair"), seed)
    assert result.unfinished == 0
    return sorted(round(r.jct, 6) for r in result.records)


# -- the property: exported and re-read, a history replays the same JCTs ---------------------

durations = st.lists(
    st.floats(0.5, 300, allow_nan=False).map(lambda x: round(x, 3)), min_size=1, max_size=5
)
chain_stage = st.fixed_dictionaries(
    {"tasks": st.integers(1, 4), "estimate": st.integers(1, 120), "measured": durations | st.none()}
)
workflow = st.tuples(
    st.floats(0, 3600).map(lambda x: round(x, 3)),  # arrival offset
    st.floats(1, 5000).map(lambda x: round(x, 3)),  # jct
    st.lists(chain_stage, min_size=1, max_size=3),
)


def stages_of(drawn: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(drawn):
        stage = {"name": f"s{i}", "tasks": s["tasks"], "taskDurationSeconds": s["estimate"]}
        if i:
            stage["dependsOn"] = [f"s{i - 1}"]
        out.append(stage | ({"measured": s["measured"]} if s["measured"] else {}))
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(st.lists(workflow, min_size=1, max_size=6), st.sampled_from([".yaml", ".json", ".jsonl"]))
def test_an_exported_history_replays_the_jcts_of_the_history_it_records(
    tmp_path: Path, drawn: list[Any], suffix: str
) -> None:
    objects, direct = [], []
    for i, (offset, jct, raw) in enumerate(drawn):
        stages = stages_of(raw)
        objects.append(dwf(f"w{i}", START + offset, jct, stages))
        spec = parse_workflow(
            {"stages": [{k: v for k, v in s.items() if k != "measured"} for s in stages]}
        )
        measured = tuple(tuple(s["measured"]) if "measured" in s else None for s in stages)
        direct.append(
            HistoryWorkflow(
                spec, f"team/w{i}", START + offset, measured, "", jct, "Succeeded", "fair", 4
            )
        )
    exported = select(from_document(kubectl_list(objects), "stdin"), None)
    out = write_history(tmp_path / f"exported{suffix}", exported)
    source = write_history(tmp_path / f"direct{suffix}", direct)
    back = load_history(out)
    assert [(w.name, w.jct, w.outcome, w.pool_size) for w in back] == sorted(
        ((w.name, w.jct, w.outcome, w.pool_size) for w in direct),
        key=lambda r: (START + drawn[int(r[0][6:])][0], r[0]),
    )
    for w in back:  # the arrival the operator measured the JCT from, to the millisecond
        assert w.arrival == pytest.approx(START + drawn[int(w.name[6:])][0], abs=1e-3)
    for seed in (0, 1):
        assert replay_jcts(out, seed) == pytest.approx(replay_jcts(source, seed), abs=1e-2)


# -- sources ------------------------------------------------------------------------------------


def test_kubectl_json_on_stdin_is_exported_and_unfinished_workflows_are_left_out(tmp_path):
    done = dwf(
        "etl",
        START,
        42.0,
        [{"name": "a", "tasks": 2, "taskDurationSeconds": 5, "measured": [4.5, 5.5]}],
    )
    failed = dwf(
        "bad", START + 10, 3.0, [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}], "Failed"
    )
    running = dwf(
        "now", START + 20, 1.0, [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}], "Running"
    )
    out = tmp_path / "h.jsonl"
    result = CliRunner().invoke(
        app, ["history", "export", "-", "-o", str(out)], input=kubectl_list([running, failed, done])
    )
    assert result.exit_code == 0, result.output
    assert "2 finished workflow(s) exported" in result.output
    back = load_history(out)
    assert [(w.name, w.outcome, w.jct) for w in back] == [
        ("team/etl", "Succeeded", 42.0),
        ("team/bad", "Failed", 3.0),
    ]
    assert back[0].measured == ((4.5, 5.5),) and back[0].policy == "fair" and back[0].pool_size == 4
    # to standard output: YAML that reads back the same
    printed = CliRunner().invoke(app, ["history", "export", "-"], input=kubectl_list([done]))
    (tmp_path / "p.yaml").write_text(printed.stdout)
    assert [w.jct for w in load_history(tmp_path / "p.yaml")] == [42.0]


def test_a_document_that_is_not_dagworkflows_is_one_error_line(tmp_path):
    result = CliRunner().invoke(
        app, ["history", "export", "-"], input='{"kind": "PodList", "items": []}'
    )
    assert result.exit_code == 1
    assert result.output.strip().startswith(
        "Error: standard input holds a PodList, not DagWorkflows"
    )


def test_since_keeps_the_last_span_or_from_a_time():
    assert since_time("7d", 1000.0 + 7 * 86400) == 1000.0
    assert since_time("90m", 6000.0) == 600.0
    assert since_time("2024-06-01T00:00:00Z", 0) == START
    with pytest.raises(IdlegateError, match="neither a span"):
        since_time("last week", 0)
    objects = [
        dwf(f"w{i}", START + 100 * i, 1.0, [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}])
        for i in range(3)
    ]
    found = from_document(kubectl_list(objects), "x")
    assert [w.name for w in select(found + found, START + 150)] == ["team/w2"]  # once each
    assert [w.name for w in select(reversed(found), None)] == ["team/w0", "team/w1", "team/w2"]


def test_since_that_keeps_nothing_says_when_the_newest_arrived(tmp_path):
    objects = [
        dwf(f"w{i}", START + 100 * i, 1.0, [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}])
        for i in range(3)
    ]
    out = tmp_path / "h.yaml"
    args = ["history", "export", "-", "--since", "1d", "-o", str(out)]
    result = CliRunner().invoke(app, args, input=kubectl_list(objects))
    assert result.exit_code == 0, result.output  # as for any export that finds nothing
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("note: 3 finished workflow(s) read, none arrived since ")
    assert lines[0].endswith("(--since 1d); the newest arrived at 2024-06-01T00:03:20Z")
    assert lines[1] == f"0 finished workflow(s) exported to {out}."
    assert out.read_text().strip() == "[]"  # the empty history, as without --since
    # a simulated history's arrivals count from 0: the note says so
    simulated = tmp_path / "sim.jsonl"
    made = ["history", "simulate", "-w", "k8s-batch", "--jobs-count", "4", "-k", "2"]
    assert CliRunner().invoke(app, [*made, "--out", str(simulated)]).exit_code == 0
    again = ["history", "export", "--from-sink", str(simulated), "--since", "7d"]
    result = CliRunner().invoke(app, again)
    assert result.exit_code == 0, result.output
    assert "4 finished workflow(s) read" in result.stderr
    assert "counts from 0" in result.stderr and "drop --since" in result.stderr
    # something kept: no note
    kept = CliRunner().invoke(app, ["history", "export", "--from-sink", str(simulated)])
    assert "note:" not in kept.stderr and "4 finished workflow(s) exported" in kept.stderr


# -- the sink: rotation --------------------------------------------------------------------------


def record(i: int) -> HistoryWorkflow:
    spec = parse_workflow({"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}]})
    return history_workflow(
        f"team/w{i:04d}",
        spec,
        {"phase": "Succeeded", "jctSeconds": 1.0, "completionTime": stamp(START + i + 1)},
    )


def test_the_sink_rotates_at_its_size_keeps_its_backups_and_exports_oldest_first(tmp_path):
    path = tmp_path / "vol" / "history.jsonl"
    sink = HistorySink(path, max_bytes=4096, backups=3)
    for i in range(400):
        sink.write(record(i)).result()
    sink.close()
    files = sink_files(path)
    assert [f.name for f in files] == [
        "history.3.jsonl",
        "history.2.jsonl",
        "history.1.jsonl",
        "history.jsonl",
    ]
    assert all(f.stat().st_size <= 4096 for f in files)
    result = CliRunner().invoke(
        app, ["history", "export", "--from-sink", str(path), "-o", str(tmp_path / "out.yaml")]
    )
    assert result.exit_code == 0, result.output
    names = [w.name for w in load_history(tmp_path / "out.yaml")]
    # the newest records, in order, none twice; the oldest were rotated out
    assert names == [f"team/w{i:04d}" for i in range(400 - len(names), 400)]
    assert 60 < len(names) < 400  # (four files of about 23 records)


def test_a_missing_sink_is_one_error_line_naming_the_flag(tmp_path):
    result = CliRunner().invoke(app, ["history", "export", "--from-sink", str(tmp_path / "nope")])
    assert result.exit_code == 1 and "--history-file" in result.output


# -- the live objects, through the API ---------------------------------------------------------


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


def test_live_dagworkflows_are_read_through_the_api_by_namespace(api: ApiServer, tmp_path):
    stages = [{"name": "a", "tasks": 1, "taskDurationSeconds": 2, "measured": [2.5]}]
    for namespace, name in (("team", "one"), ("other", "two")):
        obj = dwf(name, START, 7.0, stages)
        status = obj.pop("status")
        obj["metadata"] = {"name": name}
        api.create("dagworkflows", obj, namespace)
        api.patch("dagworkflows", namespace, name, {"status": status}, subresource="status")
    cli = ["history", "export", "--kubeconfig", str(api.kubeconfig)]
    one = CliRunner().invoke(app, [*cli, "-n", "team", "-o", str(tmp_path / "a.yaml")])
    assert one.exit_code == 0, one.output
    assert [(w.name, w.measured) for w in load_history(tmp_path / "a.yaml")] == [
        ("team/one", ((2.5,),))
    ]
    every = CliRunner().invoke(app, [*cli, "-A", "-o", str(tmp_path / "b.yaml")])
    assert every.exit_code == 0, every.output
    assert sorted(w.name for w in load_history(tmp_path / "b.yaml")) == ["other/two", "team/one"]


def test_a_history_file_is_written_into_a_folder_not_made_yet(tmp_path, monkeypatch):
    # `history simulate --out out/hist.jsonl` on a fresh clone (docs/brain.md)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        app,
        ["history", "simulate", "-w", "follow", "--jobs-count", "20", "--out", "out/h.jsonl"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    assert len(load_history(tmp_path / "out" / "h.jsonl")) == 20


def test_a_record_keeps_the_queue_and_priority_class_its_workflow_named(tmp_path):
    spec = parse_workflow(
        {
            "queueName": "data-eng",
            "priorityClassName": "high",
            "stages": [{"name": "a", "tasks": 2, "taskDurationSeconds": 5}],
        }
    )
    path = write_history(
        tmp_path / "h.jsonl", [HistoryWorkflow(spec, "w", 0.0, ((5.0, 6.0),), "x")]
    )
    [back] = load_history(path)
    assert (back.spec.queue_name, back.spec.priority_class_name) == ("data-eng", "high")
    jobs = file_workload(FileConfig(path=str(path), num_executors=2)).jobs
    assert [j.queue for j in jobs] == ["data-eng"]
