"""The bounded observation of the learned policy: which jobs it sees, and nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import DEFAULT_POLICY_PATH, SchedulerSpec, make_scheduler
from idlegate.policy.bounded import WindowConfig, WindowSelector, select_window, window_config
from idlegate.policy.features import MODEL_INPUTS, Featurizer
from idlegate.policy.onnx_runtime import OnnxPolicy
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import ClusterView, Decision
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, dag, workload

pytestmark = pytest.mark.skipif(
    not DEFAULT_POLICY_PATH.is_file(), reason="the shipped policy/default.onnx is missing"
)


@pytest.fixture
def queue() -> tuple[Cluster, list]:
    """K=4, eight jobs in arrival order:

    J0 work 100 (one task), launched: holds 1 executor, nothing launchable;
    J1 two tasks of 30 s, one launched: holds 1 executor, one task launchable;
    J2..J7 one task each, waiting, of 50, 5, 40, 3, 45 and 20 s.
    """
    c = Cluster(4)
    jobs = [c.add_job(chain(100.0), 0.0, "J0"), c.add_job(chain(30.0, tasks=2), 1.0, "J1")]
    c.apply(Decision(jobs[0].stages[0], 1), 1.0)
    c.apply(Decision(jobs[1].stages[0], 1), 1.0)
    for i, work in enumerate((50.0, 5.0, 40.0, 3.0, 45.0, 20.0), start=2):
        jobs.append(c.add_job(chain(work), float(i), f"J{i}"))
    return c, jobs


def names(jobs: list) -> list[str]:
    return [j.name for j in jobs]


def test_window_sees_head_tail_smallest_and_holders(queue: tuple[Cluster, list]) -> None:
    c, _ = queue
    cfg = WindowConfig(threshold=2, head=1, tail=1, smallest=2, holders=1)
    visible, rest = select_window(c, cfg)
    # head J1 (J0 has nothing launchable), tail J7, smallest J5 (3 s) and J3 (5 s),
    # holder J1; J0 holds an executor but no action could name it
    assert names(visible) == ["J1", "J3", "J5", "J7"]
    assert rest.jobs == 8
    assert rest.backlog == pytest.approx(100 + 60 + 50 + 5 + 40 + 3 + 45 + 20)
    assert rest.active == 7  # J0 has launched its only task
    assert rest.hidden_below_share  # J2 waits with 0 < ceil(4 / 7) executors

    obs = Featurizer()(c, visible, rest)
    assert [j.name for j in obs.jobs] == ["J1", "J3", "J5", "J7"]
    assert obs.stage_mask.all()  # one launchable stage per visible job
    assert not obs.wait_mask[0]  # a hidden job is below fair's share
    assert obs.global_x[0, 1] == pytest.approx(np.log1p(8))  # jobs: the whole system


def test_window_without_tail_or_smallest(queue: tuple[Cluster, list]) -> None:
    c, _ = queue
    visible, _ = select_window(c, WindowConfig(threshold=0, head=2, tail=0, smallest=0, holders=0))
    assert names(visible) == ["J1", "J2"]
    visible, _ = select_window(c, WindowConfig(threshold=0, head=1, tail=3, smallest=0, holders=0))
    assert names(visible) == ["J1", "J5", "J6", "J7"]


def test_gang_stage_that_does_not_fit_is_not_launchable() -> None:
    c = Cluster(3)
    running = c.add_job(chain(9.0), 0.0, "running")
    c.apply(Decision(running.stages[0], 1), 0.0)
    c.add_job(dag(("g", 3, 5.0, [], True)), 0.0, "gang3")  # 3 tasks > 2 free executors
    c.add_job(chain(4.0), 0.0, "small")
    visible, rest = select_window(c, WindowConfig(threshold=0, head=5, tail=0, smallest=0))
    assert names(visible) == ["small"]
    assert rest.jobs == 3 and rest.active == 2 and not rest.hidden_below_share


def test_all_jobs_visible_gives_the_full_observation() -> None:
    """Where every job is launchable and visible, the window changes no model input."""
    c = Cluster(3)
    for i, work in enumerate((7.0, 2.0, 9.0, 4.0)):
        c.add_job(chain(work, tasks=2), float(i), f"J{i}")
    c.apply(Decision(c.jobs[1].stages[0], 1), 4.0)  # a holder with a task left to launch
    full = Featurizer()(c)
    visible, rest = select_window(c, WindowConfig(threshold=0, head=10))
    assert visible == c.jobs
    windowed = Featurizer()(c, visible, rest)
    for name in MODEL_INPUTS:
        np.testing.assert_array_equal(getattr(windowed, name), getattr(full, name))


def decisions(policy: OnnxPolicy, workload_seed: int) -> tuple[list[str], list[float]]:
    """The decisions of a small tpch-like run (repr) and its jobs' completion times."""
    seen: list[str] = []
    decide = policy.decide

    def record(view: ClusterView):
        action = decide(view)
        seen.append(repr(action))
        return action

    policy.decide = record  # type: ignore[method-assign]
    wl = build_workload(
        "tpch-like", seed=workload_seed, num_executors=5, init=12, num_stream=8, load=1.0
    )
    result = simulate(wl, policy, seed=workload_seed)
    return seen, [r.finish for r in result.records]


