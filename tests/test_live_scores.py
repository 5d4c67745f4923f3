"""benchmarks/live_scores.py: a live pool's start calibration rebuilt from live_forecast's JSON.

Known answers on a run made by hand: a cold burst whose front came out inside its
interval and whose tail started 20 s past its top, then a warm burst's forecasts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.live_forecast import BURST, LATER
from benchmarks.live_scores import first_forecasts, load_task_times, main, replay, typical_ratios


def forecast(name: str, arrival: float, made: float, low: float, median: float, high: float,
             start: float, shown: tuple[float, float] | None = None) -> dict[str, Any]:  # fmt: skip
    replayed = [[low, median, high], [median, median + 30.0, median + 30.0]]
    wide = [shown[0], median, shown[1]] if shown else [low, median, high]
    return {"name": name, "arrival": arrival, "made": made, "start": start,
            "replayed": replayed, "shown": [wide, replayed[1]]}  # fmt: skip


def padded(found: list[dict[str, Any]], after: float) -> list[dict[str, Any]]:
    """`found` and workflows without a forecast, to a run's `BURST` + `LATER`."""
    rest = BURST + LATER - len(found)
    return found + [{"name": f"p{i}", "arrival": after + i, "made": None, "start": after + i}
                    for i in range(rest)]  # fmt: skip


def the_run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    # cold: four of the front 15 s ahead at the top (score 0, band 10-20 s), four of the
    # tail 100 s ahead 20 s past the top (score 0.2, band 80-160 s)
    front = [forecast(f"c{i}", i * 0.01, 10.0, 23.0, 25.0, 25.0, 25.0) for i in range(4)]
    tail = [forecast(f"t{i}", 1 + i * 0.01, 10.0, 108.0, 110.0, 110.0, 130.0) for i in range(4)]
    # warm, made at 200 once all eight started: pooled Q is the 8th of 8, 0.2, every lead
    # (shown: 3 s over the front's top, 20 s over the tail's); per band the front's is 0
    warm = [
        forecast(f"w{i}", 195.0, 200.0, 213.0, 215.0, 215.0, 218.0, (210.0, 218.0))
        for i in range(2)
    ] + [
        forecast(f"x{i}", 195.0, 200.0, 298.0, 300.0, 300.0, 315.0, (278.0, 320.0))
        for i in range(2)
    ]
    return padded(front + tail, 2.0), padded(warm, 196.0)


def test_the_warm_bursts_widening_rebuilt_pooled_and_per_lead_band() -> None:
    cold, warm = the_run()
    got = replay(cold, warm, top=2)
    # pooled: the tail's 0.2 widens the front's 15 s lead by 3 s, holding its 218 s start;
    # per band the front is not widened (its own scores: at the top) and misses it
    assert got == {"pooled": 4, "banded": 2, "rescaled": 2, "n": 4, "mismatch": 0}


def test_the_warm_widening_rebuilt_with_the_cold_scores_relative_to_the_typical_stretch() -> None:
    cold, warm = the_run()
    # the pool learned its tasks take 1.2 times what the cold refresh drew: its tail, 100 s
    # ahead, would have been forecast 120 s ahead, ending at its start (score 0), so the
    # warm tail's band is not widened either, and its 315 s starts fall past 300 s
    got = replay(cold, warm, top=0, typical={f"t{i}": 1.2 for i in range(4)})
    assert got["rescaled"] == 0 and got["banded"] == 2
    assert replay(cold, warm, top=0)["rescaled"] == 2  # (no ratio named: per band, as made)
    assert (
        typical_ratios(cold, 0, load_task_times(Path(__file__).parents[1] / "src")) == {}
    )  # (none submitted)


def test_the_script_prints_the_scores_and_what_they_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cold, warm = the_run()
    rows = [{"code": "src", "run": "node pool, cold", "outcomes": cold},
            {"code": "src", "run": "node pool, warm", "outcomes": warm}]  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(rows))
    main([str(path), "--top", "1"])
    out = capsys.readouterr().out
    assert "8 scores held; pooled Q 0.200; per band: 10-20 s: 4 scores, Q 0.000, " in out
    assert "80-160 s: 4 scores, Q 0.200" in out
    assert "t0: made 10 s in, 100 s ahead, started +20 s from its median: score 0.200" in out
    assert "all runs: pooled 100 %, per lead band 50 % of 4 warm starts" in out


