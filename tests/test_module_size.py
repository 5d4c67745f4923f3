"""Small modules: no module of the package, and no benchmark script, is over 800 lines."""

from __future__ import annotations

from pathlib import Path

import idlegate

LIMIT = 800
"""Lines a module of the package may hold; split a longer one by concern."""


def _too_long(root: Path) -> dict[str, int]:
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py")}
    return {str(p.relative_to(root)): n for p, n in sizes.items() if n > LIMIT}


def test_no_module_of_the_package_is_over_800_lines():
    assert _too_long(Path(idlegate.__file__).parent) == {}


def test_no_benchmark_script_is_over_800_lines():
    # the scripts are read and changed as often as the package: the same rule
    assert _too_long(Path(__file__).resolve().parents[1] / "benchmarks") == {}


def test_the_check_finds_a_long_module(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    assert _too_long(tmp_path) == {"deep/long.py": LIMIT + 1}
