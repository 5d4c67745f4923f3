"""A live Airflow run read again (operator/features/airflow.py, "Reads again" and "What
cannot be read"): a branch Airflow skipped leaves the job, a DAG changed during the run
(a task added, one removed) is followed, a pod whose run cannot be read again is
released to Airflow's own order, and an API error at a run's first pod is tried again
rather than kept for the run's life. Every scenario ends with no pod left gated while the
pool is idle (`stranded`). Recorded answers of Airflow 3.1.3 replayed over HTTP, fake
time (tests/operator_fakes.py)."""

from __future__ import annotations

import copy

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR
from idlegate.operator.features.airflow import POLL, RETRIES
from tests.airflow_data import session
from tests.operator_fakes import Harness, stranded
from tests.test_airflow_live import LIVE, MAPPING, _path, with_live_run
from tests.test_airflow_operator import (
    _advance,
    _events,
    _finish,
    _gated,
    _see,
    airflow,
    worker_pod,
)

BRANCH = "example_branch_operator"
DOWN = {"status": 503, "body": {"detail": "Service Unavailable"}}
"""Airflow's API server answering an error (a proxy's 503, a restart)."""


def _live(dag: str) -> dict:
    """The recorded answers with a live run of `dag`, its tasks queued now (their pods'
    deadlines far)."""
    answers = with_live_run(session(dag), dag)
    for ti in _instances(answers, dag):
        ti["queued_when"] = None
    return answers


def _instances(answers: dict, dag: str) -> list[dict]:
    """The live run's task instances among `answers` (edited in place: the next read sees
    them)."""
    return answers[f"{_path(dag, LIVE)}/taskInstances?limit=100&offset=0"]["body"]["task_instances"]


def _states(answers: dict, dag: str, **states: str) -> None:
    for ti in _instances(answers, dag):
        if ti["task_id"] in states:
            ti["state"] = states[ti["task_id"]]


async def _pod(h: Harness, side, task: str, dag: str = MAPPING, index: int = -1) -> str:
    """Airflow creates the gated pod of `task`, and the operator sees it; its name."""
    pod = worker_pod(task, index, dag=dag)
    name = pod["metadata"]["name"]
    h.kube.pods[("default", name)] = pod
    await _see(h, side, name)
    return name


def _released_by_policy(h: Harness, name: str) -> bool:
    pod = h.kube.pods["default", name]
    return not pod["spec"].get("schedulingGates") and ANNOTATION_EXECUTOR in (
        pod["metadata"].get("annotations") or {}
    )


@pytest.mark.asyncio
async def test_a_branch_airflow_skipped_leaves_the_job_so_the_task_after_it_runs(tmp_path):
    # run_this_first (no pod) >> branching >> branch_a..d >> follow_* (no pod) >> join (no
    # pod) >> branching_ext_python: the branch takes branch_a, and Airflow skips the others
    answers = _live(BRANCH)
    with airflow(answers, tmp_path, pool=2) as (h, side):
        await _pod(h, side, "branching", BRANCH)
        assert _released_by_policy(h, "branching")
        await _finish(h, side, "branching", (1, 5))
        # the skips show only after the pod ended: the next pod's arrival reads them
        _states(answers, BRANCH, branching="success", branch_b="skipped", branch_c="skipped")
        _states(answers, BRANCH, branch_d="skipped")
        await _pod(h, side, "branch_a", BRANCH)
        assert _released_by_policy(h, "branch-a")
        _states(answers, BRANCH, branch_a="success")
        await _finish(h, side, "branch-a", (6, 9))
        # Airflow runs what follows the join: its pod is released, not held for branch_b..d
        name = await _pod(h, side, "branching_ext_python", BRANCH)
        assert _released_by_policy(h, name), _events(h)
        assert stranded(h) == []
        stages = {s.task_id for s in side.runs["default", BRANCH, LIVE].job.live_stages}
        assert not stages & {"branch_b", "branch_c", "branch_d"}


@pytest.mark.asyncio
async def test_a_skip_with_no_pod_changing_is_read_at_the_poll(tmp_path):
    answers = _live(BRANCH)
    with airflow(answers, tmp_path, pool=2) as (h, side):
        await _pod(h, side, "branching", BRANCH)
        _states(answers, BRANCH, branch_b="skipped")
        stages = lambda: {s.task_id for s in side.runs["default", BRANCH, LIVE].job.live_stages}  # noqa: E731
        assert "branch_b" in stages()
        await _advance(h, POLL)
        assert "branch_b" not in stages()


