"""Issue 59 in the operator: a pool's queues (ExecutorPool spec.queues, --queues), which queue
a workflow joins, QueueNotFound, the wait bound's timer, why a workflow waits, the pool's
status and metrics of its queues, and lint."""

from __future__ import annotations

import pytest

from idlegate.api.pool_spec import ExecutorPoolSpec, parse_pool_spec, pool_problems
from idlegate.api.queueing import (
    QueueFile,
    QueueNotFoundError,
    bound_hit,
    placement,
    priority_classes,
    queue_status,
    queues_summary,
    why_waiting,
)
from idlegate.api.routing import Routing
from idlegate.api.settings import Settings
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.admission import Admission
from idlegate.sim.queues import queues_from
from idlegate.sim.resources import ResourceVector

pytestmark = pytest.mark.looptime

TWO = [
    {"name": "a", "nominal": {"pods": 2}, "borrowingLimit": {"pods": 1}},
    {"name": "b", "nominal": {"pods": 2}, "borrowingLimit": {"pods": 1}},
]
# (a limit of 0 is read as no limit: `ResourceVector.of` drops zeros, reported in issue 59)


# -- pure: placement, why a workflow waits, status -------------------------------------------


def test_a_workflow_joins_its_named_queue_then_its_namespaces_then_the_default():
    queues = queues_from(
        [
            {"name": "data-eng", "nominal": {"pods": 2}, "namespaces": ["etl"]},
            {"name": "default", "nominal": {"pods": 2}},
            {"name": "ml", "nominal": {"pods": 2}},
        ]
    )
    assert placement(queues, Routing("p", "ml"), "etl", "DagWorkflow") == 2
    assert placement(queues, Routing("p"), "etl", "DagWorkflow") == 0
    assert placement(queues, Routing("p"), "web", "DagWorkflow") == 1
    with pytest.raises(QueueNotFoundError) as caught:
        placement(queues, Routing("p", "nope"), "etl", "DagWorkflow")
    assert caught.value.reason == "QueueNotFound"
    assert str(caught.value) == (
        "Queue 'nope' does not exist in ExecutorPool 'p' (its queues: data-eng, default, ml): "
        "the workflow waits until it is declared, or names another queue."
    )


def admission(raw: list[dict], pods: int = 4, **resources: str) -> Admission:
    capacity = ResourceVector.of({"pods": pods, **resources}, "")
    names = [n for n in capacity if n != "pods"]
    return Admission(queues_from(raw), capacity, names)


def cpu_pool(*queues: dict, pods: int = 10, **waiting: int):
    """A pool of `pods` pods and 8 CPU whose queues `queues` have each `waiting[name]` one-CPU
    workflows, after a round of fifo (what starts, starts)."""
    from idlegate.policy import make_scheduler
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.dag import Dag
    from idlegate.sim.engine import decision_round
    from idlegate.sim.spec import parse_workflow

    cluster = Cluster(pods, resources=ResourceVector.parse("cpu=8"))
    specs = queues_from(list(queues))
    cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    one = {"name": "s", "tasks": 1, "taskDurationSeconds": 10, "resources": {"cpu": "1"}}
    for q, spec in enumerate(specs):
        for _ in range(waiting.get(spec.name.replace("-", "_"), 0)):
            cluster.add_job(Dag.from_spec(parse_workflow({"stages": [one]})), 0.0).queue = q
    list(decision_round(cluster, make_scheduler("fifo"), 0.0))
    return cluster


