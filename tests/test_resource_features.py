"""The learned policy's resource columns (`policy.resource_features`): known answers on
hand-built 3-4 stage workflows on a pool of CPUs, and exactly 0 on a pods-only pool."""

from __future__ import annotations

from dataclasses import replace
from math import log

import numpy as np
import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.columns import (
    NUM_GLOBAL_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    RESOURCE_GLOBAL_FEATURES,
    FeatureConfig,
    num_global_features,
)
from idlegate.policy.features import Featurizer, compute_features
from idlegate.policy.heuristics import FairScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import Decision
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import build_workload
from tests.helpers import cpu_diamond as diamond
from tests.helpers import cpu_stage as stage
from tests.helpers import spec_dag as dag

R = ResourceVector.parse
ON = FeatureConfig(resource_features=True)


# the diamond (tests.helpers.cpu_diamond): on 10 executors and 8 CPUs, pod units 5, 1.25, 1 and 10


def columns(obs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stage, job, global) resource columns of `obs`."""
    return (
        obs.stage_x[:, NUM_STAGE_FEATURES:],
        obs.job_x[:, NUM_JOB_FEATURES:],
        obs.global_x[:, num_global_features(ON, resources=False) :],
    )


def test_widths_and_the_base_columns_unchanged() -> None:
    c = Cluster(10, resources=R("cpu=8"))
    c.add_job(diamond(), 0.0)
    plain, wide = compute_features(c), compute_features(c, ON)
    assert wide.stage_x.shape == (4, NUM_STAGE_FEATURES + 2)
    assert wide.job_x.shape == (1, NUM_JOB_FEATURES + 2)
    assert wide.global_x.shape == (1, NUM_GLOBAL_FEATURES + len(RESOURCE_GLOBAL_FEATURES))
    np.testing.assert_array_equal(wide.stage_x[:, :NUM_STAGE_FEATURES], plain.stage_x)
    np.testing.assert_array_equal(wide.job_x[:, :NUM_JOB_FEATURES], plain.job_x)
    np.testing.assert_array_equal(wide.global_x[:, :NUM_GLOBAL_FEATURES], plain.global_x)


def test_a_fresh_diamond_on_eight_cpus() -> None:
    c = Cluster(10, resources=R("cpu=8"))
    c.add_job(diamond(), 0.0)
    stage_r, job_r, global_r = columns(compute_features(c, ON))
    # log u: a 4 of 8 CPUs (u = 5), b 1 of 8 (1.25), c only a pod (1), d all 8 (10);
    # every stage's tasks fit the 8 free CPUs
    np.testing.assert_allclose(stage_r, [[log(5), 0], [log(1.25), 0], [0, 0], [log(10), 0]])
    # nothing held; work 2·10 + 20 + 3·5 + 4 = 59, in pod units 100 + 25 + 15 + 40 = 180
    np.testing.assert_allclose(job_r, [[0, log(180 / 59)]], rtol=1e-6)
    np.testing.assert_array_equal(global_r, [[0, 0, 0]])  # 8/8 CPUs and 10/10 pods free


def test_what_is_held_and_what_no_longer_fits() -> None:
    c = Cluster(10, resources=R("cpu=8,memory=16Gi"))
    a = c.add_job(diamond(), 0.0)
    c.apply(Decision(a.stages[0], 1), 0.0)  # one task of a: 4 CPUs, 1 pod
    b = c.add_job(dag(stage("m", 2, 3, resources={"cpu": "3", "memory": "8Gi"})), 1.0)
    assert b.stages[0].need is not None
    stage_r, job_r, global_r = columns(compute_features(c, ON))
    # a: 1 task left, room for 1 (4 of 4 CPUs free); b, c, d are not runnable; b's m:
    # 2 tasks of 3 CPUs and 8 GiB, room for 1 (4 CPUs, 16 GiB free): half short
    assert stage_r[:, 1].tolist() == [0, 0, 0, 0, 0.5]
    c.add_job(dag(stage("big", 1, 10, "8")), 1.0)  # 8 CPUs: none fit
    assert columns(compute_features(c, ON))[0][5, 1] == 1.0
    # m's pod units: 8 GiB of 16 is half the pool, 3 of 8 CPUs less: 10 x 1/2
    assert stage_r[4, 0] == pytest.approx(log(5))
    # A holds 4 of 8 CPUs (1/2) and 1 of 10 pods: 0.4 beyond its pods' share
    assert job_r[:, 0].tolist() == pytest.approx([0.4, 0.0])
    # m: 2 tasks of 3 s at u = 5 over 6 s of work
    assert job_r[1, 1] == pytest.approx(log(5))
    # free: CPU 4/8, memory 16/16, pods 9/10; no other resource
    assert global_r[0].tolist() == pytest.approx([0.5 - 0.9, 1.0 - 0.9, 0.0])


def test_small_requests_and_pods_only_pools_give_zeros() -> None:
    # 0.1 and 0.2 CPU of 8 are below one pod's share of 10 executors: u = 1
    tiny = dag(stage("x", 3, 2, "100m"), stage("y", 1, 5, "200m", dependsOn=["x"]))
    c = Cluster(10, resources=R("cpu=8"))
    c.add_job(tiny, 0.0)
    c.add_job(diamond(), 0.0)
    stage_r, job_r, _ = columns(compute_features(c, ON))
    assert not stage_r[:2].any() and not job_r[0].any()  # the tiny job's rows
    assert stage_r[2:].any()  # the diamond's are not
    # 49 executors: a pod's share 1/49, and (1/49)·49 is 0.9999999999999999 in floats
    odd = Cluster(49, resources=R("cpu=16"))
    odd.add_job(tiny, 0.0)
    stage_r, job_r, _ = columns(compute_features(odd, ON))
    assert not stage_r.any() and not job_r.any()
    # the same jobs on a pods-only pool: nothing is measured
    pods = Cluster(10)
    pods.add_job(tiny, 0.0)
    pods.add_job(diamond(), 0.0)
    for r in columns(compute_features(pods, ON)):
        assert r.shape[0] >= 1 and not r.any()


def test_every_column_is_zero_along_a_pods_only_run() -> None:
    """On a pods-only pool the resource columns are 0 at every decision (the adapter's
    exactness rests on it), and the other columns are those of the model without them."""

    class Check:
        name = "check"

        def __init__(self) -> None:
            self.fair, self.on, self.off, self.calls = (
                FairScheduler(),
                Featurizer(ON),
                Featurizer(),
                0,
            )

        def reset(self, rng) -> None:
            self.fair.reset(rng)
            self.on.reset()
            self.off.reset()

        def decide(self, view):
            wide, plain = self.on(view), self.off(view)
            for r in columns(wide):
                assert not r.any()
            np.testing.assert_array_equal(wide.stage_x[:, :NUM_STAGE_FEATURES], plain.stage_x)
            self.calls += 1
            return self.fair.decide(view)

    check = Check()
    simulate(build_workload("k8s-batch", 3, num_jobs=30, requests=True), check, seed=3)
    assert check.calls > 50


def test_wait_is_allowed_while_a_stage_is_held_back_by_the_pools_resources() -> None:
    """WAIT is a reservation for a stage the free CPUs cannot hold (as EASY's head gets),
    with the resource columns only, and never on a pods-only pool."""
    long = dag(stage("x", 1, 100, "4"))
    big = dag(stage("big", 1, 10, "8"))
    small = dag(stage("small", 1, 10, "1"))
    for resources in (R("cpu=8"), None):
        c = Cluster(10, resources=resources)
        x = c.add_job(long, 0.0)
        c.apply(Decision(x.stages[0], 1), 0.0)  # 4 of 8 CPUs busy: big no longer fits
        c.add_job(big, 1.0)
        c.add_job(small, 1.0)
        plain, wide = compute_features(c), compute_features(c, ON)
        # without the columns: small's job holds nothing, below fair's share: no WAIT
        assert not plain.wait_mask[0]
        assert wide.wait_mask[0] == (resources is not None)
        np.testing.assert_array_equal(wide.stage_mask, plain.stage_mask)
    idle = Cluster(10, resources=R("cpu=8"))  # nothing runs: everything fits, no WAIT
    idle.add_job(big, 0.0)
    idle.add_job(small, 0.0)
    assert not compute_features(idle, ON).wait_mask[0]


def test_the_cache_never_changes_the_resource_columns() -> None:
    """At every decision of a run on a resource pool the cached featurizer's columns and
    masks are those computed afresh."""

    class Check:
        name = "check"

        def __init__(self) -> None:
            self.srpt, self.cached, self.calls = make_scheduler("srpt"), Featurizer(ON), 0

        def reset(self, rng) -> None:
            self.srpt.reset(rng)
            self.cached.reset()

        def decide(self, view):
            got, want = self.cached(view), compute_features(view, ON)
            for name in ("stage_x", "job_x", "global_x", "stage_mask", "wait_mask"):
                np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)
            self.calls += 1
            return self.srpt.decide(view)

    check = Check()
    workload = build_workload("k8s-batch", 4, num_jobs=30, requests=True)
    pool = replace(workload, resources=R("cpu=12,memory=48Gi,nvidia.com/gpu=1"))
    simulate(pool, check, seed=4)
    assert check.calls > 50
