"""ExecutorPool: label selection, routing of workflows to pools, the model, lint, the CRD."""

from __future__ import annotations

import pytest
import yaml

from idlegate.api import crd, kinds
from idlegate.api.lint import lint_paths
from idlegate.api.pool_spec import (
    DEFAULT_POOL,
    ExecutorPoolSpec,
    LabelSelector,
    parse_pool_spec,
    pool_problems,
    route,
    selects,
)
from idlegate.errors import SpecError
from idlegate.sim.spec import parse_workflow

pytestmark = pytest.mark.looptime  # the async tests: asyncio in fake loop time


def selector(**raw: object) -> LabelSelector:
    return LabelSelector.model_validate(raw)


@pytest.mark.parametrize(
    ("raw", "labels", "expected"),
    [
        ({}, {}, True),  # {} selects everything
        ({}, {"team": "a"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
        ({"matchLabels": {"team": "a"}}, {}, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
         {"team": "b"}, True),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}, {}, False),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
         {}, True),  # absent is not in the set, as in Kubernetes
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
         {"team": "a"}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, {"gpu": ""}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, {"gpu": "1"}, False),
        # matchLabels and every expression are ANDed
        ({"matchLabels": {"team": "a"},
          "matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, {"team": "a"}, False),
    ],
)  # fmt: skip
def test_selects_as_kubernetes_does(raw, labels, expected):
    assert selects(selector(**raw), labels) is expected


def test_an_absent_selector_selects_nothing():
    assert not selects(None, {})
    assert not selects(None, {"team": "a"})


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "a", "operator": "In"},
        {"key": "a", "operator": "NotIn", "values": []},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a", "operator": "Near", "values": ["x"]},
    ],
)
def test_requirements_whose_values_do_not_fit_their_operator_are_refused(requirement):
    with pytest.raises(SpecError, match="ExecutorPool 'p'"):
        parse_pool_spec({"size": 1, "namespaceSelector": {"matchExpressions": [requirement]}}, "p")


def test_a_pool_needs_a_size_of_at_least_one():
    for raw in ({}, {"size": 0}, {"size": "2"}, None):
        with pytest.raises(SpecError, match="size"):
            parse_pool_spec(raw, "p")
    spec = parse_pool_spec({"size": 3, "policy": "fair", "planBudgetMs": 50}, "p")
    assert (spec.size, spec.policy, spec.plan_budget_ms) == (3, "fair", 50)


def pools(**selectors: dict | None) -> list[tuple[str, ExecutorPoolSpec]]:
    return [
        (name, ExecutorPoolSpec.model_validate({"size": 1, "namespaceSelector": raw}))
        for name, raw in selectors.items()
    ]


def test_route_prefers_the_named_pool_then_the_selector_then_the_default():
    known = pools(batch={"matchLabels": {"team": "batch"}}, gpu=None)
    assert route("gpu", {"team": "batch"}, known) == "gpu"  # named wins over the selector
    assert route(None, {"team": "batch"}, known) == "batch"
    assert route(None, {"team": "web"}, known) == DEFAULT_POOL
    assert route(DEFAULT_POOL, {"team": "batch"}, known) == DEFAULT_POOL
    assert route(None, {}, []) == DEFAULT_POOL  # no pools at all: as before pools


def test_a_named_pool_that_does_not_exist_routes_nowhere():
    assert route("missing", {"team": "batch"}, pools(batch={})) is None


def test_several_selecting_pools_route_to_the_first_by_name():
    known = pools(zeta={}, alpha={"matchLabels": {"team": "a"}}, beta={})
    assert route(None, {"team": "a"}, known) == "alpha"
    assert route(None, {"team": "b"}, known) == "beta"


def test_spec_pool_is_a_valid_object_name():
    stages = [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}]
    assert parse_workflow({"stages": stages, "pool": "team-a"}, "w").pool == "team-a"
    assert parse_workflow({"stages": stages}, "w").pool is None
    with pytest.raises(SpecError, match="pool"):
        parse_workflow({"stages": stages, "pool": "Team A"}, "w")


