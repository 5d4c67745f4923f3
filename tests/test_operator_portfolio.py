"""The portfolio in the operator: which candidate it follows shows in the gauge, an Event
on the pool's object and each workflow's status.policy; each ExecutorPool has its own."""

from __future__ import annotations

import copy
import json
import logging
import shutil
import threading

import pytest

from idlegate.api.history import rotated, sink_files
from idlegate.api.pool_spec import parse_pool_spec
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner
from idlegate.operator.core.events import PodSeen
from idlegate.operator.decisions import build_scheduler
from idlegate.operator.edge import intake
from idlegate.operator.edge.pools import pool_status
from idlegate.operator.edge.reload import model_files
from idlegate.operator.features.history_sink import read_prior
from idlegate.operator.features.planning import ReplayWorker
from idlegate.policy import DEFAULT_POLICY_PATH, make_scheduler
from idlegate.policy.portfolio import PortfolioScheduler
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.history import load_history, tail_history
from tests.operator_fakes import FakeClock, FakeKube, Harness, harness, stage

# a pool of one: fifo runs the long workflow first, srpt the short ones; the first round
# (two finished workflows) replays both and follows srpt once the worker is done (two
# workflows are too few for the noise rule, `confidence`). Untuned: srpt?cap=0.9 would
# replay alike and tie srpt; far=none: fifo, far behind, stays in every round
PORTFOLIO = (
    "portfolio?candidates=fifo+srpt&start=fifo&min_window=2&every=2&replay_delay=0"
    "&confidence=0&tune=false&far=none"
)


def followed_events(kube, kind: str) -> list[dict]:
    return [
        e
        for e in kube.events
        if e["reason"] == "PolicyFollowed" and e["involvedObject"]["kind"] == kind
    ]


@pytest.mark.asyncio
async def test_a_switch_of_candidate_is_said_once_in_the_gauge_an_event_and_the_status():
    h = harness(pool=1, scheduler=make_scheduler(PORTFOLIO))
    h.bridge.core.reporter = Owner(
        "idlegate-system", "operator-0", "pod-uid", kind="Pod", api_version="v1"
    )
    value = h.metrics.value
    assert value("idlegate_policy_following", policy="fifo") == 1
    await h.submit("long", {"stages": [stage("a", duration=100.0)]})
    for name in ("s1", "s2", "s3", "s4"):
        await h.submit(name, {"stages": [stage("a", duration=1.0)]})
    await h.run_to_completion()
    (event,) = followed_events(h.kube, "Pod")
    assert (event["type"], event["involvedObject"]["name"]) == ("Normal", "operator-0")
    # in words: what the round did and why, then its figures
    switch = h.bridge.core.scheduler.rounds[0]
    assert switch.why.startswith("switched to srpt: ") and "better than fifo" in switch.why
    assert event["message"] == f"The portfolio {switch.why}. It is now {switch.text}."
    assert value("idlegate_policy_following", policy="srpt") == 1
    assert value("idlegate_policy_following", policy="fifo") == 0
    choice = h.bridge.core.scheduler.choice
    assert (choice.candidate, choice.reason, choice.runner_up) == ("srpt", "best", "fifo")
    assert choice.score < choice.runner_up_score and len(h.bridge.core.scheduler.rounds) > 1
    policies = [h.kube.status(n)["policy"] for n in ("long", "s1", "s2", "s3", "s4")]
    # (the Policy column) s2's release is decided by fifo: the round s1's finish brings runs
    # in the worker while the pool goes on deciding, and srpt is followed from s3 on
    assert policies == ["fifo", "fifo", "fifo", "srpt", "srpt"]


@pytest.mark.asyncio
async def test_each_executor_pool_has_a_portfolio_of_its_own_and_its_events():
    h = harness(pool=1, scheduler=make_scheduler(PORTFOLIO))
    pools = h.pools
    await intake.readmit(
        pools,
        pools.apply(
            "batch", parse_pool_spec({"size": 1, "policy": PORTFOLIO}, "batch"), uid="pool-uid"
        ),
    )
    batch = pools.bridges["batch"]
    assert batch.core.scheduler is not pools.default.core.scheduler
    await h.submit("long", {"stages": [stage("a", duration=100.0)], "pool": "batch"})
    for name in ("s1", "s2", "s3"):
        await h.submit(name, {"stages": [stage("a", duration=1.0)], "pool": "batch"})
    await h.run_to_completion()
    (event,) = followed_events(h.kube, "ExecutorPool")
    assert event["involvedObject"] == {
        "apiVersion": "idlegate.io/v1alpha1", "kind": "ExecutorPool", "name": "batch",
        "uid": "pool-uid",
    }  # fmt: skip
    assert event["metadata"]["namespace"] == "default"  # (a cluster-scoped object's)
    sample = batch.metrics.registry.get_sample_value
    assert sample("idlegate_policy_following", {"pool": "batch", "policy": "srpt"}) == 1
    assert sample("idlegate_policy_following", {"pool": "default", "policy": "fifo"}) == 1
    assert batch.core.scheduler.rounds and not pools.default.core.scheduler.rounds
    # the ExecutorPool's status says what it follows and why (the choice's figures)
    assert pool_status("batch", pools)["following"] == batch.core.scheduler.choice.text
    assert pool_status("default", harness(pool=1).pools)["following"] == "fifo"


