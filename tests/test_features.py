"""Features of the learned policy: known values on a hand-built state, masks, caching."""

from __future__ import annotations

from math import log1p

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy.columns import (
    ARRIVAL_FEATURES,
    GLOBAL_FEATURES,
    JOB_FEATURES,
    NUM_GLOBAL_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    STAGE_FEATURES,
    FeatureConfig,
    cap_levels,
)
from idlegate.policy.features import (
    ARRAYS,
    MODEL_INPUTS,
    Featurizer,
    Observation,
    arrival_history,
    compute_features,
)
from idlegate.policy.heuristics import FairScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import ClusterView, Decision
from idlegate.sim.workloads import build_workload
from tests.helpers import dag

S = {name: i for i, name in enumerate(STAGE_FEATURES)}
J = {name: i for i, name in enumerate(JOB_FEATURES)}
G = {name: i for i, name in enumerate(GLOBAL_FEATURES)}


def stages(obs: Observation) -> list:
    return [obs.stage(row) for row in range(obs.num_stages)]


def diamond() -> Dag:
    # bottom levels: d 4, b 7, c 5, a 9; total work 4 + 3 + 3 + 4 = 14
    return dag(
        ("a", 2, 2.0, []),
        ("b", 1, 3.0, ["a"]),
        ("c", 3, 1.0, ["a"]),
        ("d", 1, 4.0, ["b", "c"]),
    )


def gang_job() -> Dag:
    return dag(("s", 2, 5.0, [], True))


@pytest.fixture
def state() -> tuple[Cluster, object, object, list]:
    """K=4. A (diamond) at t=0 runs a; B (a gang of 2) arrives at t=1; at t=2 a is done
    and c takes 3 executors: 1 executor free, so B's gang cannot start."""
    c = Cluster(4)
    a = c.add_job(diamond(), 0.0, "A")
    launches = c.apply(Decision(a.stages[0], 2), 0.0)
    b = c.add_job(gang_job(), 1.0, "B")
    for launch in launches:
        assert c.task_finished(launch.executor, 2.0) is None
    running = c.apply(Decision(a.stages[2], 3), 2.0)
    return c, a, b, running


def test_shapes_and_schema() -> None:
    assert len(STAGE_FEATURES) == NUM_STAGE_FEATURES
    assert len(JOB_FEATURES) == NUM_JOB_FEATURES
    assert len(GLOBAL_FEATURES) == NUM_GLOBAL_FEATURES


def test_rows_edges_and_mapping(state) -> None:
    c, a, b, _ = state
    obs = compute_features(c)
    # a is complete and dropped: rows are A's b, c, d then B's s
    assert [s.name for s in stages(obs)] == ["b", "c", "d", "s"]
    assert obs.stage_job.tolist() == [0, 0, 0, 1]
    assert obs.stage_index.tolist() == [1, 2, 3, 0]
    # child -> parent, only edges into incomplete parents: d->b, d->c
    assert obs.edge_src.tolist() == [2, 2] and obs.edge_dst.tolist() == [0, 1]
    assert obs.stage(3) is b.stages[0] and obs.row_of(a.stages[3]) == 2
    assert obs.offsets == [0, 3, 4] and obs.jobs == [a, b]
    for name in ("stage_x", "job_x", "global_x", "cap_x"):
        assert getattr(obs, name).dtype == np.float32
    for name in ("edge_src", "edge_dst", "stage_job", "cap_levels"):
        assert getattr(obs, name).dtype == np.int64
    assert obs.stage_x.shape == (4, NUM_STAGE_FEATURES)
    assert obs.job_x.shape == (2, NUM_JOB_FEATURES)
    assert obs.global_x.shape == (1, NUM_GLOBAL_FEATURES)
    with pytest.raises(IdlegateError):
        obs.row_of(a.stages[0])  # complete: not a row


