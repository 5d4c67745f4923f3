"""The benchmark scripts' own schedulers do what their docstrings claim (no data needed)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy.heuristics import FairScheduler, make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import WAIT
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, jcts, load_benchmark, workload

fair_variants = load_benchmark("fair_variants")
gantt = load_benchmark("gantt")
hindsight = load_benchmark("hindsight")
idle_room = load_benchmark("idle_room")
same_results = load_benchmark("same_results")
switch_at = load_benchmark("switch_at")
twins = load_benchmark("twins")


class Watch:
    """Wraps a scheduler; counts WAITs given while a stage could have launched."""

    def __init__(self, inner: object) -> None:
        self.inner, self.name, self.waits_with_work = inner, "watch", 0

    def reset(self, rng: object) -> None:
        self.inner.reset(rng)

    def decide(self, view):
        action = self.inner.decide(view)
        if action is WAIT and view.free_executors and view.runnable_stages():
            self.waits_with_work += 1
        return action


def _run(scheduler: object) -> Watch:
    workload = build_workload("tpch-like", 3, num_executors=10, init=4, num_stream=12)
    watch = Watch(scheduler)
    assert simulate(workload, watch, seed=3).unfinished == 0
    return watch


def test_fair_without_wait_never_waits_while_a_stage_could_launch() -> None:
    assert _run(FairScheduler()).waits_with_work > 0  # fair itself does
    assert _run(fair_variants.NoWaitFair()).waits_with_work == 0


def test_scaled_fair_shares() -> None:
    jobs = [object()] * 3
    assert fair_variants.ScaledFair().shares(50, jobs) == [17] * 3  # plain fair
    assert fair_variants.ScaledFair(limit=10).shares(50, jobs) == [10] * 3
    assert fair_variants.ScaledFair(factor=1.5).shares(50, jobs) == [25] * 3


def test_smallest_first_fair_serves_the_least_remaining_work_first() -> None:
    # three executors (fair share 2) and two jobs of three tasks, 20 s and 5 s each
    wl = workload((0.0, "big", chain(20, tasks=3)), (0.0, "small", chain(5, tasks=3)), executors=3)
    assert jcts(simulate(wl, FairScheduler(), seed=0)) == {"big": 35.0, "small": 15.0}
    in_order = jcts(simulate(wl, fair_variants.SmallestFirstFair(), seed=0))
    assert in_order == {"big": 30.0, "small": 10.0}  # small takes its 2 first
    uncapped = jcts(simulate(wl, fair_variants.SmallestFirstFair(first_share=1.0), seed=0))
    assert uncapped == {"big": 25.0, "small": 5.0}  # small takes all 3


# A long job L arrives while a 30 s job A holds one of the two executors; a short job S
# follows 2 s later. Idling L until S arrives lets S run at once and costs L less than S
# would have waited for A (Theorem 1's situation with a release at R = 30).
THEOREM_1 = workload(
    (0.0, "A", chain(30)), (1.0, "L", chain(50)), (3.0, "S", chain(10)), executors=2
)


def test_clairvoyant_idle_waits_for_a_short_arrival_in_theorem_1s_window() -> None:
    plain = jcts(simulate(THEOREM_1, make_scheduler("sjf"), seed=0))
    assert plain == {"A": 30.0, "L": 50.0, "S": 37.0}
    probe = idle_room.ClairvoyantIdle(make_scheduler("sjf"), THEOREM_1)
    idled = jcts(simulate(THEOREM_1, probe, seed=0))
    assert idled == pytest.approx({"A": 30.0, "L": 62.0, "S": 10.0})


def test_clairvoyant_idle_launches_when_the_next_job_comes_too_late() -> None:
    late = workload(
        (0.0, "A", chain(30)), (1.0, "L", chain(50)), (30.0, "S", chain(10)), executors=2
    )
    probe = idle_room.ClairvoyantIdle(make_scheduler("sjf"), late)
    assert jcts(simulate(late, probe, seed=0))["L"] == 50.0  # 29 s > (50 - 10) / 2


def test_fixed_idle_only_before_a_long_stage_on_the_last_free_executor() -> None:
    idled = jcts(
        simulate(THEOREM_1, idle_room.LastExecutorIdle(make_scheduler("sjf"), 0.1), seed=0)
    )
    # the slot (t = 1 to 6) leaves the executor to S at t = 3; L starts when S ends at 13
    assert idled == pytest.approx({"A": 30.0, "L": 62.0, "S": 10.0})
    alone = workload((0.0, "L", chain(50)), executors=2)  # nothing busy: no slot
    assert jcts(
        simulate(alone, idle_room.LastExecutorIdle(make_scheduler("sjf"), 0.1), seed=0)
    ) == {"L": 50.0}


def test_the_readmes_picture_is_drawn_from_the_schedules_its_caption_gives() -> None:
    # docs/img/idle-slot.png is drawn from these two runs (benchmarks/gantt.py)
    at_once = gantt.run(gantt.make_scheduler("sjf-cp"))
    idled = gantt.run(gantt.IdleFirst(gantt.make_scheduler("sjf-cp"), "A", 2.0))
    assert {r.name: r.jct for r in at_once.records} == {"A": 20.0, "B": 22.0}
    assert {r.name: r.jct for r in idled.records} == {"A": 26.0, "B": 4.0}


def test_drawing_the_picture_leaves_the_tracked_copy_alone(tmp_path, monkeypatch) -> None:
    # run as the README's caption first says, from the repository's root (here a copy's)
    pytest.importorskip("matplotlib")
    tracked = Path(gantt.__file__).resolve().parents[1] / "docs" / "img" / "idle-slot.png"
    before = tracked.stat().st_mtime_ns
    monkeypatch.chdir(tmp_path)
    gantt.main([])
    assert (tmp_path / "out" / "idle-slot.png").stat().st_size > 0
    assert tracked.stat().st_mtime_ns == before


def test_api_faults_recovery_is_from_the_return_to_the_pool_full() -> None:
    api_faults = load_benchmark("api_faults")
    sampler = api_faults.Sampler(monitor=None)
    # (time, pods running, gated pods): the API returns at t = 10; the pool of 4 is full
    # at t = 12; the full pool before the return does not count
    sampler.samples = [(9.0, 4, 8), (10.0, 0, 8), (11.0, 3, 5), (12.0, 4, 4), (13.0, 4, 0)]
    assert sampler.recovery(10.0, 4) == 2.0
    # with less work than the pool (2 running, none waiting), that is the pool full
    sampler.samples = [(10.0, 0, 2), (10.5, 2, 0)]
    assert sampler.recovery(10.0, 4) == 0.5
    assert sampler.recovery(11.0, 4) is None  # never after t = 11


def test_default_targets_checks_each_target_against_its_limit() -> None:
    default_targets = load_benchmark("default_targets")
    argv = ["--quick", "--workloads", "synthetic-0.6", "--seeds", "2", "--overload-jobs", "6"]
    checks = default_targets.main([*argv, "--samples", "10", "-j", "1"])
    by_target = {c.target: c for c in checks}
    overload = next(t for t in by_target if "overload" in t).split(":")[0]
    assert set(by_target) == {
        "synthetic-0.6: mean vs best",
        "synthetic-0.6: p95 vs fair",
        "synthetic-0.6: delayed vs sync",
        f"{overload}: mean vs fair",
        f"{overload}: p95 vs fair",
        f"{overload}: delayed vs sync",
        "decision p99 at 20 jobs (CPU)",
        "decision p99 at 50 jobs (CPU)",
    }
    for c in checks:
        within = abs(c.value) <= c.limit if "delayed" in c.target else c.value <= c.limit
        assert c.passed == within, c
    assert by_target[f"{overload}: mean vs fair"].limit == -0.05
    assert 0 < by_target["decision p99 at 20 jobs (CPU)"].value < 100


def test_default_targets_stops_at_its_start_without_its_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from idlegate import flags

    default_targets = load_benchmark("default_targets")
    monkeypatch.setitem(flags.EXTRAS, "idlegate_absent_module", "train")
    monkeypatch.setattr(default_targets, "EXTRA_MODULES", ("numpy", "idlegate_absent_module"))
    with pytest.raises(SystemExit) as stopped:
        default_targets.main(["--quick", "-j", "1"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: this needs the 'train' extra") and err.count("\n") == 1


def test_airflow_e2e_options_after_operator_are_the_benchmarks_own() -> None:
    airflow_e2e = load_benchmark("airflow_e2e")
    args = airflow_e2e.parse(["--runs", "1", "--operator", "--argo", "0"])
    assert (args.runs, args.argo, args.operator_args) == (1, 0, [])
    extra = ["--operator-arg=--scheduler=default", "--operator-arg=-v"]
    args = airflow_e2e.parse(["--operator", *extra, "--pool", "3"])
    assert (args.pool, args.operator_args) == (3, ["--scheduler=default", "-v"])
    assert airflow_e2e.parse([]).operator_args is None  # no operator at all


def test_airflow_e2e_refuses_an_operator_flag_without_the_operator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    airflow_e2e = load_benchmark("airflow_e2e")
    with pytest.raises(SystemExit) as stopped:
        airflow_e2e.parse(["--operator-arg=--scheduler=default"])
    assert stopped.value.code == 2
    assert (
        "--operator-arg gives the operator a flag, so it needs --operator"
        in capsys.readouterr().err
    )


def test_airflow_gain_holds_default_to_its_target_at_load_0_85_only() -> None:
    airflow = load_benchmark("airflow_gain").AIRFLOW
    at_target = airflow.verdict("learned:default", 0.85, -0.14)
    assert at_target == "learned:default vs airflow: -14.0% (target -15%: not met)"
    assert airflow.verdict("default", 0.85, -0.39).endswith("(target -15%: met)")
    assert airflow.verdict("learned:default", 0.7, -0.14) == "learned:default vs airflow: -14.0%"
    # Argo's target is set at every load
    argo = load_benchmark("argo_gain").ARGO
    assert argo.verdict("learned:default", 0.7, -0.158).endswith("(target -20%: not met)")


def test_a_plan_follows_fifo_then_srpt_from_the_switch_on() -> None:
    # one executor, a 10 s, a 5 s and a 1 s job arrived in that order at 0: fifo starts
    # the 10 s one; from 5 s on srpt decides, so the 1 s job goes before the 5 s one
    wl = workload((0.0, "big", chain(10.0)), (0.0, "mid", chain(5.0)), (0.0, "small", chain(1.0)))
    fifo = jcts(simulate(wl, make_scheduler("fifo"), seed=0))
    assert fifo == {"big": 10.0, "mid": 15.0, "small": 16.0}
    plan = switch_at.Segments([(0.0, make_scheduler("fifo")), (5.0, make_scheduler("srpt"))])
    assert jcts(simulate(wl, plan, seed=0)) == {"big": 10.0, "small": 11.0, "mid": 16.0}


def test_a_plan_is_read_as_a_rule_then_time_colon_rule() -> None:
    assert switch_at.parse_plan(["srpt?cap=0.9", "117948:fair?scale=0.5", "2e5:analytic:fair"]) == [
        (0.0, "srpt?cap=0.9"),
        (117948.0, "fair?scale=0.5"),
        (200000.0, "analytic:fair"),
    ]
    with pytest.raises(IdlegateError, match="T:SPEC"):
        switch_at.parse_plan(["srpt", "fair"])


def test_twins_spread_luck_and_flips_on_known_seeds() -> None:
    # three seeds: twin 1 is 10 % lower then 10 % higher, twin 2 is 50 % higher on the third
    rule = np.array([100.0, 100.0, 100.0])
    twins_jct = np.array([[90.0, 110.0, 100.0], [100.0, 100.0, 150.0]])
    luck = twins.luck_of(rule, twins_jct, np.array([95.0, 105.0, 160.0]))
    assert luck.spread_median == pytest.approx(0.1)
    assert luck.spread_max == pytest.approx(0.5)
    assert luck.luck == pytest.approx(-0.1 / 3)  # only seed 1's best is below the rule
    # the other beats the rule on seed 1 but not twin 1; the rule beats it on seed 2, twin 1
    # does not; on seed 3 both twins agree with the rule
    assert luck.flips == 2
    assert twins.luck_of(rule, twins_jct).flips == 0
    with pytest.raises(IdlegateError, match="one mean JCT per seed"):
        twins.luck_of(rule, twins_jct[:, :2])


def test_a_hindsight_pick_follows_the_first_jobs_and_is_judged_on_the_whole_stream() -> None:
    # two seeds, four jobs: "a" wins the first two jobs of both seeds, "b" the whole of seed 1
    jcts = {
        "a": np.array([[1.0, 1.0, 10.0, 10.0], [1.0, 1.0, 1.0, 1.0]]),
        "b": np.array([[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]),
        "c": np.array([[9.0, 9.0, 9.0, 9.0], [0.5, 9.0, 9.0, 9.0]]),
    }
    early = hindsight.pick_at(jcts, 2)
    assert early.picks == ("a", "a")
    assert early.excess.tolist() == pytest.approx([5.5 / 2.0 - 1.0, 0.0])
    assert early.right == 1
    assert hindsight.pick_at(jcts, 4).picks == ("b", "a")
    # on the first job alone, c wins seed 2; among a and b only, a does
    assert hindsight.pick_at(jcts, 1).picks == ("a", "c")
    assert hindsight.pick_at(jcts, 1, ["a", "b"]).picks == ("a", "a")
    with pytest.raises(IdlegateError, match="not a candidate run"):
        hindsight.pick_at(jcts, 2, ["a", "srpt"])


def test_same_results_finds_the_first_json_path_where_two_outputs_part(tmp_path: Path) -> None:
    report: dict[str, Any] = {
        "best": "srpt",
        "schedulers": {"fifo": {"runs": [{"jct": 30.5}, {"jct": 31.2}]}},
    }
    before, same, moved = (tmp_path / f"{name}.json" for name in ("before", "same", "moved"))
    before.write_text(json.dumps(report, indent=2))
    same.write_text(json.dumps(report, indent=2))
    report["schedulers"]["fifo"]["runs"][1]["jct"] = 30.9
    moved.write_text(json.dumps(report, indent=2))
    assert same_results.bytes_difference("out", before.read_bytes(), same.read_bytes()) is None
    assert (
        same_results.bytes_difference("out", before.read_bytes(), moved.read_bytes())
        == "out $.schedulers.fifo.runs[1].jct: 31.2 != 30.9"
    )
    # 1 and 1.0 are equal in Python but not in the printed bytes; nor is a key on one side
    assert same_results.first_difference({"n": 1}, {"n": 1.0}) == "$.n: 1 != 1.0"
    assert same_results.first_difference({"a": 1}, {"a": 1, "b": 2}) == "$.b: (missing) != 2"
    assert same_results.first_difference([1], [1, 2]) == "$: 1 items != 2 items"
    # the same JSON printed otherwise is still a difference of bytes
    assert same_results.bytes_difference("out", b'{"a": 1}', b'{"a":1}') == (
        "out: same JSON, other bytes (formatting)"
    )
    # the console report's wall-clock figure is not a result; its JCTs are
    assert same_results.masked(b"45 runs in 62.3 s; best average JCT: srpt\n") == (
        b"45 runs in X s; best average JCT: srpt\n"
    )
    assert same_results.masked(b"avg JCT 62.3 s\n") == b"avg JCT 62.3 s\n"


def test_same_results_tells_a_refusal_from_a_run_and_one_refusal_from_another() -> None:
    ran = same_results.Output(0, b"{}", "", {})
    refused = same_results.Output(1, b"", "Error: --nodes 1001 is more than 1000.", {})
    other = same_results.Output(1, b"", "Error: --nodes 1001 share 330 pods.", {})
    assert same_results.difference(ran, ran) is None
    assert same_results.difference(refused, refused) is None
    assert same_results.difference(ran, refused) == (
        "exit code 0 != 1 (Error: --nodes 1001 is more than 1000.)"
    )
    assert same_results.difference(other, refused) == (
        "error 'Error: --nodes 1001 share 330 pods.' != 'Error: --nodes 1001 is more than 1000.'"
    )
    wrote = same_results.Output(0, b"{}", "", {"compare.md": b"| a |"})
    assert same_results.difference(ran, wrote) == "compare.md written by one checkout only"
    # a documented fix's change is expected, and must show
    changed = next(iter(same_results.CHANGED))
    assert same_results.as_expected(changed, "exit code 0 != 1 (Error: ...)")
    assert not same_results.as_expected(changed, None)
    assert same_results.as_expected(same_results.COMMANDS[0], None)
    assert not same_results.as_expected(same_results.COMMANDS[0], "$.best: 1 != 2")


def test_node_scale_takes_the_ratio_round_by_round() -> None:
    # a drift of the machine falls on both sizes of a round: the ratio is per round, its
    # median quoted, beside each size's median
    node_scale = load_benchmark("node_scale")
    found = {
        30: [(1.0, 0.8), (2.0, 1.6), (1.0, 0.8)],
        3000: [(1.5, 1.2), (2.0, 1.6), (1.2, 0.8)],
    }
    out = node_scale.summary(found)
    assert out["wall_s"] == {30: 1.0, 3000: 1.5}
    assert out["ratio"] == "3000/30"
    assert out["wall_ratio"] == pytest.approx(1.2)
    assert out["cpu_ratio"] == pytest.approx(1.0)
    assert out["runs"] == 3


def test_the_scale_benchmarks_question_launches_the_first_waiting_workflow_each_time() -> None:
    """`benchmarks/scale.py --question`: each timed question follows a task's end, finds
    room, and fair's answer launches (its asserts), on the full size's pool."""
    scale = load_benchmark("scale")
    cost = scale.question_cost(50, questions=20)
    assert (
        set(cost) == {"can_schedule_ms", "fair_ms", "nothing_fits_ms"} and min(cost.values()) >= 0
    )


def test_forecast_p99_pairs_in_turn_and_reads_the_tail_exactly() -> None:
    """ABBA order; the share over a bucket's bound from cumulative buckets; a summary's
    paired differences, their median, range and the off runs' spread, on known runs."""
    p99 = load_benchmark("forecast_p99")
    assert p99.order(3) == [False, True, True, False, False, True]
    buckets = [(0.0001, 50.0), (0.0003, 990.0), (0.001, 999.0), (float("inf"), 1000.0)]
    assert p99.over(buckets, 0.0003) == pytest.approx(0.01)
    assert p99.over([], 0.0003) is None
    runs = [
        {"forecasts": on, **{f: value for f in p99.FIGURES}}
        for on, value in ((False, 1.0), (True, 1.5), (True, 2.0), (False, 3.0))
    ]
    figure = p99.summary(runs)["decision_p99_ms"]
    assert figure["differences"] == [0.5, -1.0]
    assert figure["median"] == -0.25 and figure["range"] == [-1.0, 0.5]
    assert figure["above_zero"] == 1 and figure["off_spread"] == 2.0
    low, high = figure["mean_interval_90"]
    assert -1.0 <= low <= -0.25 <= high <= 0.5
    assert p99.interval([0.5, -1.0]) == p99.interval([0.5, -1.0])  # (seeded)


