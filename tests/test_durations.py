"""Decima's wave duration model: cleaning, interpolation and the branch each task takes."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.sim.durations import StageWaves, Uniforms, WaveDurations, _interpolation


class Fixed:
    """A Uniforms stand-in that replays given draws."""

    def __init__(self, *draws: float) -> None:
        self._draws = list(draws)

    def next(self) -> float:
        return self._draws.pop(0)


def test_fresh_values_are_removed_from_first_wave_and_gaps_filled_from_below():
    w = StageWaves.from_ms(
        first_wave={2: [1000, 3000, 3000], 5: [4000], 10: []},
        rest_wave={2: [500], 5: [], 10: [600]},
        fresh={2: [3000], 5: [4000], 10: []},
    )
    assert w.keys == (2, 5, 10)
    # one 3000 removed (one fresh value removes one equal first-wave value)
    assert w.first_wave == ((1.0, 3.0), (1.0, 3.0), (1.0, 3.0))
    assert w.rest_wave == ((0.5,), (), (0.6,))
    assert w.fresh == ((3.0,), (4.0,), ())
    # like Decima, the mean is taken after cleaning (filled keys count again)
    assert w.mean == pytest.approx(np.mean([1, 3, 1, 3, 1, 3, 0.5, 0.6, 3, 4]))


def test_interpolation_table():
    table = _interpolation((2, 5, 10))
    assert table[0] == (0, 0, 0.0) and table[2] == (0, 0, 0.0)
    assert table[3] == (0, 1, pytest.approx(1 / 3))
    assert table[5] == (1, 1, 0.0)
    assert table[9] == (1, 2, pytest.approx(0.8))
    assert len(table) == 11


def _model() -> WaveDurations:
    waves = StageWaves.from_ms(
        first_wave={2: [1000], 10: [2000]},
        rest_wave={2: [100], 10: []},
        fresh={2: [5000], 10: []},
    )
    return WaveDurations((waves,), warmup_delay=1.0)


def test_sample_branches():
    m = _model()
    # 2 executors: exact key, no interpolation draw
    assert m.sample(0, 2, first=True, moved=True, u=Fixed(0.0)) == 5.0  # fresh to the job
    assert m.sample(0, 2, first=True, moved=False, u=Fixed(0.0)) == 1.0  # first wave
    assert m.sample(0, 2, first=False, moved=False, u=Fixed(0.0)) == 0.1  # rest wave
    # 50 executors: above the largest key -> key 10, which has no fresh and no rest wave
    assert m.sample(0, 50, first=True, moved=True, u=Fixed(0.0)) == 3.0  # first + warm-up
    assert m.sample(0, 50, first=False, moved=False, u=Fixed(0.0)) == 2.0  # falls back
    # 6 executors: upper key with probability (6-2)/(10-2) = 0.5
    assert m.sample(0, 6, first=True, moved=False, u=Fixed(0.49, 0.0)) == 2.0
    assert m.sample(0, 6, first=True, moved=False, u=Fixed(0.51, 0.0)) == 1.0


def test_uniforms_follow_the_run_seed():
    a = Uniforms(np.random.default_rng(7))
    b = Uniforms(np.random.default_rng(7))
    c = Uniforms(np.random.default_rng(8))
    xs = [a.next() for _ in range(5)]
    assert xs == [b.next() for _ in range(5)]
    assert xs != [c.next() for _ in range(5)]
    assert all(0 <= x < 1 for x in xs)


def test_pod_durations_are_the_log_normal_formula_to_the_last_bit():
    # K8sPodDurations.sample writes the formula out for speed; it must stay
    # latency + min(run * exp(sigma * z - sigma**2 / 2), cap) with z the normal quantile
    # of the draw clamped into [1e-12, 1 - 1e-12], bit for bit (replays' JCTs depend on it)
    import math
    from statistics import NormalDist

    from idlegate.sim.spec import MAX_TASK_SECONDS
    from idlegate.sim.workloads.k8s_batch import K8sPodDurations

    draws = [0.0, 1e-13, 1e-12, 3e-12, 0.25, 0.5, 0.9999, 1 - 1e-12, 0.9999999999999999]
    draws += list(np.random.default_rng(0).random(200))
    for sigma in (0.35, 1.7):
        model = K8sPodDurations(3.0, (12.5, MAX_TASK_SECONDS / 2), sigma)
        for stage, run in enumerate(model.runs):
            for p in draws:
                z = NormalDist().inv_cdf(min(max(p, 1e-12), 1 - 1e-12))
                factor = math.exp(sigma * z - sigma * sigma / 2)
                want = 3.0 + min(run * factor, MAX_TASK_SECONDS)
                assert model.sample(stage, 1, False, False, Fixed(p)) == want
    assert K8sPodDurations(3.0, (12.5,), 0.0).sample(0, 1, True, True, Fixed()) == 15.5
