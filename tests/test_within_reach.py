"""Issue 79, items 1 and 2: a flood costs writes in proportion to what can run.

A workflow's gated pods are created ahead only once it is within reach (it started, or
the admission numbers it among the next `gated_workflows_ahead` of its queue); a task
released before its pod was made has it created released, and a restart creates nothing
twice. A workflow admitted into a full pool gets one Event (Accepted, saying why it
waits), not Accepted then Waiting. Over the operator's pure core, in its own time.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner, task_pod
from idlegate.operator.core.core import Core
from idlegate.operator.core.events import Admit, PodSeen
from idlegate.operator.core.intents import CreatePod, PostEvent, RemoveGate
from idlegate.operator.lag.pacing import ARRIVALS_ROUND
from idlegate.operator.metrics import Metrics
from idlegate.policy import make_scheduler
from idlegate.sim.spec import StageSpec
from tests.operator_fakes import harness, stage

T0 = 1_700_000_000.0
SPEC = {"name": "a", "tasks": 1, "taskDurationSeconds": 10.0}


def core_of(ahead: int) -> Core:
    """A pool of one executor under fifo, creating pods ahead for `ahead` waiting workflows."""
    scheduler = make_scheduler("fifo")
    settings = Settings(pool_size=1, gated_workflows_ahead=ahead)
    return Core(settings, scheduler, metrics=Metrics(1, scheduler.name))


def workflow(name: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "generation": 1}
    return {"metadata": meta, "spec": {"stages": [SPEC]}}


def pod(name: str, phase: str, *, gated: bool, executor: int | None = None) -> dict[str, Any]:
    """The pod of workflow `name`'s one task, as the API reports it."""
    owner = Owner("default", name, f"uid-{name}")
    body = task_pod(owner, StageSpec.model_validate(SPEC), 0, gated=gated, executor=executor)
    body["status"] = {"phase": phase}
    return body


def admit(core: Core, name: str, at: float, pods: list[dict[str, Any]] | None = None) -> list[Any]:
    return core.handle(Admit(workflow(name), pods or [], NamespacePolicy()), at)


def created(intents: list[Any]) -> list[tuple[str, bool]]:
    return [(i.name, i.gated) for i in intents if isinstance(i, CreatePod)]


def test_only_the_next_workflows_of_a_flood_get_their_gated_pods_ahead() -> None:
    core = core_of(ahead=2)
    first = admit(core, "w0", T0)  # (it starts: its pod is made and released)
    assert created(first) == [("w0-a-0", True)]
    flood = [admit(core, f"w{i}", T0 + i) for i in range(1, 6)]
    # positions 1 and 2 get their pod ahead; 3 to 5 none yet
    assert [created(f) for f in flood] == [[("w1-a-0", True)], [("w2-a-0", True)], [], [], []]
    # what the admission numbers is what is within reach: its own positions
    result = core.cluster.admission_result()
    near = [e.job for q in result.queues for e in q.waiting if e.position and e.position <= 2]
    assert core.cluster.ahead(2) == near and [j.name for j in near] == ["default/w1", "default/w2"]
    # w0 ends: w1 starts on its gated pod, and w3 comes within reach
    ended = core.handle(PodSeen(pod("w0", "Succeeded", gated=False, executor=0)), T0 + 10)
    assert [(i.name, i.executor) for i in ended if isinstance(i, RemoveGate)] == [("w1-a-0", 0)]
    assert created(ended) == [("w3-a-0", True)]


def test_a_workflow_released_before_its_pod_was_made_gets_it_created_released() -> None:
    core = core_of(ahead=0)  # (none ahead: only what starts is written)
    admit(core, "w0", T0)
    assert created(admit(core, "w1", T0 + 1)) == []
    ended = core.handle(PodSeen(pod("w0", "Succeeded", gated=False, executor=0)), T0 + 10)
    (made,) = [i for i in ended if isinstance(i, CreatePod)]
    assert (made.name, made.gated, made.executor) == ("w1-a-0", False, 0)
    assert not [i for i in ended if isinstance(i, RemoveGate)]


def test_a_restart_creates_no_pod_twice_and_none_beyond_reach() -> None:
    core = core_of(ahead=1)
    admit(core, "w0", T0, [pod("w0", "Running", gated=False, executor=0)])
    # w1 had its pod made ahead before the restart; w2 was beyond reach, and still is
    assert created(admit(core, "w1", T0 + 1, [pod("w1", "Pending", gated=True)])) == []
    assert created(admit(core, "w2", T0 + 2)) == []
    ended = core.handle(PodSeen(pod("w0", "Succeeded", gated=False, executor=0)), T0 + 10)
    assert [i.name for i in ended if isinstance(i, RemoveGate)] == ["w1-a-0"]
    assert created(ended) == [("w2-a-0", True)]  # (now next: within reach)


def test_a_workflow_that_must_wait_gets_one_event_at_its_admission() -> None:
    core = core_of(ahead=2)
    started = [(i.reason, i.message) for i in admit(core, "w0", T0) if isinstance(i, PostEvent)]
    assert [r for r, _ in started] == ["Accepted", "Released"]
    assert "waits" not in started[0][1]
    (said,) = [i for i in admit(core, "w1", T0 + 1) if isinstance(i, PostEvent)]
    assert said.reason == "Accepted" and said.message.startswith("Accepted: 1 stages, 1 tasks")
    assert said.message.endswith(
        "pool of 1 executors. Stage 'a' is runnable and waits for an executor: all 1 "
        "executors of the pool are busy."
    )


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_a_burst_of_arrivals_is_one_round_and_an_accepted_event_each():
    """Three workflows admitted in one turn of the loop (kopf's create handler: `soon`) are
    decided by one round at its end, as the simulator's arrivals at one time are: the first
    starts, and each gets its Accepted Event, the two that wait with why (no Waiting). Two
    more right after are decided by one round `ARRIVALS_ROUND` after that one."""
    h = harness(pool=1, round_window=ARRIVALS_ROUND)
    rounds = []
    decide = h.core.decider.decide
    h.core.decider.decide = lambda *a: rounds.append(a) or decide(*a)  # type: ignore[method-assign]

    def submit(name: str) -> None:
        body = h.kube.add_workflow(name, {"stages": [stage("a")]})
        h.pools.admit(copy.deepcopy(body), *h.indexed(body), soon=True)

    for name in ("w0", "w1", "w2"):
        submit(name)
    assert rounds == [] and h.kube.events == []  # (the round comes at the turn's end)
    await asyncio.sleep(0)
    await h.settle()
    assert len(rounds) == 1
    assert h.kube.reasons("w0") == ["Accepted", "Released"]
    assert h.kube.reasons("w1") == h.kube.reasons("w2") == ["Accepted"]
    (said,) = [e["message"] for e in h.kube.events if e["involvedObject"]["name"] == "w2"]
    assert "Stage 'a' is runnable and waits for an executor" in said
    assert [h.kube.status(n).get("phase") for n in ("w0", "w1", "w2")] == [
        "Running",
        "Pending",
        "Pending",
    ]
    submit("w3")
    submit("w4")
    await asyncio.sleep(ARRIVALS_ROUND / 2)
    assert len(rounds) == 1  # (not before 0.2 s after the last)
    await asyncio.sleep(ARRIVALS_ROUND / 2)
    await h.settle()
    assert len(rounds) == 2 and h.kube.reasons("w3") == h.kube.reasons("w4") == ["Accepted"]