def test_live_pool_figures_from_a_written_log() -> None:
    live = load_benchmark("live_figures")
    t0 = 1_000_000.0  # (an Event's stamp is whole seconds)

    def pod(v: int, t: float, name: str, etype: str, **kw: Any) -> Any:
        return live.Entry(t0 + t, v, "pods", etype, "ns", name, workflow="w", **kw)

    def event(v: int, t: float, stamp: float) -> Any:
        at = ("DagWorkflow", "w")
        return live.Entry(t0 + t, v, "events", "ADDED", "ns", f"e{v}", involved=at, stamp=stamp)

    entries = [
        live.Entry(t0, 1, "dagworkflows", "ADDED", "ns", "w", workflow="w"),  # (submitted)
        pod(2, 0.1, "p0", "ADDED", gated=True),  # the operator creates p0 gated
        pod(3, 0.2, "p0", "MODIFIED"),  # and releases it
        pod(4, 0.3, "p0", "MODIFIED", node="n0"),  # the kube-scheduler binds it
        pod(5, 0.3, "p0", "MODIFIED", phase="Running", node="n0"),
        pod(6, 1.0, "p0", "MODIFIED", phase="Succeeded", node="n0"),  # p0 ends
        live.Entry(t0 + 1.6, 7, "dagworkflows", "MODIFIED", "ns", "w", workflow="w"),
        event(8, 1.7, t0 + 1),  # stamped 1 s: what it says is the status write at 1.6
        event(9, 4.5, t0 + 1),  # the same second, posted 2.9 s after that write
        pod(10, 5.0, "p1", "ADDED"),
        pod(11, 6.0, "p1", "MODIFIED", phase="Failed"),  # nothing of w written after
    ]

    def request(method: str, kind: str, name: str, version: int, **kw: Any) -> Any:
        fields = {"subresource": "", "status": 200, **kw}
        return live.Request(0.0, method, kind, "ns", name, version=version, **fields)

    requests = [
        request("POST", "pods", "", 2, status=201),
        request("PATCH", "pods", "p0", 3),
        request("PATCH", "pods", "p0", 6, status=409),  # refused at the kubelet's write
        request("PATCH", "dagworkflows", "w", 7, subresource="status"),
        request("PATCH", "dagworkflows", "w", 7, subresource="status"),  # a no-op
        request("POST", "events", "", 8, status=201),
        request("POST", "events", "", 9, status=201),
        request("POST", "pods", "", 10, status=201),
        request("PATCH", "executorpools", "shared", 10, subresource="status"),  # a no-op
    ]
    found = live.figures(entries, requests)
    assert found.pods == 2
    # p0's end (1.0) to the workflow's status (1.6); p1's end, answered by nothing
    assert found.watch_lags == pytest.approx([0.6]) and found.unanswered == 1
    assert found.event_lags == pytest.approx([0.1, 2.9])
    assert found.binds == pytest.approx([0.1])
    # when each was answered or received, and those from a time on
    assert found.watch_at == [t0 + 1.6] and found.event_at == [t0 + 1.7, t0 + 4.5]
    assert (found.watch_ns, found.watch_by) == (["ns"], ["dagworkflows"])  # (its status)
    assert found.after(t0 + 2) == ([], [pytest.approx(2.9)])
    assert found.requests == {"pod creates": 2, "pod patches": 2, "status": 2, "events": 2,
                              "pool status": 1}  # fmt: skip
    assert found.per_pod() == 4.5 and found.per_pod("events") == 1.0
    # the kubelet's end is not the operator's for the 409 that answered at its version
    assert live.operator_versions(entries, requests) == {2, 3, 7, 8, 9, 10}
    assert live.quantile([3.0, 1.0, 2.0], 0.5) == 2.0 and live.quantile([], 0.5) is None
    assert live.quantile([0.0, 1.0], 0.99) == pytest.approx(0.99)