def _changed_dag(answers: dict) -> None:
    """The DAG file changed during the live run: task ``e`` added after ``add_one`` and
    ``sum_it`` removed (Airflow marks its instance ``removed``), a new DAG version."""
    details = next(v["body"] for k, v in answers.items() if k.endswith(f"{MAPPING}/details"))
    tasks = next(v["body"] for k, v in answers.items() if k.endswith(f"{MAPPING}/tasks"))
    version = {**details["latest_dag_version"], "id": "second-version", "version_number": 2}
    details["latest_dag_version"] = version
    added = copy.deepcopy(next(t for t in tasks["tasks"] if t["task_id"] == "sum_it"))
    added["task_id"] = "e"
    tasks["tasks"] = [t for t in tasks["tasks"] if t["task_id"] != "sum_it"] + [added]
    for t in tasks["tasks"]:
        if t["task_id"] == "add_one":
            t["downstream_task_ids"] = ["e"]
    answers[_path(MAPPING, LIVE)]["body"]["dag_versions"].append(version)
    instances = _instances(answers, MAPPING)
    new = {
        **copy.deepcopy(next(ti for ti in instances if ti["task_id"] == "sum_it")),
        "task_id": "e",
    }
    _states(answers, MAPPING, sum_it="removed")
    instances.append(new)


@pytest.mark.asyncio
async def test_a_dag_changed_during_the_run_schedules_the_new_tasks_pod(tmp_path):
    answers = _live(MAPPING)
    with airflow(answers, tmp_path, pool=2) as (h, side):
        for i in range(3):
            await _pod(h, side, "add_one", index=i)
        _changed_dag(answers)
        _states(answers, MAPPING, add_one="success")
        for name in ("add-one-0", "add-one-1"):
            await _finish(h, side, name, (1, 5))
        await _finish(h, side, "add-one-2", (5, 9))
        # the new task's pod: its run read again, the removed task no change of the DAG
        await _pod(h, side, "e")
        assert _released_by_policy(h, "e"), _events(h)
        assert not [e for e in _events(h) if e[1] == "Warning"]
        assert stranded(h) == []


@pytest.mark.asyncio
async def test_a_pod_whose_run_cannot_be_read_again_is_released_saying_why(tmp_path):
    answers = _live(MAPPING)
    with airflow(answers, tmp_path, pool=2) as (h, side):
        await _pod(h, side, "add_one", index=0)
        # a task the DAG does not have (not removed): the DAG changed under the run
        _instances(answers, MAPPING).append({**_instances(answers, MAPPING)[0], "task_id": "x"})
        await _pod(h, side, "x")
        assert _gated(h) == [] and not _released_by_policy(h, "x")
        (said,) = [e["message"] for e in h.kube.events if e["reason"] == "DagChanged"]
        assert "cannot be read again" in said and "fewer --runs" not in said
        assert side.released.labels("DagChanged")._value.get() == 1


@pytest.mark.asyncio
async def test_an_api_error_at_a_runs_first_pod_is_tried_again_not_kept(tmp_path):
    answers = _live(MAPPING)
    run = answers[_path(MAPPING, LIVE)]
    answers[_path(MAPPING, LIVE)] = DOWN
    with airflow(answers, tmp_path, pool=2) as (h, side):
        await _pod(h, side, "add_one", index=0)
        await _pod(h, side, "add_one", index=1)
        assert _gated(h) == ["add-one-0", "add-one-1"]  # (they wait for the next try)
        answers[_path(MAPPING, LIVE)] = run
        await _advance(h, RETRIES[0])
        assert _released_by_policy(h, "add-one-0") and _released_by_policy(h, "add-one-1")
        assert not [e for e in _events(h) if e[1] == "Warning"]


@pytest.mark.asyncio
async def test_a_refusal_for_an_api_error_lasts_until_a_pod_after_the_poll(tmp_path):
    answers = _live(MAPPING)
    run = answers[_path(MAPPING, LIVE)]
    answers[_path(MAPPING, LIVE)] = DOWN
    with airflow(answers, tmp_path, pool=1) as (h, side):
        await _pod(h, side, "add_one", index=0)
        for delay in RETRIES:
            await _advance(h, delay)
        assert _gated(h) == []  # released to Airflow's order, saying why
        assert ("add-one-0", "Warning", "AirflowError") in _events(h)
        answers[_path(MAPPING, LIVE)] = run
        await _pod(h, side, "add_one", index=1)
        assert _gated(h) == []  # still refused: released as it comes
        await _advance(h, POLL)
        await _pod(h, side, "add_one", index=2)
        # admitted again: the pods released before run beyond the pool of one, so the
        # third waits at the gate for an executor rather than running beside them
        assert ("default", MAPPING, LIVE) in side.runs
        assert _gated(h) == ["add-one-2"]


@pytest.mark.asyncio
async def test_a_run_that_cannot_be_read_again_has_its_gated_pods_released(tmp_path):
    answers = _live(MAPPING)
    with airflow(answers, tmp_path, pool=1) as (h, side):
        for i in range(2):
            await _pod(h, side, "add_one", index=i)
        assert _gated(h) == ["add-one-1"]
        answers[_path(MAPPING, LIVE)] = DOWN  # Airflow's API goes down for good
        await _advance(h, POLL)
        for delay in RETRIES[:-1]:
            await _advance(h, delay)
            assert _gated(h) == ["add-one-1"], _events(h)  # (tried again meanwhile)
        await _advance(h, RETRIES[-1])
        assert _gated(h) == []
        (said,) = [
            e["message"] for e in h.kube.events if e["involvedObject"]["name"] == "add-one-1"
        ]
        assert "cannot be read again" in said and "Airflow's own order" in said


