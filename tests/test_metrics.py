"""Known answers for the run metrics and the paired statistics over seeds."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.metrics import (
    Estimate,
    job_metrics,
    mean_ci,
    paired_relative_change,
    percentile,
    run_metrics,
    t_cdf,
    t_quantile,
)
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision
from idlegate.sim.spec import parse_workflow


def one_stage(duration: float, tasks: int = 1) -> Dag:
    return Dag.from_spec(
        parse_workflow({"stages": [{"name": "s", "tasks": tasks, "taskDurationSeconds": duration}]})
    )


class Fifo:
    name = "fifo-test"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        stages = view.runnable_stages()
        return Decision(stages[0], view.num_executors) if stages else WAIT


# -- Student t ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062047),
        (0.975, 2, 4.3026527),
        (0.975, 4, 2.7764451),
        (0.975, 9, 2.2621572),
        (0.975, 29, 2.0452296),
        (0.975, 1e7, 1.9599640),
        (0.995, 5, 4.0321430),
        (0.9, 10, 1.3721836),
        (0.025, 4, -2.7764451),
    ],
)
def test_t_quantile_matches_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-6)


def test_t_cdf_symmetry_and_known_value():
    assert t_cdf(0.0, 3) == 0.5
    assert t_cdf(-2.0, 3) == pytest.approx(0.0696630, abs=1e-6)
    assert t_cdf(2.0, 3) + t_cdf(-2.0, 3) == pytest.approx(1.0)


# -- percentiles and intervals ---------------------------------------------------------


def test_percentile_linear_interpolation():
    values = list(range(1, 11))
    assert percentile(values, 50) == 5.5
    assert percentile(values, 95) == pytest.approx(9.55)
    assert percentile(values, 99) == pytest.approx(9.91)
    assert math.isnan(percentile([], 50))


def test_mean_ci_known_answer():
    est = mean_ci([1, 2, 3, 4, 5])
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)
    assert est.mean == 3
    assert est.half_width == pytest.approx(half, abs=1e-6)
    assert (est.low, est.high) == pytest.approx((3 - half, 3 + half), abs=1e-6)
    assert est.n == 5


def test_mean_ci_single_sample_has_no_interval():
    est = mean_ci([7.0])
    assert est.mean == 7 and math.isnan(est.low) and math.isnan(est.half_width)
    assert est.to_dict()["low"] is None


def test_mean_ci_rejects_no_samples_and_bad_confidence():
    with pytest.raises(IdlegateError):
        mean_ci([])
    with pytest.raises(IdlegateError):
        mean_ci([1, 2], confidence=1.5)


def test_paired_relative_change_constant_ratio_has_zero_width():
    est = paired_relative_change([90, 180, 45], [100, 200, 50])
    assert est.mean == pytest.approx(-0.1)
    assert est.half_width == pytest.approx(0.0, abs=1e-12)


def test_paired_relative_change_is_mean_of_per_seed_ratios():
    # ratios 0.8 and 1.0: mean 0.9 → −10 %; the pooled ratio 180/200 would say the same
    # here, but per-seed pairing is what sets the interval: t(0.975, 1) · sd / √2.
    est = paired_relative_change([80, 100], [100, 100])
    assert est.mean == pytest.approx(-0.1)
    assert est.half_width == pytest.approx(12.7062047 * 0.1414214 / math.sqrt(2), rel=1e-6)
    # a ratio of means would differ from the mean of ratios when seeds differ in scale
    est2 = paired_relative_change([50, 1200], [100, 1000])
    assert est2.mean == pytest.approx((0.5 + 1.2) / 2 - 1)


def test_paired_relative_change_needs_matching_seeds():
    with pytest.raises(IdlegateError):
        paired_relative_change([1, 2], [1, 2, 3])
    with pytest.raises(IdlegateError):
        paired_relative_change([1], [0])


# -- per run ---------------------------------------------------------------------------


def test_motivating_example_metrics_and_littles_law():
    # job A (20 s) at t=0, job B (4 s) at t=2, one executor, FIFO: JCTs 20 and 22.
    w = Workload(
        "tiny", (JobArrival(0.0, "A", one_stage(20)), JobArrival(2.0, "B", one_stage(4))), 1
    )
    res = simulate(w, Fifo(), seed=0)
    jm = job_metrics(res)
    assert jm.jct.tolist() == [20, 22]
    assert jm.wait.tolist() == [0, 18]
    assert jm.lower_bound.tolist() == [20, 4]
    m = run_metrics(res, jm)
    assert m.jobs == 2 and m.unfinished == 0
    assert m.avg_jct == 21 and m.median_jct == 21
    assert m.p95_jct == pytest.approx(21.9)
    assert m.makespan == 24
    assert m.utilisation == 1.0
    # Little's law: ∫ jobs-in-system dt = Σ JCT when every job finishes
    assert res.jobs_time_integral == pytest.approx(jm.jct.sum())
    assert m.mean_jobs_in_system == pytest.approx(42 / 24)
    assert m.lb_avg_jct == 12 and m.lb_ratio == pytest.approx(21 / 12)
    assert m.idle_inserted == 0


def test_lower_bound_uses_work_over_executors():
    # 4 tasks of 10 s on 2 executors: critical path 10, work/K = 20 → bound 20 (tight here)
    w = Workload("wide", (JobArrival(0.0, "W", one_stage(10, tasks=4)),), 2)
    res = simulate(w, Fifo(), seed=0)
    m = run_metrics(res)
    assert m.lb_avg_jct == 20 and m.avg_jct == 20 and m.lb_ratio == 1.0
    assert m.utilisation == 1.0


def test_run_metrics_to_dict_is_json_ready():
    w = Workload("one", (JobArrival(0.0, "A", one_stage(3)),), 1)
    d = run_metrics(simulate(w, Fifo(), seed=3)).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["seed"] == 3 and d["scheduler"] == "fifo-test" and d["avg_jct"] == 3


def test_estimate_fields():
    est = Estimate(1.0, 0.5, 1.5, 3)
    assert est.half_width == 0.5
    assert np.isclose(est.to_dict()["half_width"], 0.5)