def test_stage_features_known_values(state) -> None:
    c, _, _, _ = state
    x = compute_features(c).stage_x
    expected = np.zeros_like(x)
    # b: 1 task of 3 s, runnable, may idle, bottom level 7
    expected[0, [S["remaining_tasks"], S["task_duration"], S["remaining_work"]]] = [
        log1p(1),
        log1p(3),
        log1p(3),
    ]
    expected[0, S["bottom_level"]] = log1p(7)
    expected[0, [S["runnable"], S["may_idle"]]] = 1
    # c: 3 tasks of 1 s, all launched on 3 of the 4 executors
    expected[1, S["executors"]] = 3 / 4
    expected[1, [S["task_duration"], S["remaining_work"], S["bottom_level"]]] = [
        log1p(1),
        log1p(3),
        log1p(5),
    ]
    # d: waits for b and c
    expected[2, [S["remaining_tasks"], S["task_duration"], S["remaining_work"]]] = [
        log1p(1),
        log1p(4),
        log1p(4),
    ]
    expected[2, S["bottom_level"]] = log1p(4)
    # B's gang stage: 2 tasks of 5 s, does not fit the 1 free executor
    expected[3, [S["remaining_tasks"], S["task_duration"], S["remaining_work"]]] = [
        log1p(2),
        log1p(5),
        log1p(10),
    ]
    expected[3, [S["bottom_level"], S["gang"]]] = [log1p(5), 1]
    np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-7)


def test_job_features_known_values(state) -> None:
    c, _, _, _ = state
    x = compute_features(c).job_x
    a = {
        "remaining_cp": log1p(7),
        "average_width": log1p(14 / 9),
        "remaining_width": log1p(10 / 7),
        "remaining_work": log1p(10),
        "total_work": log1p(14),
        "held": 3 / 4,
        "cap": 3 / 4,
        "time_in_system": log1p(2),
        "unlaunched": log1p(2),
        "local_free": 0.0,  # c took A's two freed executors and one fresh one
        "launchable": log1p(1),
        "idle_inserted": 0.0,
    }
    b = {
        "remaining_cp": log1p(5),
        "average_width": log1p(2),
        "remaining_width": log1p(2),
        "remaining_work": log1p(10),
        "total_work": log1p(10),
        "time_in_system": log1p(1),
        "unlaunched": log1p(2),
    }
    for row, values in enumerate((a, b)):
        expected = np.zeros(NUM_JOB_FEATURES)
        for name, value in values.items():
            expected[J[name]] = value
        np.testing.assert_allclose(x[row], expected, rtol=1e-6, atol=1e-7)


def test_global_features_known_values(state) -> None:
    c, _, _, _ = state
    g = compute_features(c).global_x[0]
    sizes = np.log1p([14.0, 10.0])
    rate = 1 / 2  # one arrival after the first, over the 2 s since it
    expected = {
        "free_executors": 1 / 4,
        "jobs": log1p(2),
        "executors": log1p(4),
        "backlog": log1p(20 / 4),
        "arrival_rate": log1p(rate),
        "offered_load": rate * 12 / 4,
        "size_mean": sizes.mean(),
        "size_std": sizes.std(),
        "size_max": sizes.max(),
        "since_arrival": log1p(1),
    }
    np.testing.assert_allclose(g, [expected[n] for n in GLOBAL_FEATURES], rtol=1e-6, atol=1e-7)


def test_masks(state) -> None:
    c, _, _, _ = state
    obs = compute_features(c)
    assert obs.stage_mask.tolist() == [True, False, False, False]
    assert obs.idle_mask.tolist() == [True, False, False, False]
    assert obs.cap_levels.tolist() == [1, 2, 3, 4]
    np.testing.assert_allclose(obs.cap_x, [0.25, 0.5, 0.75, 1.0])
    # A holds 3: only cap 4 raises it; B holds none
    assert obs.cap_mask.tolist() == [[False, False, False, True], [True] * 4]
    assert [s for s in stages(obs) if obs.stage_mask[obs.row_of(s)]] == c.runnable_stages()