def test_why_waiting_says_which_limit_holds_the_queue():
    data_eng = {"name": "data-eng", "nominal": {"cpu": 4}, "borrowingLimit": {"cpu": 1}}
    ml = {"name": "ml", "nominal": {"cpu": 4}}
    # ml idle: data-eng runs its 4 and borrows 1, its sixth waits at its limit
    cluster = cpu_pool(data_eng, ml, data_eng=6)
    assert cluster.admission is not None
    assert why_waiting(cluster.admission, 0) == (
        "queue data-eng: cpu 5/4 used, borrowing limit reached"
    )
    assert why_waiting(cluster.admission, 1) is None  # (nothing waits)
    # both hungry at their quotas: nothing idle to borrow for either
    cluster = cpu_pool(data_eng, ml, data_eng=5, ml=5)
    assert cluster.admission is not None
    assert [j.held for j in cluster.jobs].count(1) == 8
    assert why_waiting(cluster.admission, 0) == (
        "queue data-eng: cpu 4/4 used, nothing idle to borrow in the cohort"
    )
    assert why_waiting(cluster.admission, 1) == (
        "queue ml: cpu 4/4 used, nothing idle to borrow in the cohort"
    )
    # within its quota the queue's reason is none: what holds it is the pool's (3 pods)
    cluster = cpu_pool(data_eng, ml, pods=3, data_eng=4)
    assert cluster.admission is not None
    assert why_waiting(cluster.admission, 0) is None
    result = cluster.admission_result()
    assert result is not None
    (waits,) = result.queues[0].waiting
    assert waits.reason is not None and waits.reason.value == "WaitingForExecutors"
    assert bound_hit(admission([{"name": "a", "waitBound": 60}]), 0, 100.0, 112.5) == (
        "queue a: a task that waited past its 60 s bound started first, 12.5 s after the bound"
    )


def test_queue_status_counts_use_borrowing_and_lending():
    adm = admission([{"name": "a", "nominal": {"pods": 1}}, {"name": "b", "nominal": {"pods": 3}}])
    adm.used = [[3000.0], [1000.0]]  # (a borrows 2 of b's idle 2)
    status = queue_status(adm, [], 0.0)
    assert status == [
        {"name": "a", "used": {"pods": "3"}, "borrowed": {"pods": "2"}, "lent": {"pods": "0"},
         "waiting": 0, "oldestWait": 0.0, "share": 0.75},
        {"name": "b", "used": {"pods": "1"}, "borrowed": {"pods": "0"}, "lent": {"pods": "2"},
         "waiting": 0, "oldestWait": 0.0, "share": 0.25},
    ]  # fmt: skip
    assert queues_summary(status) == "a=0,b=0"


# -- where queues are declared -----------------------------------------------------------------


def test_an_executor_pool_declares_its_queues_checked_against_its_capacity():
    spec = parse_pool_spec({"size": 4, "queues": TWO}, "p")
    assert [q.name for q in spec.queue_specs] == ["a", "b"]
    assert parse_pool_spec({"size": 4}, "p").queue_specs == ()
    with pytest.raises(
        SpecError, match="nominal quotas of pods add up to 4, more than the pool's 3"
    ):
        parse_pool_spec({"size": 3, "queues": TWO}, "p")


@pytest.mark.parametrize(
    ("queues", "problem"),
    [
        (TWO, "the queues' nominal quotas of pods add up to 4, more than the pool's 3"),
        ([{"name": "a", "nominal": {"pods": "-1"}}], "is negative"),
        ([{"name": "a", "nominal": {"pods": "lots"}}], "lots"),
        ([{"name": "a", "nominal": {"pods": 1}, "waitBound": 0}], "a bound of 0"),
        ([{"name": "a", "nominal": {"cpu": 1}}], "the pool does not count cpu (only pods)"),
        ([{"name": "a", "nominal": {"pods": 1}, "size": 2}], "is not a field here"),
    ],
)
def test_lint_says_each_problem_of_a_pools_queues_in_one_line(queues, problem):
    pool = {
        "kind": "ExecutorPool",
        "metadata": {"name": "p"},
        "spec": {"size": 3, "queues": queues},
    }
    (found,) = pool_problems(pool)
    assert found[0].startswith("spec") and problem in found[1] and "\n" not in found[1]