@pytest.mark.asyncio
async def test_a_pool_without_a_policy_runs_default_a_portfolio_of_its_own():
    h = harness(pool=1)  # (the operator's own pool runs fifo here)
    assert h.bridge.settings.policy is None  # no --scheduler: default
    pools = h.pools
    await intake.readmit(pools, pools.apply("batch", parse_pool_spec({"size": 1}, "batch")))
    batch = pools.bridges["batch"].core
    assert isinstance(batch.scheduler, PortfolioScheduler)
    assert batch.decider.learns is batch.scheduler  # fed the pool's finished workflows
    await finished_in(h, "batch")
    assert len(batch.scheduler.finished) == 4
    assert h.kube.status("s1")["policy"] == "learned:default"  # its cold start


@pytest.mark.asyncio
async def test_each_pools_history_records_the_spec_it_runs_not_the_candidate_followed():
    # (a portfolio's status.policy names the candidate it followed, which is not what ran)
    from idlegate.operator.runtime import Operator

    settings = Settings(pool_size=2, metrics_port=None, health_port=None, clock=FakeClock())
    operator = Operator(settings, kube=FakeKube())  # no --scheduler: default
    await operator.start()
    try:
        pools = operator.pools
        assert pools.default.core.spec == "default"
        for name, policy in (("plain", None), ("own", "portfolio?window=100")):
            await intake.readmit(
                pools, pools.apply(name, parse_pool_spec({"size": 1, "policy": policy}, name))
            )
        assert pools.bridges["plain"].core.spec == "default"
        assert pools.bridges["own"].core.spec == "portfolio?window=100"
    finally:
        await operator.stop()


async def finished_in(h, pool: str | None = None) -> None:
    """A long workflow and three short ones through a pool of one, to the end."""
    where = {} if pool is None else {"pool": pool}
    await h.submit("long", {"stages": [stage("a", duration=100.0)], **where})
    for name in ("s1", "s2", "s3"):
        await h.submit(name, {"stages": [stage("a", duration=1.0)], **where})
    await h.run_to_completion()


@pytest.mark.asyncio
async def test_a_pool_whose_portfolio_gains_a_candidate_keeps_its_window():
    h = harness(pool=1)
    pools = h.pools
    spec = parse_pool_spec({"size": 1, "policy": PORTFOLIO}, "batch")
    await intake.readmit(pools, pools.apply("batch", spec))
    await finished_in(h, "batch")
    old = pools.bridges["batch"].core.scheduler
    more = PORTFOLIO.replace("fifo+srpt", "fifo+srpt+fair")
    await intake.readmit(pools, pools.apply("batch", spec.model_copy(update={"policy": more})))
    new = pools.bridges["batch"].core.scheduler
    assert new is not old and new.finished == old.finished and len(new.finished) == 4
    await h.submit("next", {"stages": [stage("a", duration=1.0)], "pool": "batch"})
    await h.run_to_completion()
    (first, *_) = new.rounds  # at once, on the window it was given, with the new candidate
    assert first.workflows >= 4 and "fair" in first.scores


@pytest.mark.asyncio
async def test_a_reloaded_portfolio_keeps_the_window_and_watches_its_trained_policy(tmp_path):
    trained = tmp_path / "trained.onnx"
    shutil.copyfile(DEFAULT_POLICY_PATH, trained)
    spec = f"{PORTFOLIO}&policy={trained}"
    assert trained in model_files(spec)  # (the watch of the pool's policy looks at it)
    h = harness(pool=1, scheduler=build_scheduler(spec))
    await finished_in(h)
    old = h.bridge.core.scheduler
    h.bridge.use_policy(build_scheduler(spec))  # (what a reload hands over)
    assert h.bridge.core.scheduler is not old and h.bridge.core.scheduler.finished == old.finished
    assert len(old.finished) == 4