def test_idle_and_completion_update_rows_and_masks(state) -> None:
    c, a, _, running = state
    feat = Featurizer()
    feat(c)  # warm the cache: the next calls must notice every change
    c.apply(Decision(a.stages[1], 3, 1.5), 2.0)  # b idles 1.5 s
    obs = feat(c)
    assert obs.stage_x[0, S["delayed"]] == 1 and obs.stage_x[0, S["idling"]] == 1
    assert obs.stage_x[0, S["runnable"]] == 0 and not obs.stage_mask.any()
    assert obs.job_x[0, J["idle_inserted"]] == pytest.approx(log1p(1.5))
    # the three c tasks finish at t=3: c is dropped, B's gang now fits
    for launch in running:
        c.task_finished(launch.executor, 3.0)
    obs = feat(c)
    assert [s.name for s in stages(obs)] == ["b", "d", "s"]
    assert obs.edge_src.tolist() == [1] and obs.edge_dst.tolist() == [0]
    assert obs.stage_mask.tolist() == [False, False, True]
    assert obs.idle_mask.tolist() == [False, False, True]
    np.testing.assert_array_equal(obs.stage_x, compute_features(c).stage_x)
    np.testing.assert_array_equal(obs.job_x, compute_features(c).job_x)


def test_cp_ablation_zeroes_only_the_cp_columns(state) -> None:
    c, _, _, _ = state
    full = compute_features(c)
    ablated = compute_features(c, FeatureConfig(cp_features=False))
    cp_stage = [S["bottom_level"]]
    cp_job = [J["remaining_cp"], J["average_width"], J["remaining_width"]]
    assert not ablated.stage_x[:, cp_stage].any() and not ablated.job_x[:, cp_job].any()
    assert full.stage_x[:, cp_stage].any() and full.job_x[:, cp_job].all()
    keep_s = [i for i in range(NUM_STAGE_FEATURES) if i not in cp_stage]
    keep_j = [i for i in range(NUM_JOB_FEATURES) if i not in cp_job]
    np.testing.assert_array_equal(full.stage_x[:, keep_s], ablated.stage_x[:, keep_s])
    np.testing.assert_array_equal(full.job_x[:, keep_j], ablated.job_x[:, keep_j])


def test_empty_view() -> None:
    obs = compute_features(Cluster(3))
    assert obs.num_stages == 0 and obs.num_jobs == 0
    assert obs.stage_x.shape == (0, NUM_STAGE_FEATURES) and obs.cap_mask.shape == (0, 3)
    assert not obs.global_x[0, G["arrival_rate"]]


def test_the_stored_form_keeps_the_model_inputs_and_drops_the_cluster(state) -> None:
    c, a, _, _ = state
    obs = compute_features(c)
    stored = obs.stored()
    for name in MODEL_INPUTS:
        np.testing.assert_array_equal(getattr(stored, name), getattr(obs, name), err_msg=name)
    assert set(obs.as_arrays()) == set(ARRAYS) and "idle_rows" not in ARRAYS
    assert (stored.num_stages, stored.num_jobs) == (obs.num_stages, obs.num_jobs) == (4, 2)
    assert stored.jobs is None and stored.cap_levels is None
    with pytest.raises(IdlegateError, match="stored observation has no cluster objects"):
        stored.stage(0)
    with pytest.raises(IdlegateError, match="stored observation"):
        stored.row_of(a.stages[1])


def test_cap_levels() -> None:
    assert cap_levels(5, 64).tolist() == [1, 2, 3, 4, 5]
    big = cap_levels(1000, 16)
    assert big[0] == 1 and big[-1] == 1000 and len(big) <= 16
    assert (np.diff(big) > 0).all()


@pytest.mark.parametrize(
    "options",
    [{"time_unit": 0}, {"arrival_window": 1}, {"max_cap_levels": 1}, {"cp_features": "no"}],
)
def test_bad_config_is_a_user_error(options) -> None:
    with pytest.raises(IdlegateError):
        FeatureConfig(**options)
    with pytest.raises(
        IdlegateError, match="the featurizer: colour: is not a known setting; it takes "
    ):
        FeatureConfig.of({"colour": 1})