def test_live_pool_reads_a_gated_pod_and_an_events_whole_second_stamp() -> None:
    live = load_benchmark("live_figures")
    body = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "12",
                     "labels": {"idlegate.io/workflow": "w"}},
        "spec": {"schedulingGates": [{"name": "idlegate.io/release"}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip
    got = live.entry_of("pods", "ADDED", body, 5.0)
    assert (got.version, got.workflow, got.gated, got.node, got.phase) == (
        12,
        "w",
        True,
        "",
        "Pending",
    )
    event = {
        "metadata": {"name": "w.1", "namespace": "ns", "resourceVersion": "13"},
        "involvedObject": {"kind": "DagWorkflow", "name": "w"},
        "reason": "Released",
        "lastTimestamp": "2026-01-02T03:04:05Z",
    }
    got = live.entry_of("events", "ADDED", event, 6.0)
    assert got.involved == ("DagWorkflow", "w") and got.reason == "Released"
    assert got.stamp == 1767323045


def test_live_forecast_scores_the_operators_first_forecasts_as_forecast_evaluate_does() -> None:
    """benchmarks/live_forecast.py reads each finished DagWorkflow's status (its first
    forecast, start, finish, JCT) and scores it with `forecast_report.figures`, waits of
    20 s or more, and position × rate told the starts and finishes before each forecast."""
    live = load_benchmark("live_forecast")
    from idlegate.sim.timestamps import to_datetime

    t0 = 1_800_000_000.0

    def at(t: float) -> str:
        return to_datetime(t0 + t).isoformat()

    def finished(name: str, arrival: float, start: float, finish: float, first: Any) -> Any:
        status = {"completionTime": at(finish), "jctSeconds": finish - arrival}
        if first is None:
            status["startSummary"] = at(start)[:19] + "Z"
        else:
            status["firstForecast"] = {**first, "startedAt": at(start)}
        spec = {"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": 30.0}]}
        return live.outcome({"metadata": {"name": name}, "spec": spec, "status": status}, 0)

    def first(made: float, start: tuple[float, ...], finish: tuple[float, ...]) -> Any:
        return {
            "computedAt": at(made), "start": at(start[1]),
            "startInterval": [at(start[0]), at(start[2])],
            "startReplayed": [at(start[1]), at(start[1])],
            "finish": at(finish[1]), "finishInterval": [at(finish[0]), at(finish[2])],
            "finishReplayed": [at(finish[1]), at(finish[1])],
        }  # fmt: skip

    outcomes = [
        finished("a", 0, 0, 30, None),  # (ran at once: no forecast)
        finished("b", 0, 5, 35, None),
        # forecast at 10 s: start 35 in [30, 50] (it was 45: early, inside; a wait of 45 s,
        # scored here, not by `forecast evaluate`'s 60 s), finish 80 in [70, 90] (100)
        finished("c", 0, 45, 100, first(10, (30, 35, 50), (70, 80, 90))),
        # a wait of 15 s: its start not scored (under 20 s), its finish is
        finished("d", 0, 15, 45, first(10, (12, 20, 30), (40, 50, 60))),
    ]
    run = live.seed_run(outcomes)
    row = live.row_of("node pool, cold", [outcomes])
    assert (row.workflows, row.forecast) == (4, 2)
    f = row.ours
    assert f.start_n == 1 and f.start_rel_median == pytest.approx(10 / 45)
    assert f.start_bias_median == pytest.approx(-10.0)  # (early)
    assert f.start_inside == 1.0 and f.finish_inside == 0.5  # (c's finish 100 past 90)
    assert row.replays.start_inside == 0.0  # (its point interval)
    # position × rate at 10 s: a and b admitted at 0 and 5, so a rate of 2 in 10 s; c is
    # first in line (d arrived with it, after it by name): starts at 10 + 1 / 0.2 = 15
    (rate,) = [p for p in run.predictions if p.method == "position×rate" and p.job_id == 2]
    assert rate.start.median == pytest.approx(15.0 + t0)
    assert rate.finish.median == pytest.approx(15.0 + t0 + 30.0)  # (b's run: the median)
    assert "| node pool, cold | 1 | 22.2 % (early by a median 10 s) |" in live.line(row)


