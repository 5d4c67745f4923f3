"""The operator records its history (operator/features/history.py, tracking.py) against the in-memory
fakes of tests/operator_fakes.py: run times from the pods' container states kept in the
status (a bounded, uniform sample), one sink line per finished workflow, written once
across restarts, and a failing sink that warns without stalling the pool."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from idlegate.api.history import from_document
from idlegate.api.task_pods import Owner, ran, task_pod
from idlegate.operator.core.tracking import StageTrack
from idlegate.operator.edge import intake
from idlegate.policy import DEFAULT_POLICY_PATH, SchedulerSpec, make_scheduler
from idlegate.sim.history import load_history
from idlegate.sim.spec import StageSpec
from tests.operator_fakes import FakeClock, FakeKube, Harness, harness, stage

pytestmark = pytest.mark.looptime  # the async tests: asyncio in fake loop time

ETL = {"stages": [stage("a", tasks=3, duration=10), stage("b", duration=4, deps=("a",))]}


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def finish_ran(h: Harness, name: str, seconds: int) -> None:
    """The kubelet ends pod `name` after `seconds`, saying so in its container state."""
    start = h.clock.now()
    h.clock.advance(seconds)
    pod = h.kube.pods[("default", name)]
    terminated = {"exitCode": 0, "startedAt": stamp(start), "finishedAt": stamp(h.clock.now())}
    pod["status"]["containerStatuses"] = [{"name": "task", "state": {"terminated": terminated}}]
    await h.finish(name)


async def recorded(h: Harness, count: int) -> None:
    """Until the sink's worker has answered `count` records (written or failed)."""
    for _ in range(200):
        done = h.metrics.value("idlegate_history_records_total")
        done += h.metrics.value("idlegate_history_errors_total")
        if done >= count:
            await h.settle()
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the sink answered {done} of {count} records")


async def run_etl(h: Harness, name: str = "etl") -> None:
    await h.submit(name, ETL)
    for i, seconds in enumerate((7, 9)):  # a pool of 2: a-0, a-1, then a-2, then b
        await finish_ran(h, f"{name}-a-{i}", seconds)
    await finish_ran(h, f"{name}-a-2", 12)
    await finish_ran(h, f"{name}-b-0", 3)


@pytest.mark.asyncio
async def test_a_finished_workflow_keeps_its_run_times_and_is_recorded_once(tmp_path: Path):
    sink = tmp_path / "vol" / "history.jsonl"
    kube, clock = FakeKube(), FakeClock(1_717_200_000)
    first = Harness(kube, clock, 2, make_scheduler("fifo"), history_file=sink)
    await run_etl(first)
    await recorded(first, 1)
    status = kube.status("etl")
    assert status["phase"] == "Succeeded" and status["historyRecorded"] is True
    assert status["poolSize"] == 2
    by_stage = {s["name"]: s.get("measuredDurationSeconds") for s in status["stages"]}
    assert sorted(by_stage["a"]) == [7, 9, 12] and by_stage["b"] == [3]  # the pods' own times
    [line] = sink.read_text().splitlines()
    [record] = load_history(sink)
    assert json.loads(line)["name"] == "default/etl"
    assert record.jct == status["jctSeconds"] and record.outcome == "Succeeded"
    assert record.policy == "fifo" and record.pool_size == 2
    assert record.measured == (tuple(by_stage["a"]), (3.0,))
    # the same record as `history export` makes of the live object
    listed = json.dumps({"kind": "List", "items": list(kube.workflows.values())})
    [exported] = from_document(listed, "kubectl")
    assert (exported.arrival, exported.jct, exported.measured) == (
        record.arrival,
        record.jct,
        record.measured,
    )
    # a restarted operator does not write it again
    second = Harness(kube, clock, 2, first.bridge.core.scheduler, history_file=sink)
    await intake.rebuild(second.pools)
    await second.settle()
    await asyncio.sleep(0.05)
    assert len(sink.read_text().splitlines()) == 1
    assert second.metrics.value("idlegate_history_records_total") == 0
    first.bridge.history.close()
    second.bridge.history.close()


@pytest.mark.asyncio
async def test_the_sink_records_the_scheduler_spec_a_replay_can_rebuild(tmp_path: Path):
    model = tmp_path / "models" / "model.onnx"
    model.parent.mkdir()
    shutil.copyfile(DEFAULT_POLICY_PATH, model)
    spec = f"learned:{model}"
    sink = tmp_path / "history.jsonl"
    kube, clock = FakeKube(), FakeClock(1_717_200_000)
    h = Harness(kube, clock, 2, make_scheduler(spec), history_file=sink, policy=str(model))
    await run_etl(h)
    await recorded(h, 1)
    h.bridge.history.close()
    assert kube.status("etl")["policy"] == "model"  # the status names the rule
    assert kube.status("etl")["scheduler"] == spec  # and the spec, for a live export
    [record] = load_history(sink)
    assert record.policy == spec  # the sink: --scheduler's canonical text (a bare PATH.onnx)
    listed = json.dumps({"kind": "List", "items": list(kube.workflows.values())})
    assert [w.policy for w in from_document(listed, "kubectl")] == [spec]  # the live export
    assert SchedulerSpec.parse(record.policy) == SchedulerSpec.parse(spec)


