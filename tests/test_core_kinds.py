"""The core's job kinds (operator/kinds/protocol.py): the core's flow holds no branch on a
kind, and a kind the core has never seen, whose pods another controller creates, plugs
in as one more implementation and is released under the pool's bound."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner
from idlegate.operator.core.core import Core
from idlegate.operator.core.events import Ended, Join, Observed, Schedule
from idlegate.operator.core.intents import PostEvent, RemoveGate
from idlegate.operator.metrics import Metrics
from idlegate.policy import make_scheduler
from idlegate.sim.spec import StageSpec, WorkflowSpec

CORE = Path(__file__).resolve().parents[1] / "src/idlegate/operator/core/core.py"
KIND_CLASSES = {"Workflow", "DagWorkflow", "ExternalJob", "ArgoWorkflow"}
T0 = 1_700_000_000.0


def test_the_cores_flow_holds_no_branch_on_a_kind():
    # every kind-specific step is a method of the kind (kinds.JobKind); an isinstance on a
    # kind's class in the core would be a kind the protocol does not cover
    branches = []
    for node in ast.walk(ast.parse(CORE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if names & KIND_CLASSES:
                branches.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert branches == []


@dataclass(frozen=True)
class ThingPod:
    """A pod of a "Thing" run, as its kind would read it (`ExternalPod`)."""

    name: str
    step: str
    gated: bool = True
    phase: str = "Pending"
    executor: int | None = None
    ran: float | None = None

    @property
    def stage_key(self) -> str:
        return self.step

    @property
    def task_key(self) -> str:
        return self.name

    @property
    def run_key(self) -> str:
        return self.name

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class ThingRun:
    """A "Thing" run mapped (`Mapped`): one step of three pods."""

    @property
    def stage_keys(self) -> dict[str, str]:
        return {"work": "step-work"}

    def spec(self) -> WorkflowSpec:
        stage = StageSpec(name="work", tasks=3, task_duration_seconds=5.0)
        return WorkflowSpec(stages=(stage,))


THING = Owner("default", "run-1", "uid-run-1", kind="Thing", api_version="things.example/v1")


def _said(core: Core, event: object, now: float) -> list[object]:
    return core.handle(event, now)  # type: ignore[arg-type]


def _released(out: list[object]) -> list[tuple[str, int | None]]:
    return [(i.name, i.executor) for i in out if isinstance(i, RemoveGate)]


def test_a_kind_the_core_never_saw_is_released_by_it_under_the_pools_bound():
    core = Core(Settings(pool_size=2), make_scheduler("fifo"), metrics=Metrics(2, "fifo"))
    pods = [ThingPod(f"run-1-{i}", "step-work") for i in range(3)]
    _said(core, Join(THING, ThingRun(), T0, pods), T0)
    run = core.holding(THING)
    out = _said(core, Schedule(), T0)
    assert _released(out) == [("run-1-0", 0), ("run-1-1", 1)]  # two executors: two pods
    assert [(i.owner, i.reason) for i in out if isinstance(i, PostEvent)] == [(THING, "Released")]
    # the first pod ends: its executor goes on with the step's third pod
    done = ThingPod("run-1-0", "step-work", gated=False, phase="Succeeded", executor=0)
    out = _said(core, Observed("Thing", ("default", "run-1"), done), T0 + 5)
    assert _released(out) == [("run-1-2", 0)]
    for i, executor in ((1, 1), (2, 0)):
        ended = ThingPod(f"run-1-{i}", "step-work", False, "Succeeded", executor)
        _said(core, Observed("Thing", ("default", "run-1"), ended), T0 + 10)
    assert run.job.finish is not None and core.cluster.free_executors == 2
    _said(core, Ended(THING), T0 + 11)
    assert core.holding(THING) is None and THING.uid in core.ended