def test_live_pool_says_the_lags_after_the_floods_burst_apart() -> None:
    live_figures, live = load_benchmark("live_figures"), load_benchmark("live_pool")
    t0 = 1_000_000.0
    found = live_figures.Figures(
        pods=3,
        watch_lags=[3.0, 0.2, 1.5],
        unanswered=0,
        event_lags=[9.0, 0.5],
        binds=[],
        requests=Counter(),
        watch_at=[t0 + 5, t0 + 40, t0 + 50],
        event_at=[t0 + 10, t0 + 45],
    )
    assert live.after_burst({"figures": found, "flooded": t0}) == (
        "from 30 s after the flood on: watch p99 1.49, Event p99 0.50; before: 1 of 2 watch "
        "lags over 1 s, 1 of 1 Event lags over 2 s"
    )


def test_live_pool_says_whose_pod_ends_were_slow_and_what_answered_them() -> None:
    live_figures, live = load_benchmark("live_figures"), load_benchmark("live_pool")
    t0 = 1_000_000.0
    found = live_figures.Figures(
        pods=3,
        watch_lags=[1.2, 0.5, 1.05],
        unanswered=0,
        event_lags=[],
        binds=[],
        requests=Counter(),
        watch_at=[t0 + 1, t0 + 2, t0 + 40],
        watch_ns=["team-a", "team-b", "team-b"],
        watch_by=["dagworkflows", "pods", "pods"],
    )
    assert live.slow_line({"figures": found, "flooded": t0}) == (
        "watch lags over 1 s: flood's 1 in the first 30 s, 0 after; steady's 0 in the first "
        "30 s, 1 after (answered by writes of dagworkflows 1, pods 1)"
    )


