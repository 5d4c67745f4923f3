"""The `shared` workload (issue 71): three teams of different work on one pool."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError
from idlegate.sim.workloads import build_workload
from idlegate.sim.workloads import shared as shared_module
from tests.helpers import alibaba_trace

SHORT = {"hours": 2.0, "heavy_source": "generated"}
"""Two hours, the heavy team generated: no data needed."""


def _teams(workload: object) -> dict[str, int]:
    out: dict[str, int] = {}
    for job in workload.jobs:  # type: ignore[attr-defined]
        team = job.name.split("/")[0]
        out[team] = out.get(team, 0) + 1
    return out


def test_three_teams_on_96_executors_and_the_small_teams_burst_an_hour_in():
    w = build_workload("shared", 1, **SHORT)
    assert w.num_executors == 96 and w.queues == ()
    assert set(_teams(w)) == {"heavy", "science", "small"}
    at_once = [j for j in w.jobs if j.name.startswith("small/") and j.time == 3600.0]
    burst = sum(j.dag.total_work for j in at_once)
    hourly = 0.7 / 3 * 96 * 3600  # (the small team's offered work of an hour)
    assert 5 * hourly <= burst < 5 * hourly + max(j.dag.total_work for j in at_once)
    science = [j.dag.num_stages for j in w.jobs if j.name.startswith("science/")]
    assert min(science) >= 10 and max(science) >= 100  # tens to hundreds of stages
    assert all(j.time < 2 * 3600 for j in w.jobs)


def test_three_queues_each_an_equal_share_of_the_pods():
    w = build_workload("shared", 1, queues="teams", **SHORT)
    assert [q.name for q in w.queues] == ["heavy", "science", "small"]
    assert [q.nominal["pods"] for q in w.queues] == [32_000] * 3
    assert all(j.queue == j.name.split("/")[0] for j in w.jobs)


def test_the_same_seed_gives_the_same_streams():
    a, b = build_workload("shared", 7, **SHORT), build_workload("shared", 7, **SHORT)
    assert [(j.time, j.name, j.dag.tasks) for j in a.jobs] == [
        (j.time, j.name, j.dag.tasks) for j in b.jobs
    ]
    # (a team's stream is its own: no burst leaves the other teams' jobs as they were)
    quiet = build_workload("shared", 7, burst=0, **SHORT)
    assert [j.time for j in a.jobs if j.name.startswith("heavy/")] == [
        j.time for j in quiet.jobs if j.name.startswith("heavy/")
    ]


def test_without_the_trace_the_heavy_team_is_generated_and_the_name_says_so(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(shared_module, "default_alibaba_dir", lambda: None)
    w = build_workload("shared", 1, hours=2.0)
    assert w.name == "shared (heavy: generated, no Alibaba trace)"
    with pytest.raises(IdlegateError, match="Alibaba"):
        build_workload("shared", 1, hours=2.0, heavy_source="alibaba")


def test_the_heavy_team_draws_the_traces_training_or_held_out_split():
    alibaba_trace()
    train = build_workload("shared", 1, hours=8.0, split="train")
    test = build_workload("shared", 1, hours=8.0, split="test")
    assert train.name == "shared"

    def heavy(w: object) -> set[int]:
        return {id(j.dag) for j in w.jobs if j.name.startswith("heavy/")}  # type: ignore[attr-defined]

    assert heavy(train) and heavy(test) and not heavy(train) & heavy(test)
    cap = 2 * 3600 * 32  # (two hours of a team's share)
    assert all(j.dag.total_work <= cap for j in train.jobs if j.name.startswith("heavy/"))
