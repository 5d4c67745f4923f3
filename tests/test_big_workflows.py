"""Workflows of thousands of stages (issue 61): a DagWorkflow bound by its object's size, the
policy's rows and model on a graph of 5,000 stages, the same features as before."""

from __future__ import annotations

from math import log1p
from typing import Any

import numpy as np
import pytest

from idlegate.api.lint import admission_errors
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.settings import Settings
from idlegate.api.status import (
    HISTORY_SAMPLES,
    MAX_CR_STAGES,
    MAX_MEASURED,
    MAX_OBJECT_BYTES,
    object_bytes,
)
from idlegate.errors import SpecError
from idlegate.operator.kinds.workflow import new_workflow
from idlegate.policy import make_scheduler
from idlegate.policy.columns import FeatureConfig
from idlegate.policy.feature_rows import DYNAMIC_COLUMNS
from idlegate.policy.features import Featurizer
from idlegate.policy.heuristics import FairScheduler
from idlegate.policy.portfolio.replay import REPLAY_STAGES, replay_portfolio
from idlegate.sim.dag import Dag, summarised
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import Action, ClusterView
from idlegate.sim.spec import parse_workflow
from tests.helpers import load_benchmark, wide_workflow
from tests.operator_fakes import harness

big = load_benchmark("big_workflows")


def test_a_dagworkflow_of_2000_stages_fits_its_object_and_is_accepted() -> None:
    manifest = big.layered(2000)
    assert object_bytes(manifest, parse_workflow(manifest["spec"])) <= MAX_OBJECT_BYTES
    assert admission_errors(manifest) == []


def test_a_dagworkflow_too_large_for_its_object_is_refused_in_one_sentence() -> None:
    manifest = big.layered(4000)
    [error] = admission_errors(manifest)
    assert error.startswith("the workflow's 4,000 stages make an object of about ")
    assert "more than the 1,572,864 bytes (1.5 MiB) Kubernetes stores per object" in error
    assert error.count(". ") == 0 and "\n" not in error
    with pytest.raises(SpecError, match="split it into smaller workflows"):
        new_workflow(manifest, 0.0, Settings(pool_size=4), NamespacePolicy())


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_the_operator_sizes_a_workflow_with_its_own_history_samples() -> None:
    manifest = wide_workflow()
    spec = parse_workflow(manifest["spec"])
    assert object_bytes(manifest, spec, HISTORY_SAMPLES) <= MAX_OBJECT_BYTES
    assert object_bytes(manifest, spec, MAX_MEASURED) > MAX_OBJECT_BYTES
    new_workflow(manifest, 0.0, Settings(pool_size=4), NamespacePolicy())  # fits at 20
    h = harness(pool=4, history_samples=MAX_MEASURED)
    await h.submit("wide", manifest["spec"])
    status = h.kube.status("wide")
    assert status["phase"] == "Invalid" and not h.kube.pods
    message = status["conditions"][0]["message"]
    assert message.startswith("the workflow's 2,200 stages make an object of about ")


class _Checker:
    """Fair decides; at every decision the featurizer's state columns must be the per-stage
    formula of every incomplete stage, as before the rows were kept by frontier."""

    name = "checker"

    def __init__(self) -> None:
        self.featurizer = Featurizer(FeatureConfig())
        self.fair = FairScheduler()
        self.calls = 0

    def reset(self, rng: Any) -> None:
        self.featurizer.reset()

    def decide(self, view: ClusterView) -> Action:
        obs = self.featurizer(view)
        unit, k = self.featurizer.config.time_unit, view.num_executors
        want = []
        for job in view.jobs:
            for s in job.stages:
                if s.finished < s.tasks:
                    want.append(
                        (
                            log1p(s.tasks - s.launched),
                            s.executors / k,
                            log1p((s.tasks - s.finished) * s.duration / unit),
                            s.delayed,
                            s.idle_until is not None,
                            s.finished / s.tasks,
                        )
                    )
        got = obs.stage_x[:, DYNAMIC_COLUMNS]
        np.testing.assert_allclose(got, np.asarray(want, dtype=np.float32), rtol=1e-6)
        self.calls += 1
        return self.fair.decide(view)