def test_live_pool_counts_the_requests_of_the_floods_first_seconds() -> None:
    live_figures, live = load_benchmark("live_figures"), load_benchmark("live_pool")
    t0 = 1_000_000.0

    def request(t: float, method: str, kind: str, sub: str = "") -> object:
        return live_figures.Request(t0 + t, method, kind, "team-a", "x", sub, 200, 1)

    writes = [
        request(-1, "POST", "events"),  # (before the flood)
        request(0, "POST", "events"),
        request(2, "POST", "pods"),
        request(3, "PATCH", "pods"),
        request(29, "PATCH", "dagworkflows", "status"),
        request(30, "PATCH", "executorpools", "status"),  # (after its first 30 s)
    ]
    burst = live.burst_requests(writes, t0)
    assert burst == {"events": 1, "pod creates": 1, "pod patches": 1, "status": 1}
    found = live_figures.Figures(2, [], 0, [], [], Counter())
    assert live.burst_line({"burst": burst, "figures": found}) == (
        "first 30 s after the flood: 2.00 requests a pod (pod creates 1, pod patches 1, "
        "events 1, status 1, pool status 0)"
    )


def test_live_pool_says_how_the_visibility_api_answered() -> None:
    live = load_benchmark("live_pool")
    answered = {"visibility": [0.004, 0.012, 0.008], "visibility_asks": 4}
    assert live.visibility_line(answered) == (
        "visibility API: 3 answers of 4 asks, p50 8 ms, p99 12 ms, max 12 ms"
    )
    assert live.visibility_line({"visibility": [], "visibility_asks": 2}) == (
        "visibility API: no answer of 2 asks"
    )