def pool_object(**overrides: object) -> dict:
    obj = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.POOL_KIND,
        "metadata": {"name": "batch"},
        "spec": {"size": 4, "namespaceSelector": {"matchLabels": {"team": "batch"}}},
    }
    return {**obj, **overrides}


def test_pool_problems():
    assert pool_problems(pool_object()) == []
    assert [p for p, _ in pool_problems(pool_object(metadata={"name": DEFAULT_POOL}))] == [
        "metadata.name"
    ]
    namespaced = pool_object(metadata={"name": "x", "namespace": "team-a"})
    assert [p for p, _ in pool_problems(namespaced)] == ["metadata.namespace"]
    bad_policy = pool_object(spec={"size": 2, "policy": "bogus:x"})
    ((path, text),) = pool_problems(bad_policy)
    assert path == "spec.policy" and "unknown scheduler 'bogus'" in text
    ((path, text),) = pool_problems(pool_object(spec={"size": 0}))
    assert path == "spec.size" and text == "Input should be greater than or equal to 1"


def test_lint_knows_the_pool_kind(tmp_path):
    good, bad = pool_object(), pool_object(spec={"size": 1, "policy": "nope"})
    (tmp_path / "pools.yaml").write_text(yaml.safe_dump_all([good, bad]))
    report = lint_paths([str(tmp_path)])
    assert report.pools == 2 and report.invalid == 1
    assert [p.field for p in report.problems] == ["spec.policy"]
    assert "2 ExecutorPool(s)" in report.summary()


def test_the_pool_crd_is_cluster_scoped_with_its_columns():
    body = crd.render_crd(kinds.POOL_KIND)
    assert body["spec"]["scope"] == "Cluster"
    assert body["metadata"]["name"] == "executorpools.idlegate.io"
    version = body["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Size", "Busy", "Pending", "CPU", "Memory", "Policy", "Waiting", "Age"
    ]  # fmt: skip
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["size"]["minimum"] == 1
    assert crd.render_crd(kinds.KIND)["spec"]["scope"] == "Namespaced"


# -- Pools over the fakes: routing, waiting, resize, deletion --------------------------------


