"""benchmarks/sim_regression.py: finding another commit's package and judging the runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_benchmark

sim_regression = load_benchmark("sim_regression")


def test_package_root_of_the_src_layout(tmp_path: Path) -> None:
    (tmp_path / "tree" / "src" / "idlegate").mkdir(parents=True)
    assert sim_regression.package_root(tmp_path / "tree", tmp_path) == tmp_path / "tree" / "src"


def test_package_root_of_the_old_layout_links_a_folder_named_idlegate(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sim").mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    root = sim_regression.package_root(tree, tmp_path)
    assert (root / "idlegate").resolve() == tree.resolve()
    assert (root / "idlegate" / "sim").is_dir()


def test_package_root_refuses_a_tree_without_the_package(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="holds no idlegate package"):
        sim_regression.package_root(tmp_path, tmp_path)


def _runs(seconds: float, jct: float) -> list[list[dict]]:
    episodes = [
        {"interarrival": ia, "seed": 0, "s": seconds, "jct": [jct, 2.0]}
        for ia in sim_regression.INTERARRIVALS
    ]
    return [episodes, [dict(e, s=e["s"] * 1.5) for e in episodes]]


def test_report_prints_the_ratio_and_accepts_identical_jcts(capsys) -> None:
    assert sim_regression.report(_runs(0.2, 1.0), _runs(0.5, 1.0), "abc1234")
    out = capsys.readouterr().out
    assert "2.50 (2.50-2.50)" in out and "identical" in out and "DIFFER" not in out


def test_report_flags_a_jct_that_differs_in_the_last_digit(capsys) -> None:
    assert not sim_regression.report(_runs(0.2, 1.0), _runs(0.2, 1.0000000000000002), "abc1234")
    assert "DIFFER" in capsys.readouterr().out