def test_live_pool_reads_the_loops_figures_from_the_metrics() -> None:
    live = load_benchmark("live_pool")
    text = "\n".join(
        [
            "# HELP idlegate_decision_cpu_seconds ...",
            'idlegate_decision_cpu_seconds_count{pool="default"} 10.0',
            'idlegate_decision_cpu_seconds_count{pool="shared"} 30.0',
            'idlegate_decision_cpu_seconds_sum{pool="shared"} 0.5',
            'idlegate_loop_stall_seconds_bucket{le="0.1"} 50.0',
            'idlegate_loop_stall_seconds_bucket{le="0.25"} 58.0',
            "idlegate_loop_stall_seconds_count 60.0",
        ]
    )
    loop = live.loop_figures(text)
    assert loop == {"decisions": 40.0, "decision CPU": 0.5, "beats": 60.0, "beats on time": 58.0}
    assert live.loop_line({"loop": loop}) == (
        "loop: 0.5 s of CPU in 40 decisions; heartbeat late by over 0.25 s 2 times of 60 "
        "(1 s beats)"
    )
    assert live.loop_line({"loop": {}}) == "loop: no such metrics (an older operator)"


def test_a_live_benchmark_without_its_harness_says_how_to_get_it() -> None:
    live_operator = load_benchmark("live_operator")
    outside = ModuleNotFoundError("No module named 'tests'", name="tests")
    said = live_operator.harness_missing(outside, "benchmarks.live_pool")
    assert said == "Error: run it from the repository root: python -m benchmarks.live_pool"
    without_kmock = live_operator.harness_missing(
        ModuleNotFoundError("No module named 'kmock'", name="kmock"), "benchmarks.live_pool"
    )
    assert without_kmock.startswith("Error: ") and "\n" not in without_kmock
    unknown = ModuleNotFoundError("No module named 'nowhere'", name="nowhere")
    with pytest.raises(ModuleNotFoundError):
        live_operator.harness_missing(unknown, "benchmarks.live_pool")


