"""One running Argo workflow in the cluster state machine (idlegate.operator.kinds.external): its
pods, created by Argo and gated, paired with the executors the machine gives its stages,
whichever comes first; restarts, retries, pods released by others, and the job changing
as Argo settles it. Pure: a Cluster and pods, no operator."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from idlegate.api.argo_pods import ArgoPod
from idlegate.api.task_pods import Owner
from idlegate.operator.kinds.external import ExternalJob
from idlegate.operator.kinds.pairing import Release
from idlegate.sim.argo import map_workflow
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Decision

WF = "etl"


def workflow(tasks: list[dict[str, Any]], *, retries: int | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"name": "pod", "container": {"image": "busybox"}}
    if retries is not None:
        pod["retryStrategy"] = {"limit": retries}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": WF},
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "dag": {"tasks": tasks}}, pod],
        },
    }


DIAMOND = workflow(
    [
        {"name": "a", "template": "pod"},
        {"name": "b", "template": "pod", "dependencies": ["a"]},
        {"name": "c", "template": "pod", "dependencies": ["a"]},
        {"name": "d", "template": "pod", "dependencies": ["b", "c"]},
    ]
)


def pod(node: str, phase: str = "Pending", *, gated: bool = True, executor: int | None = None):
    """The pod of node `node` (relative to the workflow, e.g. ``.a``), named after it."""
    name = f"{WF}-{node.strip('.').replace('(', '-').replace(')', '').replace(':', '-')}"
    return ArgoPod("ns", name, WF, WF + node, "", gated, phase, executor)


class Run:
    """An ExternalJob in a cluster, with every release kept."""

    def __init__(self, doc: dict[str, Any], executors: int = 2, pods=(), nodes=None) -> None:
        self.cluster = Cluster(executors)
        self.live = ExternalJob(Owner("ns", WF, "uid"), map_workflow(doc, nodes=nodes))
        self.released: list[Release] = []
        self.now = 0.0
        self.live.admit(self.cluster, 0.0, 0.0, pods)

    def stage(self, name: str):
        return next(s for s in self.live.job.stages if s.name == name)

    def launch(self, name: str, n: int = 1) -> list[Release]:
        stage = self.stage(name)
        launches = self.cluster.apply(Decision(stage, stage.job.held + n), self.now)
        out = self.live.paired(launches)
        self.released += out
        return out

    def see(self, p: ArgoPod) -> list[Release]:
        self.now += 1
        out = self.live.seen(self.cluster, p, self.now)
        self.released += out
        return out

    def finish(self, p: ArgoPod, phase: str = "Succeeded") -> list[Release]:
        released = [r.executor for r in self.released if r.pod == p.name]
        executor = released[-1] if released else p.executor  # (or restored)
        return self.see(ArgoPod(p.namespace, p.name, WF, p.node_name, "", False, phase, executor))

    def twice(self) -> list[str]:
        return [p for p, n in Counter(r.pod for r in self.released).items() if n > 1]


def test_a_stage_runs_once_its_pod_exists_and_a_pod_waits_for_its_launch():
    run = Run(DIAMOND)
    a = pod(".a")
    assert run.live.job.runnable == [] and not run.cluster.can_schedule()  # no pod yet
    assert run.see(a) == []
    assert [s.name for s in run.live.job.runnable] == ["a"]
    (release,) = run.launch("a")
    assert (release.pod, release.stage) == (a.name, "a")
    assert run.see(a) == []  # the same state twice does nothing
    run.finish(a)
    b, c = pod(".b"), pod(".c")
    assert run.see(b) == [] and run.see(c) == []  # gated, waiting for the policy
    assert [r.pod for r in run.launch("b")] == [b.name]
    assert [r.pod for r in run.launch("c")] == [c.name]
    assert run.cluster.free_executors == 0
    run.finish(b)
    run.finish(c)
    d = pod(".d")
    run.see(d)
    run.launch("d")
    run.finish(d)
    assert run.live.job.finish is not None and run.cluster.free_executors == 2
    assert run.twice() == []


def test_an_executor_goes_on_with_its_stages_next_pod():
    loop = workflow([{"name": "x", "template": "pod", "withItems": [1, 2, 3]}])
    run = Run(loop, executors=1)
    pods = [pod(f".x({i}:{i + 1})") for i in range(3)]
    for p in pods:
        run.see(p)
    (first,) = run.launch("x")
    (second,) = run.finish(pods[0])  # task_finished: the same executor, the next pod
    assert second.executor == first.executor and second.pod == pods[1].name
    run.finish(pods[1])
    assert run.finish(pods[2]) == []
    assert run.live.job.finish is not None and run.twice() == []


def test_a_restart_reads_progress_from_the_pods_and_releases_nothing_again():
    pods = [
        pod(".a", "Succeeded", gated=False, executor=0),
        pod(".b", "Running", gated=False, executor=1),
        pod(".c"),
    ]
    run = Run(DIAMOND, pods=pods)
    assert run.released == []
    stages = {s.name: (s.finished, s.launched, s.executors) for s in run.live.job.stages}
    assert stages == {"a": (1, 1, 0), "b": (0, 1, 1), "c": (0, 0, 0), "d": (0, 0, 0)}
    assert [s.name for s in run.live.job.runnable] == ["c"]
    (c,) = run.launch("c")
    assert c.pod == pods[2].name and c.executor == 0  # executor 1 is b's, as recorded
    assert run.live.running[pods[1].name].executor == 1


def test_a_failed_attempt_frees_its_executor_and_its_retry_waits_for_a_launch():
    doc = workflow([{"name": "a", "template": "pod"}], retries=2)
    run = Run(doc, executors=1)
    first = pod(".a(0)")
    run.see(first)
    run.launch("a")
    assert run.finish(first, "Failed") == []
    assert run.cluster.free_executors == 1 and run.live.job.runnable == []  # no retry yet
    retry = pod(".a(1)")
    assert run.see(retry) == []
    (r1,) = run.launch("a")
    assert r1.pod == retry.name
    run.finish(retry)
    assert run.live.job.finish is not None and run.twice() == []
    assert run.stage("a").finished == 1  # a task, not its attempts


def test_a_retry_argo_holds_back_holds_no_executor():
    """Parallelism 2: a's first attempt fails and Argo creates b's second pod before a's
    retry, which it then holds back while b's two gated pods exist."""
    doc = workflow(
        [
            {"name": "a", "template": "pod"},
            {"name": "b", "template": "pod", "withItems": [1, 2]},
        ],
        retries=1,
    )
    run = Run(doc, executors=1)
    a0, b0, b1 = pod(".a(0)"), pod(".b(0:1)"), pod(".b(1:2)")
    run.see(a0)
    run.see(b0)
    run.launch("a")
    run.finish(a0, "Failed")
    run.see(b1)
    (release,) = run.launch("b")  # the executor a's first attempt had
    assert release.pod == b0.name
    (following,) = run.finish(b0)
    assert following.pod == b1.name
    run.finish(b1)
    retry = pod(".a(1)")
    run.see(retry)
    run.launch("a")
    run.finish(retry)
    assert run.live.job.finish is not None and run.twice() == []