@pytest.mark.asyncio
async def test_a_pod_of_a_task_not_known_yet_waits_through_an_api_error(tmp_path):
    # issue 60, item 8: a mapped task's new index meets an outage; its pod waits at the
    # gate while the read is tried again, as a run's first pod does, not released at once
    answers = _live(MAPPING)
    run = answers[_path(MAPPING, LIVE)]
    with airflow(answers, tmp_path, pool=2) as (h, side):
        await _pod(h, side, "add_one", index=0)
        answers[_path(MAPPING, LIVE)] = DOWN
        await _pod(h, side, "add_one", index=3)  # (Airflow expanded the task since)
        for delay in RETRIES[:-1]:
            assert _gated(h) == ["add-one-3"], _events(h)
            await _advance(h, delay)
        assert _gated(h) == ["add-one-3"], _events(h)
        instances = _instances(answers, MAPPING)
        instances.append({**next(ti for ti in instances if ti["map_index"] == 2), "map_index": 3})
        answers[_path(MAPPING, LIVE)] = run
        await _advance(h, RETRIES[-1])
        assert _released_by_policy(h, "add-one-3"), _events(h)
        assert not [e for e in _events(h) if e[1] == "Warning"]


@pytest.mark.asyncio
async def test_a_downstream_pod_is_released_once_airflow_reports_its_upstream_done(tmp_path):
    # issue 60, item 9: Airflow starts sum_it once add_one's instances succeeded, while
    # their pods still tear down; with an executor free its pod is released then, not
    # held until those pods end
    answers = _live(MAPPING)
    with airflow(answers, tmp_path, pool=4) as (h, side):
        for i in range(3):
            await _pod(h, side, "add_one", index=i)
        _states(answers, MAPPING, add_one="success")
        await _pod(h, side, "sum_it")
        assert _released_by_policy(h, "sum-it"), _events(h)
        # the add_one pods end later: their executors are held until then
        busy = {p["metadata"]["annotations"][ANNOTATION_EXECUTOR] for p in h.kube.occupying()}
        assert len(busy) == 4
        for i in range(3):
            await _finish(h, side, f"add-one-{i}", (1, 5))
        assert stranded(h) == []


@pytest.mark.asyncio
async def test_an_outage_is_logged_once_and_its_end_once(tmp_path, caplog):
    # issue 60, item 11: every failed read said it again (126 lines in a 60 s outage)
    answers = _live(MAPPING)
    run = answers[_path(MAPPING, LIVE)]
    caplog.set_level("INFO", logger="idlegate.operator.features.airflow")
    with airflow(answers, tmp_path, pool=1) as (h, side):
        await _pod(h, side, "add_one", index=0)
        answers[_path(MAPPING, LIVE)] = DOWN
        await _advance(h, POLL)
        for delay in RETRIES[:2]:
            await _advance(h, delay)
        answers[_path(MAPPING, LIVE)] = run
        await _advance(h, RETRIES[2])
        await _advance(h, POLL)
    said = [r.getMessage() for r in caplog.records if "Airflow" in r.getMessage()]
    assert len([m for m in said if "Service Unavailable" in m]) == 1, said
    assert len([m for m in said if "can be read again" in m]) == 1, said


@pytest.mark.asyncio
async def test_a_costly_remap_makes_the_next_refresh_wait_nine_times_its_cpu(tmp_path, monkeypatch):
    # a run of thousands of tasks costs tens of ms to remap at each of its pods' ends; the
    # next refresh waits nine times that, then reads what changed until then
    import idlegate.operator.features.airflow as airflow_module

    answers = _live(BRANCH)
    with airflow(answers, tmp_path, pool=2) as (h, side):
        await _pod(h, side, "branching", BRANCH)
        costs = iter([0.0, 1.0])  # (the next remap costs 1 s of CPU; those after, nothing)
        monkeypatch.setattr(airflow_module, "thread_time", lambda: next(costs, 5.0))
        await _finish(h, side, "branching", (1, 5))  # (its end: a refresh, costing 1 s)
        key = ("default", BRANCH, LIVE)
        assert side.reads[key].after == pytest.approx(h.clock.now() + 9)
        _states(answers, BRANCH, branching="success", branch_b="skipped")
        await side._refresh(key)  # (a pod's end now: it waits)
        stages = lambda: {s.task_id for s in side.runs[key].job.live_stages}  # noqa: E731
        assert "branch_b" in stages()
        await _advance(h, 9)
        assert "branch_b" not in stages()