def test_live_profile_names_the_heaviest_processes_outside_a_run_and_the_waits() -> None:
    profile = load_benchmark("live_profile")
    first = {1: ("a", 1.0), 2: ("b", 5.0), 3: ("run", 0.0)}
    last = {1: ("a", 4.0), 2: ("b", 5.5), 3: ("run", 9.0), 4: ("new", 2.0)}
    assert profile.heaviest(first, last, {3}) == "a 3.0; new 2.0; b 0.5"
    keys = ("loop", "operator threads", "machine", "loop waiting", "loop slices")
    start = dict.fromkeys(keys, 0.0) | {"api server, kubelets waiting": 1.0}
    end = {"loop": 2.0, "operator threads": 1.0, "machine": 10.0, "loop waiting": 4.0}
    end |= {"loop slices": 100, "api server, kubelets waiting": 3.5}
    line = profile.summary(start, end, 10.0)
    assert "waited for a core 40%" in line and "(40.00 ms waited each)" in line
    assert line.endswith("seconds others waited for a core: api server, kubelets 2.5")
    assert "others 7.0" in line  # (the waits are not CPU: not taken from the machine's)


def test_live_pool_runs_its_burners_at_the_niceness_asked() -> None:
    live = load_benchmark("live_pool")
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with live.burning(2, 5) as pids:
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in pids] == [own + 5] * 2
    with live.burning(1) as pids:
        assert os.getpriority(os.PRIO_PROCESS, pids[0]) == own