def test_a_cold_bursts_first_forecasts_read_run_by_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the front's four held at their top; the tail's four started 20 s past it (score 0.2
    # a second of its 100 s lead), one of them after a workflow that arrived at 50 s,
    # after the forecast, started before it; the shown interval is the replays' + 0.1·lead
    front = [forecast(f"c{i}", i * 0.01, 10.0, 23.0, 25.0, 25.0, 25.0, (21.5, 26.5))
             for i in range(4)]  # fmt: skip
    tail = [forecast(f"t{i}", 1 + i * 0.01, 10.0, 108.0, 110.0, 110.0, 130.0, (98.0, 120.0))
            for i in range(4)]  # fmt: skip
    late = {"name": "late", "arrival": 50.0, "made": None, "start": 125.0}
    got = first_forecasts([*front, *tail, late])
    assert got["n"] == 8 and got["at_first"] == 8 and got["refresh"] == 10.0
    assert (got["held"], got["held_replayed"], got["early"], got["late"]) == (4, 4, 4, 0)
    assert got["overtaken"] == 4  # (the late one started before each of the tail's four)
    assert got["used"] == pytest.approx(0.1)
    # errors a second of lead: 0 ×4, +0.2 ×4; the 80 % quantile of the scores: 0.2
    assert got["error"] == pytest.approx(0.1) and got["needed"] == pytest.approx(0.2)
    assert (got["error_overtaken"], got["error_rest"], got["n_overtaken"]) == (0.2, 0.0, 4)
    rows = [{"code": "src", "run": "node pool, cold", "outcomes": padded([*front, *tail], 2.0)}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(rows))
    main([str(path), "--cold"])
    out = capsys.readouterr().out
    assert "run 0: first refresh 10 s in, 8 of 8 first forecasts made there; held 4" in out
    # (the padding's workflows arrived after the forecast and started before the front's)
    assert "error a second of lead +0.100 (+0.100 of the 8 overtaken by a later arrival, " in out
    assert "— of the rest); widening used 0.100, needed 0.200" in out


def test_the_log_stretches_a_node_pools_kubelets_drew_for_its_first_wave() -> None:
    from types import SimpleNamespace

    from benchmarks.live_harness import SimKubelet
    from benchmarks.live_scores import drawn
    from idlegate.api.task_pods import pod_name

    # cold-00 (extract ×2, then load) started first, cold-02 (scan ×6) second: the wave is
    # their root stages' 8 tasks, never 'load' (it waits on extract)
    run = [{"name": "cold-00", "start": 1.0}, {"name": "cold-02", "start": 2.0}]
    kubelet = SimpleNamespace(stretch=0.3, start_latency=3.0, seed=4, namespace="forecast-n")
    tasks = [("cold-00", "extract", k, 20.0) for k in range(2)]
    tasks += [("cold-02", "scan", k, 15.0) for k in range(6)]
    wave = []
    for wf, st, k, secs in tasks:
        factor, latency = SimKubelet.draws(kubelet, pod_name(wf, st, k))  # type: ignore[arg-type]
        wave.append((math.log(factor), latency + factor * secs))
    load = math.log(SimKubelet.draws(kubelet, "cold-00-load-0")[0])  # type: ignore[arg-type]
    every, first = drawn(run, 4)
    assert every == pytest.approx((sum(w[0] for w in wave) + load) / 9)
    assert first == pytest.approx(sum(w[0] for w in wave) / 8)  # (fewer than 10: all 8)


def test_the_first_refreshs_stretch_estimate_from_the_first_wave_as_it_stood() -> None:
    """Once every task of the first wave has ended, the replays draw its own stretches
    (nothing censored); before, the tasks still running count, each past what it ran."""
    import numpy as np

    from benchmarks.live_scores import at_first_refresh, first_wave
    from idlegate.sim import task_times

    def run(made: float) -> list[dict[str, Any]]:
        return [{"name": f"cold-{i:02d}", "arrival": 0.0, "start": 0.0, "made": made}
                for i in range(BURST)]  # fmt: skip

    wave = first_wave(run(1000.0), 0)
    assert len(wave) == 24  # (the node pool's CPUs)
    mean, ended, running = at_first_refresh(run(1000.0), 0, task_times)
    assert (ended, running) == (24, 0)
    assert mean == pytest.approx(float(np.mean(np.log([t[2] for t in wave]))))
    now = sorted(s + lat + f * d for s, lat, f, d in wave)[11]  # (the 12th end)
    _, ended, running = at_first_refresh(run(now), 0, task_times)
    assert (ended, running) == (12, 12)