class _Checker:
    """Fair decides; at every decision the cached featurizer must equal a fresh one."""

    name = "checker"

    def __init__(self, config: FeatureConfig) -> None:
        self.config = config
        self.cached = Featurizer(config)
        self.fair = FairScheduler()
        self.calls = 0

    def reset(self, rng: object) -> None:
        self.cached.reset()

    def decide(self, view: ClusterView):
        got = self.cached(view)
        want = compute_features(view, self.config)
        for name in Observation.__slots__:
            a, b = getattr(got, name), getattr(want, name)
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=name)
        assert got.stage_mask.sum() == len(view.runnable_stages())
        self.calls += 1
        return self.fair.decide(view)


def test_cache_never_changes_the_features() -> None:
    workload = build_workload(
        "tpch-like", seed=3, num_executors=10, init=3, num_stream=12, interarrival=4
    )
    checker = _Checker(FeatureConfig(max_cap_levels=6))
    simulate(workload, checker, seed=1)
    assert checker.calls > 100


class _Sized:
    """`cluster` seen as a pool of `size` executors: a queue's view, sized to the queue's
    entitlement, which moves as the other queues borrow and lend."""

    def __init__(self, cluster: Cluster, size: int) -> None:
        self._cluster, self.num_executors = cluster, size

    def __getattr__(self, name: str) -> object:
        return getattr(self._cluster, name)


def test_a_cached_job_is_read_again_when_the_pool_it_is_seen_in_is_resized(state) -> None:
    # the same jobs, unchanged, asked of a view of 4 executors then of 8: the rows are
    # figures over the pool's size (held 3 of 4, then of 8), and a launch's cap levels
    # above what a job holds come from them
    c, _, _, _ = state
    feat = Featurizer()
    assert feat(_Sized(c, 4)).job_x[0, J["held"]] == pytest.approx(3 / 4)
    resized = feat(_Sized(c, 8))
    fresh = compute_features(_Sized(c, 8))
    np.testing.assert_array_equal(resized.job_x, fresh.job_x)
    np.testing.assert_array_equal(resized.cap_mask, fresh.cap_mask)
    assert resized.job_x[0, J["held"]] == pytest.approx(3 / 8)


class _Showing(_Sized):
    """`cluster` through a view that shows only the stages named `shown` (as a queue's view
    shows the stages the admission lets start)."""

    def __init__(self, cluster: Cluster, shown: set[str]) -> None:
        super().__init__(cluster, cluster.num_executors)
        self._shown = shown

    def runnable(self, job: object) -> list:
        return [s for s in self._cluster.runnable(job) if s.name in self._shown]

    def runnable_stages(self) -> list:
        return [s for job in self._cluster.jobs for s in self.runnable(job)]


def test_a_cached_job_is_read_again_when_its_view_shows_other_stages_of_the_same_count() -> None:
    # two roots, x and y; the view shows x, then y: one stage each time, nothing else moved
    c = Cluster(4)
    c.add_job(dag(("x", 1, 1.0, []), ("y", 1, 2.0, [])), 0.0, "J")
    feat = Featurizer()
    first = feat(_Showing(c, {"x"}))
    assert [s.name for s in stages(first) if first.stage_mask[first.row_of(s)]] == ["x"]
    then = feat(_Showing(c, {"y"}))
    assert [s.name for s in stages(then) if then.stage_mask[then.row_of(s)]] == ["y"]
    fresh = compute_features(_Showing(c, {"y"}))
    np.testing.assert_array_equal(then.stage_x, fresh.stage_x)


class _Jobs(_Sized):
    """`cluster` through a view that shows only `jobs` (as a queue's view shows its own)."""

    def __init__(self, cluster: Cluster, jobs: list) -> None:
        super().__init__(cluster, cluster.num_executors)
        self.jobs = jobs


