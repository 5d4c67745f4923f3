"""`idlegate history alibaba`: the raw trace's batch_task.csv as a history file.

The CSV is written here from the trace's published schema (cluster-trace-v2018:
task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError, SpecError
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.history import load_history, read_batch_tasks
from idlegate.sim.workloads import build_workload

ROWS = """\
M1,2,j_1,1,Terminated,100,110,100,0.39
R2_1,1,j_1,1,Terminated,112,130,50,0.2
J3_1_2,3,j_1,1,Terminated,131,131,100,0.39
task_Nzg3ODAwNDgzMTAwNTc2NDQ5Mg==,5,j_2,1,Terminated,50,57,,
M1,1,j_3,1,Terminated,10,20,100,0.3
R2_1,1,j_3,1,Failed,21,25,100,0.3
R2_1,1,j_4,1,Terminated,10,20,100,0.3
M1,1,j_5,1,Terminated,10,20,100,0.3
R1,1,j_5,1,Terminated,10,20,100,0.3
M1_2,1,j_6,1,Terminated,10,20,100,0.3
M2_1,1,j_6,1,Terminated,10,20,100,0.3
M1,1,j_7,1,Terminated,30,20,100,0.3
M1,0,j_8,1,Terminated,10,20,100,0.3
R4_3,2,j_9,1,Terminated,200,260,100,0.3
M3,4,j_9,1,Terminated,150,199,100,0.3
"""
HEADER = "task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem\n"


@pytest.fixture
def batch_tasks(tmp_path: Path) -> Path:
    path = tmp_path / "batch_task.csv"
    path.write_text(ROWS)
    return path


def test_finished_jobs_become_workflows_and_the_rest_are_counted(batch_tasks: Path):
    found = read_batch_tasks(batch_tasks)
    assert found.jobs == 9
    assert [w.name for w in found.workflows] == ["j_2", "j_1", "j_9"]  # by arrival
    assert dict(found.skipped) == {
        "unfinished": 1,
        "incomplete": 1,
        "repeated": 1,
        "cyclic": 1,
        "unusable": 2,
    }
    assert found.summary() == (
        "3 of 9 job(s) converted; skipped: 2 a row with an unusable time or count, "
        "1 not every task Terminated, 1 a task depends on one the file does not hold, "
        "1 a task number named twice, 1 dependencies in a cycle"
    )
    j1 = found.workflows[1]
    assert j1.arrival == 100 and j1.jct == 31 and j1.outcome == "Succeeded"
    stages = {s.name: s for s in j1.spec.stages}
    assert [s.name for s in j1.spec.stages] == ["m1", "r2-1", "j3-1-2"]
    assert stages["r2-1"].depends_on == ("m1",)
    assert stages["j3-1-2"].depends_on == ("m1", "r2-1")
    assert [s.tasks for s in j1.spec.stages] == [2, 1, 3]
    # each task's measured span; a span under a second is read as 1 s
    assert j1.measured == ((10.0,), (18.0,), (1.0,))
    assert [s.task_duration_seconds for s in j1.spec.stages] == [10.0, 18.0, 1.0]
    independent = found.workflows[0].spec.stages[0]
    assert independent.tasks == 5 and independent.depends_on == ()
    # plan_cpu (100 is one core) is each task's cpu request, plan_mem (100 is a machine's
    # memory, written as 100 GiB) its memory request; a blank one requests none
    assert [s.resources for s in j1.spec.stages] == [
        {"cpu": "1000m", "memory": "399Mi"},
        {"cpu": "500m", "memory": "205Mi"},
        {"cpu": "1000m", "memory": "399Mi"},
    ]
    assert independent.resources is None
    # a parent listed after its child in the file still comes first
    j9 = found.workflows[2]
    assert [s.name for s in j9.spec.stages] == ["m3", "r4-3"] and j9.arrival == 150


def test_a_nan_or_infinite_field_is_an_unusable_row(tmp_path: Path):
    # 'nan' and 'inf' parse as floats: a NaN instance count raised a ValueError from int()
    path = tmp_path / "nan.csv"
    path.write_text(
        "M1,nan,j_1,1,Terminated,1,2,100,0.1\n"
        "M1,1,j_2,1,Terminated,inf,inf,100,0.1\n"
        "M1,1,j_3,1,Terminated,1,nan,100,0.1\n"
        "M1,1,j_4,1,Terminated,1,2,inf,nan\n"
        "M1,1,j_5,1,Terminated,1,2,inf,50\n"
        "M1,1,j_6,1,Terminated,1,2,,50\n"
    )
    found = read_batch_tasks(path)
    # an infinite or NaN request is no request: counted, not converted (issue 60, 16)
    assert dict(found.skipped) == {"unusable": 3, "unrequestable": 2}
    assert [w.name for w in found.workflows] == ["j_6"]
    assert found.workflows[0].spec.stages[0].resources == {"memory": "51200Mi"}  # half of 100Gi


@pytest.mark.parametrize(
    ("cpu", "mem"),
    [
        ("-50", "0.1"),
        ("100", "-0.1"),
        ("1e300", "0.1"),
        ("100", "1e300"),
        ("9601", "1"),
        ("100", "100.5"),
        ("lots", "1"),
        ("nan", "1"),
        ("100", "-inf"),
    ],
)
def test_a_request_no_task_can_make_skips_its_job(tmp_path: Path, cpu: str, mem: str):
    # 1e300 was written as a 300-digit quantity, a negative one quietly left out
    path = tmp_path / "bad.csv"
    path.write_text(f"M1,1,j_1,1,Terminated,1,2,{cpu},{mem}\nM1,1,j_2,1,Terminated,1,2,9600,100\n")
    found = read_batch_tasks(path)
    assert dict(found.skipped) == {"unrequestable": 1}
    bad = f"plan_mem {mem!r}" if cpu == "100" else f"plan_cpu {cpu!r}"
    assert found.summary() == (  # (the value and its line: issue 69)
        "1 of 2 job(s) converted; skipped: 1 a plan_cpu or plan_mem no request can be "
        f"(first on line 1: {bad})"
    )
    assert found.workflows[0].spec.stages[0].resources == {"cpu": "96000m", "memory": "102400Mi"}


def test_the_history_replays_at_the_recorded_times(batch_tasks: Path, tmp_path: Path):
    from idlegate.sim.history import write_history

    out = write_history(tmp_path / "alibaba.yaml", read_batch_tasks(batch_tasks).workflows)
    back = load_history(out)
    assert [w.name for w in back] == ["j_2", "j_1", "j_9"]
    assert back[1].spec.stages[1].resources == {"cpu": "500m", "memory": "205Mi"}
    assert back[1].measured == ((10.0,), (18.0,), (1.0,))
    w = build_workload("file", 0, path=str(out), num_executors=4)
    assert [j.time for j in w.jobs] == [0.0, 50.0, 100.0]
    result = simulate(w, make_scheduler("fifo"), seed=0)
    assert result.unfinished == 0
    # j_1 alone on 4 executors: 10 s, then 18 s, then 1 s
    assert result.records[1].jct == pytest.approx(29.0)


def test_a_header_line_is_read_over(tmp_path: Path):
    path = tmp_path / "with-header.csv"
    path.write_text(HEADER + ROWS)
    found = read_batch_tasks(path)
    assert len(found.workflows) == 3 and found.jobs == 9 and found.skipped["unfinished"] == 1


def test_a_file_not_of_the_schema_is_named(tmp_path: Path):
    path = tmp_path / "other.csv"
    path.write_text("M1,2,j_1,1,Terminated,100,110,100,0.39\nM1,2,j_2,Terminated,100,110\n")
    with pytest.raises(SpecError, match=r"line 2 has 6 field.*batch_task.csv has 9: task_name"):
        read_batch_tasks(path)
    path.write_text("")
    with pytest.raises(SpecError, match="holds no task rows"):
        read_batch_tasks(path)
    with pytest.raises(IdlegateError, match="does not exist"):
        read_batch_tasks(tmp_path / "nowhere.csv")


def test_the_cli_writes_the_history_and_says_what_it_skipped(batch_tasks: Path, tmp_path: Path):
    runner = CliRunner()
    out = tmp_path / "h.jsonl"
    r = runner.invoke(app, ["history", "alibaba", str(batch_tasks), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "3 of 9 job(s) converted; skipped: 2 a row" in r.stderr
    assert r.stderr.strip().endswith(f"Written to {out}.")
    assert [w.name for w in load_history(out)] == ["j_2", "j_1", "j_9"]
    r = runner.invoke(app, ["history", "alibaba", str(batch_tasks)])
    assert r.exit_code == 0 and "name: j_1" in r.stdout
    failed = tmp_path / "failed.csv"
    failed.write_text("M1,1,j_3,1,Failed,10,20,100,0.3\n")
    r = runner.invoke(app, ["history", "alibaba", str(failed)])
    assert r.exit_code == 1
    assert "none of its 1 job(s) could be converted, skipped: 1 not every" in r.output
    assert "Traceback" not in r.output


def test_the_history_replays_on_a_pool_of_cpu_and_memory(batch_tasks: Path, tmp_path: Path):
    import json

    runner = CliRunner()
    out = tmp_path / "h.jsonl"
    assert (
        runner.invoke(app, ["history", "alibaba", str(batch_tasks), "-o", str(out)]).exit_code == 0
    )
    args = ["simulate", "-w", "file", "--file", str(out), "-k", "8", "-s", "fifo", "--json"]
    pods = json.loads(runner.invoke(app, args).stdout)
    r = runner.invoke(app, [*args, "--resources", "cpu=2,memory=1Gi"])
    assert r.exit_code == 0, r.output
    sized = json.loads(r.stdout)
    assert sized["jobs"] == pods["jobs"] == 3
    assert set(sized["utilisation_by_resource"]) == {"cpu", "memory"}
    assert sized["utilisation_by_resource"]["memory"] > 0
    # two of j_1's three 1-core tasks fit 2 CPUs at once, and 399Mi x 3 does not fit 1Gi
    assert sized["avg_jct"] > pods["avg_jct"]


def test_lint_says_which_task_of_a_history_never_fits_a_machine(batch_tasks: Path, tmp_path: Path):
    runner = CliRunner()
    out = tmp_path / "h.jsonl"
    assert (
        runner.invoke(app, ["history", "alibaba", str(batch_tasks), "-o", str(out)]).exit_code == 0
    )
    fits = runner.invoke(app, ["lint", str(out), "--pool-resources", "cpu=96,memory=100Gi"])
    assert fits.exit_code == 0, fits.output
    r = runner.invoke(app, ["lint", str(out), "--pool-resources", "cpu=800m,memory=100Gi"])
    assert r.exit_code == 1
    assert "[1]: stage 'm1' of workflow j_1 needs cpu=1,memory=399Mi at once, more cpu" in r.stdout
    assert "[2]: stage 'm3' of workflow j_9 needs" in r.stdout


def test_the_history_joins_the_queue_given_and_replays_in_it(batch_tasks: Path, tmp_path: Path):
    import json

    runner = CliRunner()
    out = tmp_path / "h.jsonl"
    args = ["history", "alibaba", str(batch_tasks), "-o", str(out)]
    r = runner.invoke(app, [*args, "--queue", "batch"])
    assert r.exit_code == 0, r.output
    assert {w.spec.queue_name for w in load_history(out)} == {"batch"}
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: web, nominal: {pods: 4}}\n- {name: batch, nominal: {pods: 4}}\n")
    sim = ["simulate", "-w", "file", "--file", str(out), "-k", "8", "-s", "fifo", "--json"]
    r = runner.invoke(app, [*sim, "--queues", str(queues)])
    assert r.exit_code == 0, r.output
    figures = {q["queue"]: q["workflows"] for q in json.loads(r.stdout)["queues"]}
    assert figures == {"web": 0, "batch": 3}
    r = runner.invoke(app, [*args, "--queue", "Batch"])
    assert r.exit_code == 1
    assert r.output.startswith("Error: queue name 'Batch' is not a DNS label")
