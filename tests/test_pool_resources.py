"""The operator's resource pools (issue 52, "The API"): an ExecutorPool's `resources` and
the default pool's `--pool-resources`, parsed with Kubernetes' semantics; tasks released
only where their requests fit; status and metrics per resource."""

from __future__ import annotations

import pytest

from idlegate.api.pool_spec import ExecutorPoolSpec, pool_problems, pool_spec_problems
from idlegate.api.settings import Settings
from idlegate.errors import IdlegateError
from idlegate.sim.resources import ResourceVector

pytestmark = pytest.mark.looptime


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"size": 2, "resources": {"cpu": "lots"}}, ("resources", "cpu: 'lots' is not a quantity")),
        ({"size": 2, "resources": {"cpu": "-1"}}, ("resources", "cpu: '-1' is negative")),
        ({"size": 2, "resources": {"cpu": 0}}, ("resources", "cpu: 0 is no capacity")),
        ({"size": 2, "resources": {}}, ("resources", "names no capacity")),
        ({"size": 2, "resources": {"CPU!": 1}}, ("resources", "'CPU!' is not a resource name")),
        ({"resources": {"cpu": 4}}, ("", "give size (the task pods it runs at once; ")),
        # a pool following nodes takes no resources: the hint names the pods its nodes hold
        (
            {"nodeSelector": {"matchLabels": {"pool": "batch"}}},
            ("", "give size (the task pods it runs at once; for a nodeSelector pool, the pods "),
        ),
        ({"size": 2, "resources": {"pods": 3}}, ("", "size is 2 but resources.pods is 3")),
        # the API server refuses a fraction of an extended resource (issue 60, 14)
        (
            {"size": 2, "resources": {"nvidia.com/gpu": "0.5"}},
            ("resources", "nvidia.com/gpu: '0.5' is not a whole number; Kubernetes counts"),
        ),
        # a capacity past 2^63 - 1 would be capped, every request 0 % of it (issue 60, 15)
        (
            {"size": 2, "resources": {"cpu": "1e400"}},
            ("resources", "cpu=1e400 is beyond the largest quantity Kubernetes holds"),
        ),
        # label keys and values as the API server checks them (issue 60, 17)
        (
            {"nodeSelector": {"matchLabels": {"bad key!": "x"}}, "size": 2},
            ("nodeSelector.matchLabels", "'bad key!' is not a label key; write a name"),
        ),
        (
            {"nodeSelector": {"matchLabels": {"pool": "a b"}}, "size": 2},
            ("nodeSelector.matchLabels", "'a b' (of label 'pool') is not a label value"),
        ),
        (
            {
                "nodeSelector": {"matchExpressions": [{"key": "x/y/z", "operator": "Exists"}]},
                "size": 2,
            },
            ("nodeSelector.matchExpressions[0]", "'x/y/z' is not a label key"),
        ),
        (
            {"size": 2, "resources": {"cpu": 4}, "nodeSelector": {}},
            ("", "give resources (a fixed capacity) or nodeSelector"),
        ),
    ],
)
def test_a_bad_capacity_is_one_problem_with_its_path(spec, problem):
    ((path, text),) = pool_spec_problems(spec)
    assert path == problem[0] and text.startswith(problem[1]), (path, text)


def test_a_pool_of_resources_takes_its_size_from_its_pods():
    spec = ExecutorPoolSpec.model_validate(
        {"resources": {"cpu": "24", "memory": "96Gi", "nvidia.com/gpu": 2, "pods": 60}}
    )
    assert spec.executors == 60
    assert spec.capacity == ResourceVector.parse("cpu=24,memory=96Gi,nvidia.com/gpu=2,pods=60")
    assert ExecutorPoolSpec.model_validate({"size": 3}).capacity is None


def test_lint_says_which_field_of_a_pool_is_wrong():
    pool = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "batch"},
        "spec": {"size": 4, "resources": {"memory": "4GB"}},
    }
    ((path, text),) = pool_problems(pool)
    assert path == "spec.resources" and text.startswith("memory: '4GB' is not a quantity")