def test_no_window_and_below_threshold_decide_identically() -> None:
    plain = decisions(OnnxPolicy(DEFAULT_POLICY_PATH), 3)
    high = decisions(OnnxPolicy(DEFAULT_POLICY_PATH, window=WindowConfig(threshold=1000)), 3)
    assert plain == high
    assert len(plain[0]) > 50


def test_window_above_threshold_bounds_the_rows_and_stays_legal() -> None:
    policy = OnnxPolicy(
        DEFAULT_POLICY_PATH, window=WindowConfig(threshold=4, head=1, tail=1, smallest=1, holders=1)
    )
    sizes: list[tuple[int, int]] = []
    observe = policy.observe

    def spy(view: ClusterView):
        obs = observe(view)
        sizes.append((len(view.jobs), obs.num_jobs))
        return obs

    policy.observe = spy  # type: ignore[method-assign]
    _, finishes = decisions(policy, 3)
    assert all(np.isfinite(finishes)) and len(finishes) == 20  # every job completes
    above = [shown for n, shown in sizes if n > 4]
    assert above and max(above) <= 4  # head + tail + smallest + holders
    assert any(n > 4 and shown < n for n, shown in sizes)


def test_spec_parameters() -> None:
    guarded = make_scheduler(
        f"learned:{DEFAULT_POLICY_PATH}?window=40&window_smallest=4&window_summary=false&name=w"
    )
    assert guarded.name == "w"
    assert guarded.inner.window == WindowConfig(threshold=40, smallest=4, summary=False)
    assert make_scheduler(f"learned:{DEFAULT_POLICY_PATH}").inner.window is None
    assert make_scheduler(f"learned:{DEFAULT_POLICY_PATH}?window=off").inner.window is None
    plain = make_scheduler(f"learned:{DEFAULT_POLICY_PATH}?starvation_factor=none&threads=1")
    assert isinstance(plain, OnnxPolicy)
    assert SchedulerSpec.parse("a.onnx?window=8&window-head=2").params == (
        ("window", "8"),
        ("window_head", "2"),
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("window=-1", "greater than or equal to 0"),
        ("window=many", "window='many' \\(observation window\\) is invalid"),
        ("window=8&window_head=0", "oldest waiting job must stay visible"),
        ("window=8&window_tail=2.5", "window_tail=2.5 \\(observation window\\) is invalid"),
        ("window=8&window_bogus=1", "no parameter 'window_bogus'"),
        ("window_head=2", "needs a window: add window=THRESHOLD"),
        ("window", "window has no value: write window=VALUE"),
        ("window=8&window=9", "window is given twice"),
        ("threads=two", "threads must be a whole number >= 1, got 'two'"),
    ],
)
def test_bad_window_parameters_are_sentences(query: str, message: str) -> None:
    with pytest.raises(IdlegateError, match=message.replace("?", r"\?")):
        make_scheduler(f"learned:{DEFAULT_POLICY_PATH}?{query}")


def test_window_config_rejects_flags_for_counts() -> None:
    with pytest.raises(IdlegateError, match="valid integer"):
        window_config(True)
    with pytest.raises(IdlegateError, match="has no setting 'width'"):
        window_config(8, width=3)