def test_the_default_pools_queues_come_from_a_yaml_file(tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text("- {name: a, nominal: {pods: 2}}\n- {name: b, nominal: {pods: 2}}\n")
    settings = Settings(pool_size=4, queues=str(path))
    assert settings.queues is not None and [q.name for q in settings.queues.specs] == ["a", "b"]
    with pytest.raises(IdlegateError, match=r"--queues: .*add up to 4, more than the pool's"):
        Settings(pool_size=3, queues=str(path))
    with pytest.raises(IdlegateError, match="cannot read"):
        Settings(pool_size=4, queues=str(tmp_path / "missing.yaml"))
    assert isinstance(QueueFile.parse(str(path)), QueueFile)


# -- in the operator ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_queue_at_its_quota_waits_while_another_queue_starts():
    """Without queues, `a`'s four workflows would take the pool of four before `b`'s come."""
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    h.pools.apply(
        "p", ExecutorPoolSpec.model_validate({"size": 4, "queues": TWO, "namespaceSelector": {}})
    )
    for i in range(4):
        h.admit(h.kube.add_workflow(f"a{i}", {"stages": [stage("s")], "queueName": "a"}))
    await h.settle()
    assert h.released() == ["a0-s-0", "a1-s-0", "a2-s-0"]  # (its 2, and 1 borrowed)
    assert "queue a: pods 3/2 used, borrowing limit reached" in " ".join(
        e["message"] for e in h.kube.events if e["involvedObject"]["name"] == "a3"
    )
    for i in range(2):
        h.admit(h.kube.add_workflow(f"b{i}", {"stages": [stage("s")], "queueName": "b"}))
    await h.settle()
    assert h.released() == ["a0-s-0", "a1-s-0", "a2-s-0", "b0-s-0"]  # (b: the room left)
    status = h.pools.bridges["p"].status()
    assert status["queuesSummary"] == "a=1,b=1"
    usage = h.metrics.registry.get_sample_value(
        "idlegate_queue_resource_usage", {"pool": "p", "queue": "a", "resource": "pods"}
    )
    assert usage == 3
    await h.run_to_completion()
    assert all(h.kube.status(f"a{i}")["phase"] == "Succeeded" for i in range(4))
    assert (
        h.metrics.registry.get_sample_value(
            "idlegate_queue_wait_time_seconds_count", {"pool": "p", "queue": "a"}
        )
        == 4
    )


@pytest.mark.asyncio
async def test_a_workflow_naming_a_missing_queue_waits_until_it_is_declared():
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    pools = h.pools
    spec = ExecutorPoolSpec.model_validate({"size": 4, "queues": TWO[:1], "namespaceSelector": {}})
    pools.apply("p", spec)
    h.admit(h.kube.add_workflow("w", {"stages": [stage("s")], "queueName": "b"}))
    await h.settle()
    assert {k: w.reason for k, w in pools.waiting.items()} == {("default", "w"): "QueueNotFound"}
    (cond,) = [c for c in h.kube.status("w")["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("False", "QueueNotFound")
    assert h.released() == []
    await intake.readmit(
        pools,
        pools.apply(
            "p",
            spec.model_copy(
                update={
                    "queues": spec.queues
                    + parse_pool_spec({"size": 4, "queues": TWO}, "p").queues[1:]
                }
            ),
        ),
    )
    await h.settle()
    assert not pools.waiting and h.released() == ["w-s-0"]


@pytest.mark.asyncio
async def test_a_wait_bound_arms_a_timer_for_the_round_at_its_time():
    from tests.operator_fakes import harness, stage

    path_queues = [
        {"name": "a", "nominal": {"pods": 1}, "borrowingLimit": {"pods": 0}, "waitBound": 30}
    ]
    h = harness(pool=2)
    h.pools.apply(
        "p",
        ExecutorPoolSpec.model_validate(
            {"size": 2, "queues": path_queues, "namespaceSelector": {}}
        ),
    )
    h.admit(h.kube.add_workflow("w", {"stages": [stage("s", tasks=2)]}))
    await h.settle()
    assert h.released() == ["w-s-0"]
    at, _ = h.timers.armed["queues/p"]
    assert at == h.clock.now() + 30


@pytest.mark.asyncio
@pytest.mark.parametrize("bound", [30, None])
async def test_a_task_past_its_wait_bound_starts_before_a_workflow_of_higher_priority(bound):
    """`lo` (priority 0) waits behind workflows of priority 1000 in its queue; past its
    bound it takes the next free executor, where without a bound `hi`'s next task would."""
    from tests.operator_fakes import harness, stage

    queue: dict[str, object] = {"name": "a", "nominal": {"pods": 2}}
    if bound is not None:
        queue["waitBound"] = bound
    h = harness(pool=2)
    h.pools.apply(
        "p",
        ExecutorPoolSpec.model_validate({"size": 2, "queues": [queue], "namespaceSelector": {}}),
    )
    h.pools.priorities.update(priority_classes({"metadata": {"name": "high"}, "value": 1000}))
    high = {"priorityClassName": "high"}
    await h.submit("first", {"stages": [stage("s", tasks=2, duration=100)], **high})
    await h.submit("lo", {"stages": [stage("s")]})
    await h.submit("hi", {"stages": [stage("s", tasks=2, duration=100)], **high})
    assert h.released() == ["first-s-0", "first-s-1"]
    await h.finish("first-s-0", after=20)  # (lo has waited 20 s: hi's priority goes first)
    assert h.released() == ["first-s-1", "hi-s-0"]
    await h.finish("first-s-1", after=20)  # (lo has waited 40 s)
    expected = ["hi-s-0", "lo-s-0"] if bound is not None else ["hi-s-0", "hi-s-1"]
    assert h.released() == expected


@pytest.mark.asyncio
async def test_a_workflows_priority_is_its_priority_class_value_and_a_missing_one_warns():
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    h.pools.apply(
        "p", ExecutorPoolSpec.model_validate({"size": 4, "queues": TWO, "namespaceSelector": {}})
    )
    h.pools.priorities.update(priority_classes({"metadata": {"name": "high"}, "value": 1000}))
    h.admit(h.kube.add_workflow("hi", {"stages": [stage("s")], "priorityClassName": "high"}))
    h.admit(h.kube.add_workflow("lost", {"stages": [stage("s")], "priorityClassName": "gone"}))
    await h.settle()
    core = h.pools.bridges["p"].core
    assert core.workflows[("default", "hi")].job.priority == 1000
    assert core.workflows[("default", "lost")].job.priority == 0
    assert h.kube.reasons("lost").count("PriorityClassNotFound") == 1
    assert "PriorityClassNotFound" not in h.kube.reasons("hi")


def test_lint_notes_a_workflow_naming_a_queue_its_linted_pool_lacks(tmp_path):
    import yaml

    from idlegate.api.lint import lint_paths

    pool = {"apiVersion": "idlegate.io/v1alpha1", "kind": "ExecutorPool"}
    pool |= {"metadata": {"name": "p"}, "spec": {"size": 4, "queues": TWO}}
    wf = {"apiVersion": "idlegate.io/v1alpha1", "kind": "DagWorkflow", "metadata": {"name": "w"}}
    stage = {"name": "s", "tasks": 1, "taskDurationSeconds": 5}
    wf |= {"spec": {"pool": "p", "queueName": "c", "stages": [stage]}}
    path = tmp_path / "queues.yaml"
    path.write_text(yaml.safe_dump_all([pool, wf]))
    report = lint_paths([str(path)])
    assert report.ok and not report.problems
    (note,) = report.notes
    assert (note.document, note.reason) == (1, "QueueNotFound")
    assert note.message.startswith("queue 'c' is not one of ExecutorPool 'p''s (a, b)")
    assert "skipped" not in report.summary()
    wf["spec"]["queueName"] = "b"
    path.write_text(yaml.safe_dump_all([pool, wf]))
    assert lint_paths([str(path)]).notes == []


@pytest.mark.asyncio
async def test_a_queue_deleted_while_its_workflows_wait_makes_them_wait_for_it():
    """docs/queues.md's decision: they wait QueueNotFound, not moved to the default queue;
    a running pod is not touched."""
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    pools = h.pools
    spec = ExecutorPoolSpec.model_validate({"size": 4, "queues": TWO, "namespaceSelector": {}})
    pools.apply("p", spec)
    for name in ("b0", "b1", "b2", "b3"):
        h.admit(h.kube.add_workflow(name, {"stages": [stage("s")], "queueName": "b"}))
    await h.settle()
    assert h.released() == ["b0-s-0", "b1-s-0", "b2-s-0"]  # (its 2, and 1 borrowed)
    await intake.readmit(
        pools, pools.apply("p", spec.model_copy(update={"queues": spec.queues[:1]}))
    )
    await h.settle()
    assert {k[1]: w.reason for k, w in pools.waiting.items()} == dict.fromkeys(
        ("b0", "b1", "b2", "b3"), "QueueNotFound"
    )
    assert h.released() == ["b0-s-0", "b1-s-0", "b2-s-0"]  # (still running, not deleted)
    await intake.readmit(pools, pools.apply("p", spec))
    await h.settle()
    assert not pools.waiting
    await h.run_to_completion()
    assert all(h.kube.status(f"b{i}")["phase"] == "Succeeded" for i in range(4))


@pytest.mark.asyncio
async def test_a_task_started_past_its_bound_is_an_event_on_the_pool_and_a_bound_hit():
    from tests.operator_fakes import harness, stage

    bounded = [{"name": "a", "nominal": {"pods": 1}, "waitBound": 5}]
    h = harness(pool=1)
    h.pools.apply(
        "p",
        ExecutorPoolSpec.model_validate({"size": 1, "queues": bounded, "namespaceSelector": {}}),
    )
    for name in ("w1", "w2"):
        h.admit(h.kube.add_workflow(name, {"stages": [stage("s", duration=10.0)]}))
    await h.run_to_completion()
    assert h.kube.status("w2")["phase"] == "Succeeded"
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "WaitBound"]
    assert (
        said
        == "queue a: a task that waited past its 5 s bound started first, 5.0 s after the bound"
    )
    hits = h.metrics.registry.get_sample_value(
        "idlegate_queue_wait_bound_hits_total", {"pool": "p", "queue": "a"}
    )
    assert hits == 1


def test_an_argo_workflow_joins_the_queue_it_names_with_its_priority_and_its_pods_count_there():
    from idlegate.operator.core.core import Core
    from idlegate.operator.core.events import Join, Schedule
    from idlegate.operator.metrics import Metrics
    from idlegate.policy import make_scheduler
    from tests.test_operator_core import ARGO, T0, argo_diamond, argo_pod, map_workflow

    settings = Settings(pool_size=4, queues=QueueFile(queues_from(TWO)))
    core = Core(settings, make_scheduler("fifo"), metrics=Metrics(4, "fifo"))
    core.handle(
        Join(ARGO, map_workflow(argo_diamond()), T0, [argo_pod(".a")], queue=1, priority=7), T0
    )
    core.handle(Schedule(), T0)
    job = core.holding(ARGO).job
    assert (job.queue, job.priority) == (1, 7)
    assert core.cluster.admission is not None and core.cluster.admission.used[1] == [1000.0]


def test_a_workflow_of_another_controller_keeps_its_queue_and_priority_when_remapped():
    # an Airflow run is read again at each of its pods' ends, and its job replaced once
    # Airflow settled more of it (an Argo Workflow's as its status does): the new job kept
    # its queue but fell to priority 0
    from idlegate.operator.core.core import Core
    from idlegate.operator.core.events import Join
    from idlegate.operator.metrics import Metrics
    from idlegate.policy import make_scheduler
    from tests.test_operator_core import ARGO, T0, argo_diamond, argo_pod, map_workflow

    settings = Settings(pool_size=4, queues=QueueFile(queues_from(TWO)))
    core = Core(settings, make_scheduler("fifo"), metrics=Metrics(4, "fifo"))
    doc = argo_diamond()
    core.handle(Join(ARGO, map_workflow(doc), T0, [argo_pod(".a")], queue=1, priority=7), T0)
    first = core.holding(ARGO).job
    skipped = {"etl-c": {"id": "etl-c", "name": "etl.c", "phase": "Skipped"}}
    core.handle(Join(ARGO, map_workflow(doc, nodes=skipped)), T0 + 1)
    job = core.holding(ARGO).job
    assert job is not first and len(job.stages) == 2  # (a new job: c left it)
    assert (job.queue, job.priority) == (1, 7)


def test_a_pools_pods_are_counted_once_against_its_queues_quotas():
    # resources naming pods besides the pool's executors: 40 pods of quota on 30 is too much
    from idlegate.api.queueing import cohort_check
    from idlegate.sim.queues import queues_from
    from idlegate.sim.resources import ResourceVector

    queues = queues_from(
        [{"name": "a", "nominal": {"pods": 20}}, {"name": "b", "nominal": {"pods": 20}}]
    )
    capacity = ResourceVector({"pods": 30_000, "cpu": 60_000})
    with pytest.raises(IdlegateError, match="add up to 40, more than the pool's 30"):
        cohort_check(queues, 30, capacity)
    cohort_check(queues[:1], 30, capacity)