def test_pool_resources_flag_is_parsed_and_its_pods_are_the_pool_size():
    settings = Settings(pool_size=8, pool_resources="cpu=24,memory=96Gi")
    assert settings.pool_resources == ResourceVector.parse("cpu=24,memory=96Gi")
    assert Settings(pool_size=8, pool_resources="cpu=2,pods=8").pool_resources is not None
    with pytest.raises(IdlegateError, match="says pods=9 but --pool-size is 8"):
        Settings(pool_size=8, pool_resources="cpu=2,pods=9")
    with pytest.raises(IdlegateError, match="cpu=0 is no capacity"):
        Settings(pool_size=8, pool_resources="cpu=0")


@pytest.mark.asyncio
async def test_the_default_pool_releases_only_what_fits_its_resources():
    from tests.operator_fakes import harness, stage

    h = harness(pool=8, pool_resources="cpu=4,memory=8Gi")
    big = stage("a", tasks=3, duration=10.0, resources={"cpu": "2", "memory": "1Gi"})
    await h.submit("w", {"stages": [big]})
    assert h.released() == ["w-a-0", "w-a-1"]  # 8 executors, but 4 CPUs: two tasks of 2
    status = h.bridge.status()
    assert status["usage"] == {"cpu": "4/4", "memory": "2Gi/8Gi"}
    metrics = h.bridge.metrics
    sample = metrics.registry.get_sample_value
    labels = {"pool": "default", "resource": "cpu"}
    assert sample("idlegate_pool_resource_capacity", labels) == 4.0
    assert sample("idlegate_pool_resource_used", labels) == 4.0
    assert sample("idlegate_pool_resource_used", {**labels, "resource": "memory"}) == 2 * 2**30
    await h.run_to_completion()
    assert h.kube.status("w")["phase"] == "Succeeded"
    assert h.bridge.status()["usage"] == {"cpu": "0/4", "memory": "0/8Gi"}


@pytest.mark.asyncio
async def test_a_stage_larger_than_a_named_pool_waits_for_it_to_grow():
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    small = ExecutorPoolSpec.model_validate({"size": 4, "resources": {"cpu": 2}})
    h.pools.apply("batch", small)
    body = h.kube.add_workflow(
        "w", {"stages": [stage("a", resources={"cpu": "3"})], "pool": "batch"}
    )
    h.admit(body)
    await h.settle()
    (cond,) = [c for c in h.kube.status("w")["conditions"] if c["type"] == "PoolReady"]
    assert (cond["status"], cond["reason"]) == ("False", "PoolTooSmall")
    assert "needs cpu=3" in cond["message"] and "ExecutorPool 'batch'" in cond["message"]
    grown = small.model_copy(update={"resources": {"cpu": 4}})
    await intake.readmit(h.pools, h.pools.apply("batch", grown))
    await h.settle()
    assert h.released() == ["w-a-0"]


def test_the_pools_condition_says_which_quantity_is_wrong_and_where():
    from idlegate.api.pool_spec import parse_pool_spec
    from idlegate.errors import SpecError

    # what pool_sync writes into the ExecutorPool's Ready=False condition (reason Invalid)
    with pytest.raises(SpecError) as caught:
        parse_pool_spec({"size": 2, "resources": {"memory": "lots"}}, "batch")
    said = str(caught.value)
    assert said.startswith("ExecutorPool 'batch': resources: memory: 'lots' is not a quantity")
    assert said.endswith("fix its spec (kubectl edit executorpool batch)")


USAGE = [  # (used, capacity, the printer column's used/capacity: one unit for both)
    ("cpu=18", "cpu=21250m", "18000m/21250m"),  # (not 18/21250m: pods over milli-CPU)
    ("", "cpu=21250m", "0/21250m"),
    ("cpu=4", "cpu=24", "4/24"),
    ("memory=12Gi", "memory=32256Mi", "12288Mi/32256Mi"),
    ("memory=2Gi", "memory=8Gi", "2Gi/8Gi"),
    ("nvidia.com/gpu=1", "nvidia.com/gpu=2", "1/2"),
]


@pytest.mark.parametrize(("used", "capacity", "usage"), USAGE)
def test_a_pools_usage_writes_used_and_capacity_in_one_unit(used, capacity, usage):
    """Issue 60, item 6: `kubectl get executorpool` printed 18/21250m."""
    from idlegate.api.pool_spec import resource_status

    asked = ResourceVector.parse(used) if used else ResourceVector()
    status = resource_status(ResourceVector.parse(capacity), asked)
    ((name, text),) = status["usage"].items()
    assert text == usage and name == capacity.split("=")[0]
