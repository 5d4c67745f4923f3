"""benchmarks/idle_map.py: its sweep grid, shares and per-point figures (known answers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import load_benchmark

pytest.importorskip("ortools", reason="ortools (the dev extra) runs the optimum benchmark")

idle_map = load_benchmark("idle_map")

BASE = {"executors": 2, "load": 0.7, "lag": 10.0}


def test_the_grid_holds_the_base_point_once_and_moves_one_knob_at_a_time() -> None:
    grid = idle_map.points(BASE, {"lag": (2, 10, 30), "load": (0.5, 0.7)})
    assert len(grid) == 4  # lag 2, 10 (the base), 30; load 0.5 (0.7 is the base again)
    assert grid[1] == (("executors", 2.0), ("lag", 10.0), ("load", 0.7))
    assert sum(idle_map._on_axis(p, "lag") for p in grid) == 3


def test_an_unknown_knob_is_refused_with_the_known_ones() -> None:
    with pytest.raises(idle_map.IdlegateError, match="unknown knob 'gap'; sweep one of executors"):
        idle_map.points(BASE, {"gap": (1,)})


def test_a_share_is_the_gain_over_the_oracles_unless_the_oracle_gains_nothing() -> None:
    assert idle_map.share(0.02, 0.08) == pytest.approx(0.25)
    assert idle_map.share(-0.04, 0.08) == pytest.approx(-0.5)  # worse than the best heuristic
    assert idle_map.share(0.02, 0.004) is None  # under MIN_ORACLE_GAIN: noise


def test_a_points_figures_against_the_best_heuristic() -> None:
    best, oracle, learned = idle_map.BEST, idle_map.ORACLE, idle_map.LEARNED
    rooms = [  # analytic:sjf 50 and 40 s; optimum 40 and 40; non-delay 45 and 44
        idle_map.RoomResult(40.0, 45.0, True, {best: 50.0, oracle: 45.0}),
        idle_map.RoomResult(40.0, 44.0, False, {best: 40.0, oracle: 40.0}),
    ]
    runs = [  # two seeds; default 10 % worse, the planner 2 % better, the oracle 8 %
        {best: 100.0, idle_map.DEFAULT: 110.0, learned: 98.0, oracle: 92.0},
        {best: 50.0, idle_map.DEFAULT: 55.0, learned: 49.0, oracle: 46.0},
    ]
    s = idle_map.summarize((("lag", 10.0),), rooms, runs)
    assert s.idling == pytest.approx((5 / 50 + 4 / 40) / 2)
    assert s.below_best == pytest.approx((10 / 50 + 0) / 2)
    assert s.oracle_of_room == pytest.approx((5 / 50 / 2) / 0.1)  # half the room
    assert (s.proven, s.instances, s.best_jct) == (1, 2, 75.0)
    assert s.gains[idle_map.DEFAULT][0] == pytest.approx(-0.10)
    assert s.gains["learned-future planner"][0] == pytest.approx(0.02)
    assert s.gains["oracle planner"] == (pytest.approx(0.08), pytest.approx(0.0))


def test_options_match_the_projects_and_sweep_names_its_knobs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = idle_map.parse(["-j", "2", "--instance-jobs", "8", "--sweep", "lag=2,10"])
    assert (args.jobs, args.instance_jobs, args.sweep) == (2, 8, [("lag", (2.0, 10.0))])
    assert idle_map.parse(["--jobs", "3"]).jobs == 3  # worker processes, as compare's -j
    with pytest.raises(SystemExit):
        idle_map.parse(["--help"])
    assert "KNOB one of size_ratio, lag, session_size, load, executors" in " ".join(
        capsys.readouterr().out.split()
    )


def test_one_seed_prints_n_a_not_nan(capsys: pytest.CaptureFixture[str]) -> None:
    best, oracle, learned = idle_map.BEST, idle_map.ORACLE, idle_map.LEARNED
    rooms = [idle_map.RoomResult(40.0, 45.0, True, {best: 50.0, oracle: 45.0})]
    runs = [{best: 100.0, idle_map.DEFAULT: 110.0, learned: 98.0, oracle: 92.0}]
    idle_map.print_knob("lag", [idle_map.summarize((("lag", 10.0),), rooms, runs)])
    row = capsys.readouterr().out.splitlines()[-1]
    assert "nan" not in row and "+10.0% ± n/a" in row and "-8.0% ± n/a" in row


def test_without_ortools_it_stops_with_one_error_line() -> None:
    script = Path(__file__).parents[1] / "benchmarks" / "idle_map.py"
    hide_ortools = (
        "import runpy, sys; sys.modules['ortools'] = None; sys.argv = ['idle_map.py', '--help']; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", hide_ortools], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: this needs the 'dev' extra") and done.stdout == ""
    assert done.stderr.count("\n") == 1