def test_the_rows_of_the_jobs_another_view_shows_are_kept_until_they_leave() -> None:
    # a queue's view shows its own jobs: a flood's 30 rows, then another queue's 2, then the
    # flood's again; the flood's rows are the ones read before (they were built again at
    # every question when a view's jobs alone were kept), and a job that left is dropped
    c = Cluster(4)
    jobs = [c.add_job(dag(("x", 2, 1.0, []), ("y", 1, 2.0, ["x"])), 0.0) for _ in range(32)]
    flood, team = jobs[:30], jobs[30:]
    feat = Featurizer()
    feat(_Jobs(c, flood))
    rows = {job.id: feat._entries[job.id] for job in flood}
    feat(_Jobs(c, team))
    again = feat(_Jobs(c, flood))
    assert all(feat._entries[job.id] is rows[job.id] for job in flood)
    np.testing.assert_array_equal(again.stage_x, compute_features(_Jobs(c, flood)).stage_x)
    np.testing.assert_array_equal(again.job_x, compute_features(_Jobs(c, flood)).job_x)
    c.remove_job(flood[0], 1.0)
    for _ in range(50):  # (pruned once the cache outgrows twice what it kept)
        feat(_Jobs(c, [c.add_job(dag(("z", 1, 1.0, [])), 1.0)]))
    assert flood[0].id not in feat._entries and flood[1].id in feat._entries


def test_queues_cache_never_changes_the_features() -> None:
    # the same check as above under queues: a flood and two steady teams (`teams`), each
    # queue's view sized to its entitlement and showing its own jobs
    from idlegate.sim.workloads.teams import TeamsConfig, teams_workload

    workload = teams_workload(TeamsConfig(num_executors=12, num_jobs=6, flood=3.0), seed=2)
    checker = _Checker(FeatureConfig(max_cap_levels=6))
    simulate(workload, checker, seed=1)
    assert checker.calls > 100


# -- the optional arrival-history columns ---------------------------------------------------


def test_arrival_history_known_values() -> None:
    window = [(0.0, 10.0), (5.0, 100.0), (8.0, 10.0), (9.0, 12.0)]  # one large (≥ 4 × 10)
    got = arrival_history(window, 20.0, FeatureConfig(arrival_features=True))
    expected = dict(
        since_large=log1p(15),
        since_small=log1p(11),
        large_recent=log1p(1),
        small_recent=log1p(3),
        small_after_large=log1p(2),
    )
    np.testing.assert_allclose(got, [expected[n] for n in ARRIVAL_FEATURES])
    short = FeatureConfig(arrival_features=True, recent_seconds=12.0)  # from t = 8 on
    assert arrival_history(window, 20.0, short)[2:4] == [0.0, log1p(2)]
    alike = [(0.0, 10.0), (3.0, 12.0)]  # nothing large: since the oldest, none after
    got = arrival_history(alike, 5.0, FeatureConfig(arrival_features=True))
    np.testing.assert_allclose(got, [log1p(5), log1p(2), 0.0, log1p(2), 0.0])


def test_arrival_columns_only_when_enabled(state) -> None:
    c, _, _, _ = state
    plain = compute_features(c).global_x
    assert plain.shape == (1, NUM_GLOBAL_FEATURES)
    cfg = FeatureConfig(arrival_features=True)
    wide = compute_features(c, cfg).global_x
    assert wide.shape == (1, NUM_GLOBAL_FEATURES + len(ARRIVAL_FEATURES))
    np.testing.assert_array_equal(wide[:, :NUM_GLOBAL_FEATURES], plain)
    # A (work 14) at t = 0 and B (10) at t = 1, now 2: neither is 4 × the other
    np.testing.assert_allclose(
        wide[0, NUM_GLOBAL_FEATURES:], [log1p(2), log1p(1), 0.0, log1p(2), 0.0], rtol=1e-6
    )
