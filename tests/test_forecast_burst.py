"""Forecasts through a burst under queues (issue 96): a replay's cost does not grow with
a flooded queue, what the speed-ups change is nothing the forecast reads, and a waiting
workflow's finish includes its run (never its start)."""

from __future__ import annotations

import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.analytic import _only_launchable
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Engine, JobArrival, Workload
from idlegate.sim.forecast import WorkflowForecast, forecast, replay
from idlegate.sim.protocol import Decision
from idlegate.sim.rollout import Future
from idlegate.sim.workloads import build_workload
from idlegate.sim.workloads.k8s_batch import K8sPodDurations
from tests.helpers import chain, dag


def test_only_launchable_is_the_list_of_one_stage() -> None:
    """Known answers of analytic's condition 2 (the only launchable stage), read up to a
    second stage: one job waiting, two, and a gang that does not fit the free ones."""
    cluster = Cluster(2)
    a = cluster.add_job(chain(5.0), 0.0)
    assert _only_launchable(cluster, a.stages[0])
    b = cluster.add_job(chain(1.0), 0.0)
    assert not _only_launchable(cluster, a.stages[0])
    assert not _only_launchable(cluster, b.stages[0])
    cluster.apply(Decision(b.stages[0], 1), 0.0)  # (b's one task runs: a alone, 1 free)
    assert _only_launchable(cluster, a.stages[0])
    gang = cluster.add_job(dag(("g", 2, 3.0, [], True)), 0.0)  # (2 tasks > 1 free)
    assert _only_launchable(cluster, a.stages[0])
    assert not _only_launchable(cluster, gang.stages[0])
    for stage in (a.stages[0], gang.stages[0]):
        listed = cluster.runnable_stages()
        assert _only_launchable(cluster, stage) == (listed == [stage])


def test_a_forecasts_replay_without_the_ledger_goes_as_with_it() -> None:
    """A forecast's replays keep no queue ledger (`replay`'s `ledger`): the same starts,
    finishes and events as a replay that keeps it, on `teams`' flooding queue."""
    w = build_workload("teams", 2, num_jobs=8)
    engine = Engine.for_workload(w, make_scheduler("srpt"), 2)
    engine.run(60.0)
    cluster = engine.cluster
    assert cluster.admission is not None and len(cluster.jobs) > 10
    rule = make_scheduler("srpt")
    counted: list[bool] = []

    def note(sim: Cluster) -> None:
        assert sim.admission is not None
        counted.append(sim.admission.counts)

    kept = replay(cluster, rule, Future((), 7), float("inf"), after=note)
    light = replay(cluster, rule, Future((), 7), float("inf"), after=note, ledger=False)
    assert kept == light and counted == [True, False]
    assert cluster.admission.counts  # (the pool's own ledger counts on)


def test_no_waiting_workflows_finish_is_its_start() -> None:
    """Item 6: one executor busy with A (100 s, a spread of 0.5), B (2 s) waiting; the
    replays' starts of B spread by more than its run, so on some seeds its start read at
    0.75 is past the finishes' median, where the finish used to be raised to the start:
    equal, without its run. Now the finish is the finishes' median moved as late as the
    start was (their median to 0.75), at least the start plus B's shortest run."""
    a = JobArrival(0.0, "a", chain(100.0), K8sPodDurations(0.0, (100.0,), 0.5))
    b = JobArrival(1.0, "b", chain(2.0), K8sPodDurations(0.0, (2.0,), 0.5))
    engine = Engine.for_workload(Workload("t", (a, b), 1), make_scheduler("fifo"), 0)
    engine.run(5.0)
    clamped = 0
    for seed in range(10):
        late, middle = (
            forecast(engine.cluster, make_scheduler("fifo"), seed=seed, start_quantile=q).of(1)
            for q in (0.75, 0.5)
        )
        assert isinstance(late, WorkflowForecast) and isinstance(middle, WorkflowForecast)
        shift = late.start.median - middle.start.median
        assert late.finish.median == pytest.approx(middle.finish.median + shift)
        assert late.finish.median > late.start.median + 0.5
        assert late.finish.low <= late.finish.median <= late.finish.high
        clamped += late.start.median >= middle.finish.median  # (the old rule: equal)
    assert clamped  # (the case the old rule got wrong arises on these seeds)


def test_the_scripts_refuse_a_burst_past_the_stream_and_a_missing_stream(tmp_path, capsys):
    """A burst that begins at or after the stream's end, and a cost run over a directory
    no stream was written to, are one sentence each that says what to give instead."""
    from benchmarks import burst_stream, forecast_burst
    from idlegate.flags import run_script

    argv = ["--hours", "1", "--out", str(tmp_path / "s")]
    with pytest.raises(SystemExit) as ended:
        run_script(burst_stream.parser(), burst_stream.write, argv)
    assert ended.value.code == 1
    said = capsys.readouterr().err
    assert "--burst-at 3600 is not within the stream's 1 h (3600 s)" in said
    assert "e.g. --burst-at 1200" in said and not (tmp_path / "s").exists()
    with pytest.raises(SystemExit) as ended:
        run_script(forecast_burst.parser(), forecast_burst.main, ["cost", "--stream", "nowhere"])
    assert ended.value.code == 1
    assert "nowhere holds no stream.yaml: write one first" in capsys.readouterr().err


def test_cost_refuses_oracle_arrivals_the_operator_never_invents(capsys):
    from benchmarks import forecast_burst
    from idlegate.flags import run_script

    argv = ["cost", "--stream", "nowhere", "--arrivals", "oracle"]
    with pytest.raises(SystemExit) as ended:
        run_script(forecast_burst.parser(), forecast_burst.main, argv)
    assert ended.value.code == 1
    assert "give --arrivals one of those (oracle is accuracy's only)" in capsys.readouterr().err


def test_the_cost_run_keeps_the_last_arrivals_as_the_operator_copies_them():
    """`_Seen` runs the engine through each arrival time, so a workflow that came and
    finished between two refreshes is still among the templates invented arrivals copy."""
    from benchmarks.forecast_burst import _Seen
    from idlegate.sim.forecast_arrivals import TEMPLATES
    from tests.helpers import chain

    jobs = tuple(JobArrival(10.0 * i, f"w{i}", chain(1.0)) for i in range(TEMPLATES + 5))
    engine = Engine.for_workload(Workload("w", jobs, 2), make_scheduler("fifo"), 0)
    seen = _Seen(jobs, wanted=True)
    seen.run(engine, 10.0 * (TEMPLATES + 4) + 5)
    assert [j.name for j in seen.recent] == [f"w{i}" for i in range(5, TEMPLATES + 5)]
    assert len(engine.cluster.jobs) == 0  # (each ended long before the refresh's time)