@pytest.mark.asyncio
async def test_decisions_never_wait_for_a_round_which_runs_in_the_worker():
    h = harness(pool=1, scheduler=make_scheduler(PORTFOLIO))
    brain, gate = h.bridge.core.scheduler, threading.Event()
    replay = brain.replay

    def held(request):  # a round that takes as long as the test says
        gate.wait(timeout=60)
        return replay(request)

    brain.replay = held
    worker = h.bridge.planning
    assert isinstance(worker, ReplayWorker) and brain.config.replayer == "worker"
    for name in ("a", "b", "c"):
        await h.submit(name, {"stages": [stage("a", duration=1.0)]})
    for _ in range(2):  # two finish (not through h.finish, which waits for the worker)
        (running,) = h.released()
        pod = h.kube.pods[("default", running)]
        pod["status"]["phase"] = "Succeeded"
        h.pools.handle(PodSeen(copy.deepcopy(pod)))
        await h.bridge.lanes.wait_idle(timeout=5)
    assert worker.running is not None and not brain.rounds  # the round is held...
    assert h.released() and h.kube.status("c")["policy"] == "fifo"  # ...c went meanwhile
    gate.set()
    await worker.idle()
    assert len(brain.rounds) == 1 and brain.choice is brain.rounds[0]  # adopted in the loop


def sink_line(name: str, arrival: float, **keys) -> str:
    """A line of the history sink: a finished one-stage workflow."""
    record = {"name": name, "arrival": arrival, "stages": [stage("a", duration=5.0)], **keys}
    return json.dumps(record)


@pytest.mark.asyncio
async def test_a_restarted_operator_starts_its_portfolio_from_the_history_sink(tmp_path):
    sink = tmp_path / "history.jsonl"
    first = Harness(FakeKube(), FakeClock(1_717_200_000), 1, make_scheduler(PORTFOLIO),
                    history_file=sink)  # fmt: skip
    await finished_in(first)
    first.bridge.history.close()  # (the records queued are written)
    assert len(sink.read_text().splitlines()) == 4
    # the next operator: the workflows are gone, only the sink remembers them
    second = Harness(FakeKube(), FakeClock(1_717_300_000), 1, make_scheduler(PORTFOLIO),
                     history_file=sink)  # fmt: skip
    await second.submit("next", {"stages": [stage("a", duration=1.0)]})
    brain = second.bridge.core.scheduler
    (first_round, *_) = brain.rounds  # the first replay: the sink's four, applied at once
    assert (first_round.reason, first_round.workflows) == ("prior history", 4)
    assert (first_round.prior, first_round.source) == (4, "history sink")
    assert brain.following == "srpt" and first_round.scores["srpt"] < first_round.scores["fifo"]
    assert pool_status("default", second.pools)["replayed"] == {
        "workflows": 4, "prior": 4, "source": "history sink"
    }  # fmt: skip
    second.bridge.history.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("sink", ["missing", "empty", "corrupt"])
async def test_a_portfolio_starts_cold_when_the_sink_has_no_record_to_give(tmp_path, sink):
    path = tmp_path / "history.jsonl"
    if sink != "missing":
        path.write_text("" if sink == "empty" else 'not json\n[1, 2]\n{"stages": 3}\n')
    h = harness(pool=1, scheduler=make_scheduler(PORTFOLIO), history_file=path)
    await h.submit("next", {"stages": [stage("a", duration=1.0)]})
    brain = h.bridge.core.scheduler
    assert brain.rounds == [] and brain.following == "fifo" and brain.finished == ()
    assert h.metrics.value("idlegate_policy_errors_total", policy=brain.name) == 0
    malformed = h.metrics.value("idlegate_history_skipped_lines_total", reason="malformed")
    assert malformed == (3 if sink == "corrupt" else 0)  # (each line left out, counted)
    assert h.released() == ["next-a-0"]  # (the pool goes on)
    h.bridge.history.close()


def test_the_sink_gives_a_pools_last_records_and_counts_what_it_leaves_out(tmp_path):
    path = tmp_path / "history.jsonl"
    rotated(path, 1).write_text(
        "\n".join([sink_line("default/old", 1.0), sink_line("default/b0", 2.0, pool="batch")])
    )
    rotated(path, 2).write_bytes(b"\xff\xfe not text\n")
    path.write_text(
        "\n".join(
            [
                sink_line("default/b1", 3.0, pool="batch"),
                "{broken",
                '"a string"',
                sink_line("default/x", 4.0, pool="other"),
                json.dumps({"name": "default/no-arrival", "stages": [stage("a")], "pool": "batch"}),
                json.dumps({"name": "default/bad", "arrival": 6, "stages": [], "pool": "batch"}),
                sink_line("default/b2", 7.0, pool="batch"),
                sink_line("default/d1", 8.0),  # (no pool: the default pool's)
            ]
        )
    )
    batch, skipped = read_prior(path, "batch", 10)
    assert skipped == {"malformed": 3, "no arrival": 1, "unreadable": 1}
    assert [a.name for a in batch] == ["default/b0", "default/b1", "default/b2"]
    assert [a.time for a in batch] == [2.0, 3.0, 7.0]
    tail = tail_history(sink_files(path), 10, lambda w: w.pool == "batch")
    assert [w.name for w in tail.workflows] == ["default/b0", "default/b1", "default/b2"]
    assert tail.skipped == {"malformed": 3, "no arrival": 1, "unreadable": 1}
    last = tail_history(sink_files(path), 1, lambda w: w.pool is None)  # it reads no further
    assert [w.name for w in last.workflows] == ["default/d1"] and not last.skipped
    assert [a.name for a in read_prior(path, "default", 1)[0]] == ["default/d1"]
    assert read_prior(tmp_path / "none.jsonl", "default", 10) == ([], {})