@pytest.mark.asyncio
async def test_a_workflow_finished_without_a_sink_is_recorded_by_the_next_operator(tmp_path):
    kube, clock = FakeKube(), FakeClock(1_717_200_000)
    first = Harness(kube, clock, 2, make_scheduler("fifo"))
    await run_etl(first)
    assert "historyRecorded" not in kube.status("etl")
    assert kube.status("etl")["stages"][0]["measuredDurationSeconds"]  # the status has them
    sink = tmp_path / "history.jsonl"
    second = Harness(kube, clock, 2, first.bridge.core.scheduler, history_file=sink)
    await intake.rebuild(second.pools)
    await recorded(second, 1)
    assert kube.status("etl")["historyRecorded"] is True
    assert [w.name for w in load_history(sink)] == ["default/etl"]
    second.bridge.history.close()


@pytest.mark.asyncio
async def test_a_failing_sink_warns_and_the_pool_goes_on(tmp_path: Path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    h = harness(pool=2, history_file=blocked / "history.jsonl")
    await run_etl(h)
    await recorded(h, 1)
    assert h.metrics.value("idlegate_history_errors_total") == 1
    assert "HistoryNotRecorded" in h.kube.reasons("etl")
    assert "historyRecorded" not in h.kube.status("etl")
    await run_etl(h, "next")  # the pool still serves
    assert h.kube.status("next")["phase"] == "Succeeded"
    h.bridge.history.close()


@pytest.mark.asyncio
async def test_a_restarted_operator_keeps_the_run_times_measured_before_it():
    kube, clock = FakeKube(), FakeClock(1_717_200_000)
    first = Harness(kube, clock, 2, make_scheduler("fifo"))
    await first.submit("etl", ETL)
    for i, seconds in enumerate((7, 9)):
        await finish_ran(first, f"etl-a-{i}", seconds)
    second = Harness(kube, clock, 2, first.bridge.core.scheduler)
    await intake.rebuild(second.pools)
    await finish_ran(second, "etl-a-2", 12)
    await finish_ran(second, "etl-b-0", 3)
    a, b = (s["measuredDurationSeconds"] for s in kube.status("etl")["stages"])
    assert sorted(a) == [7, 9, 12] and b == [3]


@pytest.mark.asyncio
async def test_a_stage_keeps_a_bounded_sample_of_its_run_times():
    h = harness(pool=4, history_samples=5)
    await h.submit("wide", {"stages": [stage("a", tasks=40, duration=1)]})
    await h.run_to_completion()
    kept = h.kube.status("wide")["stages"][0]["measuredDurationSeconds"]
    assert len(kept) == 5 and all(x == pytest.approx(1.0) for x in kept)


def test_the_sample_is_uniform_not_the_first_ones():
    spec = StageSpec(name="a", tasks=100, task_duration_seconds=1.0)
    means = []
    for seed in range(400):
        track = StageTrack(spec, 0)
        rng = random.Random(seed)
        for x in range(100):  # run times in finishing order: the short ones first
            track.sample(float(x), 10, rng)
        assert len(track.samples) == 10 and len(set(track.samples)) == 10
        means.append(sum(track.samples) / 10)
    assert sum(means) / len(means) == pytest.approx(49.5, abs=2.0)  # the first ten: 4.5


def test_run_times_come_from_the_container_states_init_containers_included():
    pod = task_pod(
        Owner("default", "wf", "uid"), StageSpec(name="s", tasks=1, task_duration_seconds=1.0), 0
    )
    assert ran(pod) is None
    pod["status"] = {
        "initContainerStatuses": [
            {"state": {"terminated": {"startedAt": stamp(100), "finishedAt": stamp(102)}}}
        ],
        "containerStatuses": [
            {"state": {"terminated": {"startedAt": stamp(103), "finishedAt": stamp(110)}}},
            {"state": {"terminated": {"startedAt": stamp(103), "finishedAt": stamp(111)}}},
        ],
    }
    assert ran(pod) == (100.0, 111.0)
    pod["status"]["containerStatuses"] = [{"state": {"terminated": {"finishedAt": "garbage"}}}]
    assert ran(pod) is None