@pytest.mark.asyncio
async def test_pools_route_wait_resize_and_delete_without_preempting():

    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=3)
    h.kube.add_namespace("default", labels={"team": "batch"})
    pools = h.pools
    batch = ExecutorPoolSpec.model_validate({"size": 1, "namespaceSelector": {}})
    assert pools.apply("batch", batch) == []
    body = h.kube.add_workflow("w1", {"stages": [stage("a", tasks=2, duration=10.0)]})
    h.admit(body)
    await h.settle()
    assert ("default", "w1") in pools.bridges["batch"].core.workflows
    assert len(h.released("w1")) == 1  # a pool of 1
    lost = h.kube.add_workflow("w2", {"stages": [stage("a")], "pool": "gpu"})
    h.admit(lost)
    await h.settle()
    assert {k: w.pool for k, w in pools.waiting.items()} == {("default", "w2"): "gpu"}
    (cond,) = [c for c in h.kube.status("w2")["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("False", "PoolNotFound")
    running = h.released("w1")
    await intake.readmit(pools, pools.apply("batch", batch.model_copy(update={"size": 2})))
    await h.settle()
    assert set(running) <= set(h.released("w1")) and len(h.released("w1")) == 2
    gpu = ExecutorPoolSpec.model_validate({"size": 1})
    await intake.readmit(pools, pools.apply("gpu", gpu))
    await h.settle()
    assert ("default", "w2") in pools.bridges["gpu"].core.workflows and not pools.waiting
    (cond,) = [c for c in h.kube.status("w2")["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("True", "PoolFound")
    await intake.readmit(pools, pools.remove("gpu"))
    await h.settle()
    assert {k: w.pool for k, w in pools.waiting.items()} == {
        ("default", "w2"): "gpu"
    }  # its pool went: it waits again
    assert h.released("w2")  # and its running pod was not deleted
    metrics = h.bridge.metrics
    assert metrics.registry.get_sample_value("idlegate_executors", {"pool": "batch"}) == 2
    assert metrics.registry.get_sample_value("idlegate_executors", {"pool": "gpu"}) is None


@pytest.mark.asyncio
async def test_a_rebuild_applies_the_pools_first_and_no_finished_workflow_waits():
    """Issue 42: a restart admitted every workflow before kopf's handler of its pool ran."""
    from idlegate.operator.edge import intake
    from idlegate.operator.edge.pools import pool_status
    from tests.operator_fakes import harness, stage

    h = harness(pool=3)
    h.kube.add_pool("batch", {"size": 1})
    # pools that cannot run are left to their handler, which says why on them
    h.kube.add_pool("broken", {"size": 0})
    h.kube.add_pool("unloadable", {"size": 1, "policy": "learned:/nonexistent/policy.onnx"})
    h.kube.add_workflow("run", {"stages": [stage("a")], "pool": "batch"})
    h.kube.add_workflow("stuck", {"stages": [stage("a")], "pool": "unloadable"})
    for name, phase, pool in (("ok", "Succeeded", "batch"), ("gone", "Failed", "deleted")):
        body = h.kube.add_workflow(name, {"stages": [stage("a")], "pool": pool})
        body["status"] = {"phase": phase, "observedGeneration": 1}
    pools = h.pools
    await intake.rebuild(pools)
    await h.settle()
    assert sorted(pools.bridges) == ["batch", "default"]
    assert list(pools.bridges["batch"].core.workflows) == [("default", "run")]
    # a finished workflow needs no pool, whichever it named; one unfinished waits for it
    assert {key: w.pool for key, w in pools.waiting.items()} == {("default", "stuck"): "unloadable"}
    assert pool_status("batch", pools)["pending"] == 1
    assert h.released("run") == ["run-a-0"]
    # (issue 60, item 5: the pool exists, and its workflow says why it cannot run)
    waits = [e for e in h.kube.events if e["reason"] in ("PoolNotFound", "PoolInvalid")]
    assert [(e["involvedObject"]["name"], e["reason"]) for e in waits] == [("stuck", "PoolInvalid")]
    assert waits[0]["message"].startswith("ExecutorPool 'unloadable' cannot run (")
    for name in ("run", "ok", "gone"):  # (those admitted at once have none)
        conditions = h.kube.status(name).get("conditions") or []
        assert "PoolReady" not in {c["type"] for c in conditions}, name


# -- metrics: one registry, a pool label ------------------------------------------------------


def test_each_pool_writes_its_own_series_into_one_registry():
    from prometheus_client import generate_latest

    from idlegate.operator.metrics import Metrics

    default = Metrics(8, "fair")
    batch = Metrics(2, "srpt", pool="batch", beside=default)
    assert batch.registry is default.registry
    default.decisions.labels("launch").inc()
    batch.decisions.labels("launch").inc(3)
    batch.busy_executors.set(2)
    default.api_up.set(0)  # operator-wide: one series, no pool
    assert default.value("idlegate_decisions_total", kind="launch") == 1
    assert batch.value("idlegate_decisions_total", kind="launch") == 3
    assert (default.value("idlegate_busy_executors"), batch.value("idlegate_busy_executors")) == (
        0,
        2,
    )
    assert batch.value("idlegate_api_up") == 0
    text = generate_latest(default.registry).decode()
    assert 'idlegate_executors{pool="default"} 8.0' in text
    assert 'idlegate_executors{pool="batch"} 2.0' in text
    assert 'idlegate_operator_info{policy="srpt",pool="batch"} 1.0' in text
    assert "idlegate_api_up 0.0" in text
    batch.remove()  # the pool is gone: a scrape no longer shows it
    text = generate_latest(default.registry).decode()
    assert 'pool="batch"' not in text and 'idlegate_executors{pool="default"} 8.0' in text


# -- a pool shrunk below what runs in it: its running pods counted beyond the pool ------------


@pytest.mark.asyncio
async def test_a_shrunk_pool_counts_the_running_pods_that_do_not_fit_and_releases_nothing_new():

    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=1)
    pools = h.pools
    fifo = {"size": 3, "policy": "fifo", "namespaceSelector": {}}
    pools.apply("batch", ExecutorPoolSpec.model_validate(fifo))
    first = {"stages": [stage("a", duration=1.0), stage("b", tasks=3, deps=("a",))]}
    for name, spec in (("first", first), ("second", {"stages": [stage("a", tasks=2)]})):
        h.admit(h.kube.add_workflow(name, spec))
        await h.settle()
    await h.finish("first-a-0", after=1.0)
    running = ["first-b-0", "second-a-0", "second-a-1"]
    assert h.released() == running  # the pool of 3 is full; first's b-1 and b-2 wait
    shrunk = ExecutorPoolSpec.model_validate({**fifo, "size": 2})
    with pools.moving():  # first is admitted again before second: it must not fill second's
        await intake.readmit(pools, pools.apply("batch", shrunk))
    await h.settle()
    batch = pools.bridges["batch"]
    assert h.released() == running and batch.core.busy == 3  # none deleted, none new
    assert [wf.beyond() for wf in batch.core.workflows.values()] == [0, 1]
    conditions = {c["type"]: c for c in h.kube.status("second")["conditions"]}
    assert (conditions["Running"]["status"], conditions["Running"]["reason"]) == (
        "True",
        "TasksRunning",
    )
    assert conditions["Running"]["message"].startswith("2 task pod(s) released")
    assert "1 of them beyond the pool" in conditions["Running"]["message"]
    await h.finish("first-b-0", after=1.0)
    # the freed executor is the pod's that ran beyond the pool: still nothing new
    assert h.released() == running[1:] and batch.core.busy == 2
    await h.finish("second-a-0", after=1.0)
    assert h.released() == ["first-b-1", "second-a-1"] and batch.core.busy == 2
    h.max_occupying = 0
    await h.run_to_completion()
    assert h.max_occupying == 2  # the new size from here on
    for name in ("first", "second"):
        status = h.kube.status(name)
        assert status["phase"] == "Succeeded"
        assert [s["succeeded"] for s in status["stages"]] == [s["tasks"] for s in status["stages"]]
    assert all(h.kube.pods[("default", n)]["status"]["phase"] == "Succeeded" for n in running)


@pytest.mark.asyncio
async def test_a_restart_with_a_smaller_pool_size_counts_the_running_pods_beyond_it():
    from idlegate.operator.edge import intake
    from idlegate.policy import make_scheduler
    from tests.operator_fakes import FakeClock, FakeKube, Harness, stage

    kube, clock = FakeKube(), FakeClock()
    before = Harness(kube, clock, 3, make_scheduler("fifo"))
    await before.submit("wide", {"stages": [stage("a", tasks=3), stage("z", deps=("a",))]})
    await before.submit("next", {"stages": [stage("a")]})
    running = ["wide-a-0", "wide-a-1", "wide-a-2"]
    assert before.released() == running
    after = Harness(kube, clock, 1, make_scheduler("fifo"))  # --pool-size 3 -> 1
    await intake.rebuild(after.pools)
    await after.settle()
    assert after.released() == running and after.bridge.core.busy == 3
    await after.finish("wide-a-0", after=10)
    await after.finish("wide-a-1")
    assert after.released() == ["wide-a-2"] and after.bridge.core.busy == 1
    after.max_occupying = 0
    await after.run_to_completion()
    assert after.max_occupying == 1
    assert {kube.status(n)["phase"] for n in ("wide", "next")} == {"Succeeded"}


def test_the_pool_status_refresh_and_ready_time_come_from_the_operators_clock():
    pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from idlegate.api.pool_spec import pool_conditions
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from idlegate.sim.timestamps import from_datetime
    from tests.clocks import ScaledClock
    from tests.operator_fakes import FakeClock, FakeKube

    def refresh_every(clock: object) -> float:
        operator = Operator(Settings(pool_size=2, clock=clock), kube=FakeKube())
        handlers = build_registry(operator)._spawning.get_all_handlers()
        (timer,) = [h for h in handlers if h.id == "pool-status"]
        return timer.interval

    # 5 s of the operator's clock: a quarter of a second of the loop's when it runs 20x
    assert refresh_every(ScaledClock(20)) == pytest.approx(0.25)
    assert refresh_every(FakeClock()) == pytest.approx(5.0)
    t = 1_700_000_000.0
    (ready,) = pool_conditions(True, "Running", "runs", t, {})
    assert from_datetime(ready["lastTransitionTime"]) == t
    # still Ready later: the transition keeps its time; Invalid then is a new one
    body = {"status": {"conditions": [ready]}}
    assert pool_conditions(True, "Running", "runs", t + 60, body) == [ready]
    (invalid,) = pool_conditions(False, "Invalid", "bad", t + 60, body)
    assert from_datetime(invalid["lastTransitionTime"]) == t + 60


@pytest.mark.asyncio
async def test_the_known_cron_runs_are_told_to_the_pool_their_runs_land_in():
    from idlegate.sim.dag import Dag
    from idlegate.sim.engine import JobArrival
    from tests.operator_fakes import harness

    pools = harness(pool=2).pools
    dag = Dag.from_spec(
        parse_workflow({"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": 5}]}, "w")
    )
    batch_runs = (JobArrival(100.0, "nightly-1", dag, None, scheduled=True),)
    gpu_runs = (JobArrival(50.0, "train-1", dag, None, scheduled=True),)
    pools.apply(
        "batch",
        ExecutorPoolSpec.model_validate(
            {"size": 1, "namespaceSelector": {"matchLabels": {"team": "batch"}}}
        ),
    )
    pools.labels["analytics"] = {"team": "batch"}
    pools.foresee(("analytics", "nightly"), batch_runs)  # by its namespace's labels
    pools.foresee(("analytics", "train"), gpu_runs, "gpu")  # workflowSpec.pool: not there yet

    def known() -> dict[str, list[str]]:
        return {name: [a.name for a in b.core.decider.known] for name, b in pools.bridges.items()}

    assert known() == {"default": [], "batch": ["nightly-1"]}
    pools.apply("gpu", ExecutorPoolSpec.model_validate({"size": 1}))  # its runs land there now
    assert known() == {"default": [], "batch": ["nightly-1"], "gpu": ["train-1"]}
    pools.remove("batch")  # nightly's runs go to the default pool, as its workflows would
    assert known() == {"default": ["nightly-1"], "gpu": ["train-1"]}
    pools.foresee(("analytics", "train"), ())  # suspended or deleted: withdrawn
    assert known() == {"default": ["nightly-1"], "gpu": []}


@pytest.mark.asyncio
async def test_the_shadow_watches_the_default_pool_only():
    pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    import asyncio

    from idlegate.api.settings import Settings
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube

    settings = Settings(
        pool_size=2,
        policy="fair",
        shadow="fifo",
        shadow_estimate=False,
        metrics_port=None,
        health_port=None,
        clock=FakeClock(),
    )
    operator = Operator(settings, kube=FakeKube())
    operator.listing.listed(None, set())  # (no kopf here: the pods' first listing, empty)
    await operator.start()
    try:
        await asyncio.wait_for(operator.watchdog.rebuilt.wait(), 5)
        await operator.pool_changed("batch", {"size": 1})
        assert operator.shadow is not None
        assert operator.bridge.core.decider.shadow is operator.shadow
        assert operator.pools.bridges["batch"].core.decider.shadow is None  # (deploy/README.md)
    finally:
        await operator.stop()


@pytest.mark.asyncio
async def test_a_gang_with_tasks_done_running_beyond_a_smaller_pool_is_adopted_and_finishes():
    """A gang stage restored with one task done and two running beyond the pool starts its
    two remaining tasks together once two executors are free, so the pool does not stall."""
    from idlegate.operator.edge import intake
    from idlegate.policy import make_scheduler
    from tests.operator_fakes import FakeClock, FakeKube, Harness, stage

    kube, clock = FakeKube(), FakeClock()
    before = Harness(kube, clock, 5, make_scheduler("fifo"))
    await before.submit("other", {"stages": [stage("a", tasks=2, duration=30.0)]})
    await before.submit("z", {"stages": [stage("a", tasks=3, gang=True), stage("z", deps=("a",))]})
    assert before.released() == ["other-a-0", "other-a-1", "z-a-0", "z-a-1", "z-a-2"]
    await before.finish("z-a-0", after=5.0)
    after = Harness(kube, clock, 3, make_scheduler("fifo"))  # --pool-size 5 -> 3
    await intake.rebuild(after.pools)
    await after.settle()
    assert after.bridge.core.busy == 4 and len(after.bridge.core.cluster.beyond) >= 1
    after.max_occupying = 0
    await after.run_to_completion()
    assert after.max_occupying <= 4
    assert {kube.status(n)["phase"] for n in ("z", "other")} == {"Succeeded"}


def test_one_source_of_pool_problems_two_renderings():
    raw = {"size": 0, "planBudgetMs": "100", "namespaceSelecter": {}}
    with pytest.raises(SpecError) as exc:
        parse_pool_spec(raw, "p")
    # the operator's status and Event: every problem, and how to fix it in the cluster
    assert str(exc.value) == (
        "ExecutorPool 'p': size: Input should be greater than or equal to 1; planBudgetMs: "
        "must be a number, not the string '100' (write it without quotes); namespaceSelecter: "
        "is not a field here; did you mean namespaceSelector?; fix its spec (kubectl edit "
        "executorpool p)"
    )
    # lint: the same problems, one per field, with no advice about a cluster
    found = pool_problems(pool_object(spec=raw))
    assert [path for path, _ in found] == [
        "spec.size",
        "spec.planBudgetMs",
        "spec.namespaceSelecter",
    ]
    assert all(text in str(exc.value) for _, text in found)


def test_a_selector_problem_does_not_hide_a_bad_policy():
    bad = pool_object(
        spec={"size": 2, "policy": "bogus:x", "namespaceSelector": {"matchLabels": {"a": 1}}}
    )
    assert pool_problems(bad) == [
        ("spec.namespaceSelector.matchLabels.a", "must be a string, not 1: quote it ('1')"),
        ("spec.policy", pool_problems(pool_object(spec={"size": 2, "policy": "bogus:x"}))[0][1]),
    ]


def test_a_spec_that_is_not_a_mapping_names_the_fields():
    ((path, text),) = pool_problems(pool_object(spec="big"))
    assert (path, text) == (
        "spec",
        "is an object (a mapping with size, resources, nodeSelector, namespaceSelector, policy, planBudgetMs, queues, forecastArrivals), not a string",
    )


@pytest.mark.asyncio
async def test_a_gang_wider_than_its_pool_waits_for_the_pool_to_grow():

    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    pools = h.pools
    small = ExecutorPoolSpec.model_validate({"size": 2, "namespaceSelector": {}})
    pools.apply("batch", small)
    body = h.kube.add_workflow("g", {"stages": [stage("a", tasks=3, gang=True)]})
    h.admit(body)
    await h.settle()
    assert {k: w.pool for k, w in pools.waiting.items()} == {
        ("default", "g"): "batch"
    } and h.released() == []
    status = h.kube.status("g")
    assert status["phase"] == "Pending"  # waiting, not Invalid: the pool can grow
    (cond,) = [c for c in status["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("False", "PoolTooSmall")
    assert "gang stage of 3 tasks" in cond["message"] and "has 2" in cond["message"]
    assert h.kube.reasons("g").count("PoolTooSmall") == 1
    grown = small.model_copy(update={"size": 3})
    await intake.readmit(pools, pools.apply("batch", grown))
    await h.settle()
    assert not pools.waiting and h.released() == ["g-a-0", "g-a-1", "g-a-2"]
    (cond,) = [c for c in h.kube.status("g")["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("True", "PoolFound")
    await h.run_to_completion()
    assert h.kube.status("g")["phase"] == "Succeeded"


@pytest.mark.asyncio
async def test_a_workflow_in_a_pool_that_exists_but_cannot_run_says_so_not_that_it_is_missing():
    """Issue 60, item 5: it said PoolNotFound "does not exist"."""
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=2)
    pools = h.pools
    await h.submit("w", {"stages": [stage("a")], "pool": "x"})
    assert h.kube.reasons("w") == ["PoolNotFound"]  # (not created yet: it does not exist)
    why = "ExecutorPool 'x': spec.size must be at least 1."
    await intake.readmit(pools, pools.cannot_run("x", why)[0])  # (what its handler does)
    await h.settle()
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "PoolInvalid"]
    assert said == (
        "ExecutorPool 'x' cannot run (ExecutorPool 'x': spec.size must be at least 1): the "
        "workflow waits until its spec is fixed (kubectl describe executorpool x), or "
        "spec.pool names another."
    )
    (cond,) = [c for c in h.kube.status("w")["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("False", "PoolInvalid")
    await intake.readmit(pools, pools.apply("x", ExecutorPoolSpec.model_validate({"size": 1})))
    await h.settle()
    assert h.released("w") == ["w-a-0"] and not pools.invalid


@pytest.mark.asyncio
async def test_the_pool_handler_tells_the_workflows_waiting_that_their_pool_cannot_run(
    monkeypatch,
):
    """Issue 60, item 5, through kopf's handler of ExecutorPools: an invalid spec is said
    on the pool (Ready False, Invalid) and on the workflows naming it (PoolInvalid)."""
    kopf = pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from tests.operator_fakes import harness, pool_handler, stage

    h = harness(pool=2)
    sync = pool_handler(h, monkeypatch)
    await h.submit("w", {"stages": [stage("a")], "pool": "x"})
    patch = kopf.Patch()
    body = kopf.Body({"metadata": {"name": "x"}, "spec": {"size": 0}})
    await sync.fn(body=body, meta={"name": "x", "uid": "u"}, patch=patch)
    await h.settle()
    (ready,) = patch["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "Invalid")
    assert h.kube.reasons("w") == ["PoolNotFound", "PoolInvalid"]


def test_routing_says_a_pool_that_exists_but_cannot_run_for_every_kind():
    """Issue 60, item 5, for Argo Workflows and Airflow runs too (one routing)."""
    from idlegate.api.routing import ARGO_KIND, PoolInvalidError, PoolNotFoundError, route_workflow

    argo = {"metadata": {"namespace": "ns", "labels": {"idlegate.io/pool": "x"}}}
    with pytest.raises(PoolNotFoundError) as missing:
        route_workflow(ARGO_KIND, argo, {}, [])
    assert missing.value.reason == "PoolNotFound"
    with pytest.raises(PoolInvalidError) as invalid:
        route_workflow(ARGO_KIND, argo, {}, [], {"x": "spec.size must be at least 1."})
    assert invalid.value.reason == "PoolInvalid" and str(invalid.value) == (
        "ExecutorPool 'x' cannot run (spec.size must be at least 1): the workflow waits until "
        "its spec is fixed (kubectl describe executorpool x), or label idlegate.io/pool names "
        "another."
    )