def test_a_failure_with_no_retry_left_frees_its_executor():
    doc = workflow([{"name": "a", "template": "pod"}], retries=0)
    run = Run(doc, executors=1)
    a = pod(".a")
    run.see(a)
    run.launch("a")
    run.finish(a, "Failed")
    assert run.cluster.free_executors == 1


def test_a_pod_released_by_someone_else_counts_against_the_pool():
    run = Run(DIAMOND, executors=1)
    a = pod(".a")
    run.see(a)
    run.see(ArgoPod(a.namespace, a.name, WF, a.node_name, "", False, "Running"))
    assert run.cluster.free_executors == 0 and run.live.running[a.name].executor is not None
    assert run.released == []  # nothing for idlegate to release


def test_a_fan_out_known_only_as_it_runs_grows_when_argo_expands_it():
    doc = workflow(
        [
            {"name": "gen", "template": "pod"},
            {
                "name": "x",
                "template": "pod",
                "dependencies": ["gen"],
                "withParam": "{{tasks.gen.outputs.result}}",
            },
        ]
    )
    run = Run(doc, executors=4)
    g = pod(".gen")
    run.see(g)
    run.launch("gen")
    run.finish(g)
    xs = [pod(f".x({i}:{i})") for i in range(3)]
    for p in xs:
        run.see(p)
    assert run.stage("x").tasks == 1  # the manifest does not say how many
    assert len(run.launch("x")) == 1
    nodes = {
        f"{WF}-{i}": {"id": f"{WF}-{i}", "name": f"{WF}.x({i}:{i})", "type": "Pod"}
        for i in range(3)
    }
    run.released += run.live.remapped(run.cluster, map_workflow(doc, nodes=nodes), run.now)
    assert run.stage("x").tasks == 3 and run.stage("x").launched == 1
    assert run.stage("gen").finished == 1
    assert len(run.launch("x", 2)) == 2
    for p in xs:
        run.finish(p)
    assert run.live.job.finish is not None and run.twice() == []
    assert run.cluster.free_executors == 4