class Checked(WindowSelector):
    """The incremental selector, checked against a full `select_window` at every call."""

    calls = 0

    def __call__(self, view: ClusterView):  # type: ignore[no-untyped-def]
        got = super().__call__(view)
        want = select_window(view, self.config)
        assert [j.id for j in got[0]] == [j.id for j in want[0]]
        assert got[1] == want[1]
        Checked.calls += 1
        return got


@pytest.mark.parametrize("cfg", [dict(head=1, tail=1, smallest=2, holders=1), dict(head=3)])
def test_incremental_selector_equals_full_selection(cfg: dict) -> None:
    """Through a guarded run with arrivals, departures, idle slots and the guard's own
    launches, the selector answers what a full read would, and reads in full rarely."""
    Checked.calls = 0
    guarded = make_scheduler(
        f"learned:{DEFAULT_POLICY_PATH}", starvation_factor=2.0, starvation_minimum=1.0
    )
    policy = guarded.inner
    selector = Checked(WindowConfig(threshold=4, **cfg))
    policy.window, policy._selector = selector.config, selector
    wl = build_workload("tpch-like", seed=5, num_executors=6, init=15, num_stream=15, load=1.1)
    simulate(wl, guarded, seed=5)
    assert Checked.calls > 200
    assert selector.full_reads < Checked.calls / 3
    assert guarded.fired > 0  # the guard launched jobs the window may have hidden


def test_incremental_selector_with_gang_stages() -> None:
    Checked.calls = 0
    policy = OnnxPolicy(DEFAULT_POLICY_PATH)
    selector = Checked(WindowConfig(threshold=2, head=1, tail=1, smallest=1, holders=1))
    policy.window, policy._selector = selector.config, selector
    jobs = [
        (float(t), f"j{t}", dag(("g", 1 + t % 4, 2.0 + t % 5, [], True)) if t % 3 else chain(3.0))
        for t in range(40)
    ]
    simulate(workload(*jobs, executors=4), policy, seed=0)
    assert Checked.calls > 20


def test_incremental_selector_notices_a_decision_it_was_not_told_of() -> None:
    """Told of a decision on C while one on hidden B was applied (the counts agree, and B
    holds nothing any more), the selector sees C unchanged and reads every job again."""
    c = Cluster(4)
    for name, dag_ in (
        ("A", chain(9.0)),
        ("B", chain(5.0, 5.0)),
        ("C", chain(7.0)),
        ("D", chain(30.0)),
        ("E", chain(8.0)),
    ):
        c.add_job(dag_, 0.0, name)
    a, b, c_job = c.jobs[0], c.jobs[1], c.jobs[2]
    selector = WindowSelector(WindowConfig(threshold=0, head=1, tail=1, smallest=1, holders=0))
    assert names(selector(c)[0]) == ["A", "C", "E"]  # C: the least work (7 s)
    selector.decided(Decision(c_job.stages[0], 1))  # told, never applied
    (launch,) = c.apply(Decision(b.stages[0], 1), 1.0)
    assert c.task_finished(launch.executor, 6.0) is None  # B: 5 s of work left
    visible, rest = selector(c)
    assert names(visible) == ["A", "B", "E"] and a in visible
    assert (visible, rest) == select_window(c, selector.config)
    assert selector.full_reads == 2


def test_incremental_selector_when_another_decision_replaces_the_policys() -> None:
    """An outer scheduler that asks the policy and then applies another pick (as the
    lookahead planner may) leaves the selector exact: it notices and reads again."""
    Checked.calls = 0
    policy = OnnxPolicy(DEFAULT_POLICY_PATH)
    selector = Checked(WindowConfig(threshold=4, head=1, tail=1, smallest=1, holders=1))
    policy.window, policy._selector = selector.config, selector
    other = make_scheduler("srpt")

    class Replacing:
        name = "replacing"
        count = 0

        def reset(self, rng: object) -> None:
            policy.reset(rng)
            other.reset(rng)

        def decide(self, view: ClusterView):
            mine = policy.decide(view)
            Replacing.count += 1
            return other.decide(view) if Replacing.count % 3 == 0 else mine

    wl = build_workload("tpch-like", seed=2, num_executors=6, init=15, num_stream=10, load=1.1)
    simulate(wl, Replacing(), seed=2)
    assert Checked.calls > 100