@pytest.mark.asyncio
async def test_a_named_pools_records_carry_its_name_and_size(tmp_path):
    sink = tmp_path / "history.jsonl"
    h = harness(pool=2, history_file=sink)
    pools = h.pools
    spec = parse_pool_spec({"size": 1, "policy": PORTFOLIO}, "batch")
    await intake.readmit(pools, pools.apply("batch", spec))
    await finished_in(h, "batch")
    pools.default.history.close()
    records = load_history(sink)
    assert {(r.pool, r.pool_size) for r in records} == {("batch", 1)} and len(records) == 4
    # the pool's own policy, which a replay (advise, a restarted portfolio) rebuilds
    assert {r.policy for r in records} == {SchedulerSpec.parse(PORTFOLIO).format()}
    assert len(read_prior(sink, "batch", 10)[0]) == 4 and read_prior(sink, "default", 10)[0] == []


@pytest.mark.asyncio
async def test_a_failing_round_is_an_error_noted_and_the_candidate_is_kept(caplog):
    # (in the worker thread, where the owner's `replay` runs: the process rebuilds its own)
    h = harness(pool=1, scheduler=make_scheduler(PORTFOLIO), forecast_workers="thread")
    brain = h.bridge.core.scheduler

    def failing(request, check=None):
        raise RuntimeError("replay failed")

    brain.replay = failing
    with caplog.at_level(logging.ERROR):
        await finished_in(h)
    assert h.metrics.value("idlegate_policy_errors_total", policy=brain.name) >= 1
    assert brain.following == "fifo" and not brain.rounds
    (noted, *_) = [r for r in caplog.records if r.exc_info is not None]
    assert noted.args[:2] == (brain.name, "replay")


@pytest.mark.asyncio
async def test_an_early_round_runs_in_the_worker_before_any_workflow_finishes():
    # a pool of 8: a long workflow (1 task, then two stages of 8 tasks of 100 s) and 2 s
    # later seven short ones, each released as it comes. At the eighth arrival the worker
    # replays the eight running at their estimates: fifo keeps the shorts behind the long
    # one's last stage (mean JCT 208 s), srpt does not (122 s), so the pool follows srpt
    # before anything finished (untuned: srpt?cap=0.9, which keeps one executor for
    # arrivals, is not what this is about)
    spec = "portfolio?candidates=fifo+srpt&start=fifo&replay_delay=0&confidence=0&tune=false"
    h = harness(pool=8, scheduler=make_scheduler(spec))
    h.bridge.core.reporter = Owner(
        "idlegate-system", "operator-0", "pod-uid", kind="Pod", api_version="v1"
    )
    brain = h.bridge.core.scheduler
    long = [stage("a", duration=1.0)] + [
        stage(name, tasks=8, duration=100.0, deps=(after,)) for name, after in ("ba", "cb")
    ]
    await h.submit("long", {"stages": long})
    h.clock.advance(2.0)
    for i in range(6):
        await h.submit(f"s{i}", {"stages": [stage("a", duration=10.0)]})
    assert not brain.rounds
    await h.submit("s6", {"stages": [stage("a", duration=10.0)]})  # (settle: the worker's round)
    (early,) = brain.rounds
    assert (early.early, early.workflows, early.running, early.candidate) == (True, 8, 8, "srpt")
    assert early.scores == {"fifo": 208.0, "srpt": 121.75}
    assert not brain.finished and len(h.released()) == 8  # nothing finished: all still run
    (event,) = followed_events(h.kube, "Pod")
    assert early.why.startswith("switched to srpt: ") and "better than fifo" in early.why
    assert early.text.endswith("over the last 8 workflows (8 still running)")
    assert event["message"] == f"The portfolio {early.why}. It is now {early.text}."
    assert h.metrics.value("idlegate_policy_following", policy="srpt") == 1