def test_a_skipped_stage_holds_no_executor_and_leaves_the_job():
    doc = workflow(
        [
            {"name": "a", "template": "pod"},
            {"name": "b", "template": "pod", "dependencies": ["a"], "when": "{{x}} == 1"},
        ]
    )
    run = Run(doc, executors=1)
    a = pod(".a")
    run.see(a)
    run.launch("a")
    run.finish(a)
    assert run.live.job.runnable == []  # Argo will skip b, so no pod comes
    assert run.cluster.free_executors == 1
    nodes = {f"{WF}-b": {"id": f"{WF}-b", "name": f"{WF}.b", "phase": "Skipped"}}
    run.live.remapped(run.cluster, map_workflow(doc, nodes=nodes), run.now)
    assert run.live.job.finish is not None and run.cluster.free_executors == 1


def test_argos_parallelism_cannot_stall_the_pool():
    """Argo creates no pod while `parallelism` pods exist, gated ones included: a policy
    that prefers the stage without a pod must not hold the only executor for it."""
    doc = workflow(
        [
            {"name": "a", "template": "pod", "withItems": [1, 2]},
            {"name": "b", "template": "pod"},
        ]
    )
    doc["spec"]["parallelism"] = 2
    run = Run(doc, executors=1)
    to_create = [pod(".a(0:1)"), pod(".a(1:2)"), pod(".b")]
    alive: list[ArgoPod] = []
    for _ in range(20):
        while to_create and len(alive) < 2:  # Argo's controller under its parallelism
            alive.append(to_create.pop(0))
            run.see(alive[-1])
        while run.cluster.can_schedule():
            run.launch(run.cluster.runnable_stages()[-1].name)  # the latest stage first
        released = {r.pod for r in run.released}
        running = [p for p in alive if p.name in released]
        if not running:
            break
        run.finish(running[0])
        alive.remove(running[0])
    assert run.live.job.finish is not None, run.live.owed
    assert run.twice() == [] and run.cluster.free_executors == 1


def test_a_pod_of_no_stage_is_handed_back_unplaced():
    run = Run(DIAMOND)
    stray = pod(".hooks.exit")
    assert run.see(stray) == []
    run.live.remapped(run.cluster, run.live.mapped, run.now)
    assert [p.name for p in run.live.take_unplaced()] == [stray.name]
    assert run.see(stray) == []


@pytest.mark.parametrize("seed", range(5))
def test_no_pod_is_released_twice_whatever_the_order(seed):
    import random

    rng = random.Random(seed)
    loop = workflow([{"name": "x", "template": "pod", "withItems": list(range(6))}])
    run = Run(loop, executors=3)
    pods = [pod(f".x({i}:{i})") for i in range(6)]
    pending = list(pods)
    while run.live.job.finish is None:
        choice = rng.random()
        stage = run.stage("x")
        if pending and choice < 0.4:
            run.see(pending.pop(0))
        elif run.cluster.free_executors and stage in run.live.job.runnable and choice < 0.7:
            run.launch("x")
        else:
            running = [p for p in pods if p.name in run.live.running]
            if running:
                run.finish(rng.choice(running))
            elif pending:
                run.see(pending.pop(0))
            elif stage in run.live.job.runnable:
                run.launch("x")
        assert run.cluster.free_executors >= 0
        assert len(run.live.running) <= 3  # the pool bound
    assert run.twice() == [] and len(run.released) == 6


def test_pods_running_beyond_a_full_pool_take_the_next_free_executor():
    loop = workflow([{"name": "x", "template": "pod", "withItems": [1, 2]}])
    running = [pod(f".x({i}:{i + 1})", "Running", gated=False, executor=i) for i in range(2)]
    run = Run(loop, executors=1, pods=running)  # a pool made smaller than what runs in it
    assert run.cluster.free_executors == 0 and len(run.cluster.beyond) == 1
    (beyond,) = [name for name, r in run.live.running.items() if r.executor is None]
    (held,) = [p for p in running if p.name != beyond]
    run.finish(held)
    adopted = run.cluster.adopt_beyond(run.now)
    assert run.live.adopt(run.cluster, adopted, run.now) == []
    assert run.live.running[beyond].executor is not None and run.cluster.beyond == []
    run.finish(next(p for p in running if p.name == beyond))
    assert run.live.job.finish is not None and run.cluster.free_executors == 1