def test_the_rows_of_a_big_workflow_are_the_per_stage_formula_at_every_decision() -> None:
    checker = _Checker()
    simulate(big.workload(300), checker, seed=1)
    assert checker.calls > 300


def test_a_refresh_visits_the_frontier_not_the_whole_dag() -> None:
    chain = {
        "stages": [
            {"name": f"s{i}", "tasks": 2, "taskDurationSeconds": 5.0}
            | ({"dependsOn": [f"s{i - 1}"]} if i else {})
            for i in range(5000)
        ]
    }
    work = big.Workload(
        "chain", (big.JobArrival(0.0, "chain", Dag.from_spec(parse_workflow(chain))),), 4
    )
    featurizer = Featurizer(FeatureConfig())
    seen = []

    class Probe:
        name = "probe"

        def reset(self, rng: Any) -> None:
            featurizer.reset()

        def decide(self, view: ClusterView) -> Action:
            featurizer(view)
            seen.append(len(featurizer._entries[view.jobs[0].id].frontier))
            return FairScheduler().decide(view)

    simulate(work, Probe(), seed=0, max_time=50.0)
    assert seen and set(seen) == {1}


def test_the_graph_network_and_its_onnx_export_run_on_a_graph_of_5000_stages() -> None:
    torch = pytest.importorskip("torch")
    from idlegate.policy.model import PolicyNet, observation_tensors

    policy = make_scheduler("learned:default").inner  # (the starvation guard's)
    net = PolicyNet()
    shapes = []

    class Probe:
        name = "probe"

        def reset(self, rng: Any) -> None:
            policy.reset(rng)

        def decide(self, view: ClusterView) -> Action:
            obs = policy.observe(view)
            stage_logp = policy.evaluate(obs)[0]
            with torch.inference_mode():
                torch_logp = net(*observation_tensors(obs))[0]
            shapes.append((obs.stage_x.shape[0], stage_logp.shape[0], torch_logp.shape[0]))
            return policy.decide(view)

    simulate(big.workload(5000), Probe(), seed=0, max_time=5.0)
    rows, onnx_rows, torch_rows = shapes[0]
    assert rows > 5000 and onnx_rows == torch_rows == rows


def test_a_big_workflow_is_replayed_as_its_summary_and_a_small_one_as_it_is() -> None:
    dag = Dag.from_spec(parse_workflow(big.layered(2000)["spec"]))
    small = Dag.from_spec(parse_workflow(big.layered(REPLAY_STAGES)["spec"]))
    assert summarised(small, REPLAY_STAGES) is small
    chain = summarised(dag, REPLAY_STAGES)
    assert chain.num_stages <= REPLAY_STAGES and chain.depth == chain.num_stages
    assert chain.critical_path == pytest.approx(dag.critical_path, rel=0.05)
    assert chain.total_work == pytest.approx(dag.total_work, rel=0.01)
    fifo = {"fifo": make_scheduler("fifo")}
    replayed = replay_portfolio([big.JobArrival(0.0, "big", dag)], fifo, 50, seed=0)
    summary = replay_portfolio([big.JobArrival(0.0, "big", chain)], fifo, 50, seed=0)
    assert (replayed.means, replayed.events) == (summary.means, summary.events)


def test_the_remaining_critical_path_is_the_longest_bottom_level_left_at_every_event() -> None:
    seen = []

    class Probe:
        name = "probe"

        def reset(self, rng: Any) -> None:
            pass

        def decide(self, view: ClusterView) -> Action:
            for job in view.jobs:
                left = [s.bottom_level for s in job.stages if s.finished < s.tasks]
                seen.append(job.remaining_cp == max(left, default=0.0))
            return FairScheduler().decide(view)

    simulate(big.workload(300), Probe(), seed=2)
    assert len(seen) > 1000 and all(seen)


def test_the_crds_stage_bound_is_past_what_fits_the_object_so_the_size_binds_first() -> None:
    manifest = big.smallest(MAX_CR_STAGES)
    assert object_bytes(manifest, parse_workflow(manifest["spec"])) > MAX_OBJECT_BYTES
