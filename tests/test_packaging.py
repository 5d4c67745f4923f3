"""What a user installs: the wheel holds the package and its shipped models and nothing of
the repository around it, the operator's install carries no plotting or training stack,
plots are skipped with a note when matplotlib (the ``plots`` extra) is missing, and the
install hints in ``--help`` name extras that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate import cli
from idlegate.evaluation import plots

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "idlegate"
SHIPPED = (
    "policy/default.onnx",
    "policy/inspectors/*.onnx",
    "training/configs/*.yaml",
    "training/examples/*.yaml",
)
"""The package's data files, as globs under src/idlegate: the models and configs it ships."""
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    """The distribution names of PEP 508 requirements, normalised."""
    return {
        re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements
    }


def test_the_wheel_holds_the_package_and_its_models_and_nothing_else(tmp_path: Path) -> None:
    # built from a copy, so that no build/ or egg-info lands in the working tree
    source = tmp_path / "source"
    shutil.copytree(
        PACKAGE, source / "src" / "idlegate", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        str(source),
        "--no-deps",
        "--no-index",
        "--no-build-isolation",
        "-q",
        "-w",
        str(tmp_path / "dist"),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    (wheel,) = (tmp_path / "dist").glob("idlegate-*.whl")
    files = set(zipfile.ZipFile(wheel).namelist())
    assert {f.split("/")[0] for f in files} == {
        "idlegate",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    wanted = {f"idlegate/{p.relative_to(PACKAGE)}" for p in PACKAGE.rglob("*.py")}
    shipped = {f"idlegate/{p.relative_to(PACKAGE)}" for g in SHIPPED for p in PACKAGE.glob(g)}
    assert "idlegate/policy/default.onnx" in shipped and len(shipped) > len(SHIPPED)
    assert wanted | shipped <= files, sorted((wanted | shipped) - files)


def test_the_operator_install_carries_no_plotting_or_training_stack() -> None:
    # the image installs `.[operator]`: the base and that extra only
    installed = _names([*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["operator"]])
    assert not installed & {"matplotlib", "pillow", "fonttools", "torch"}, installed
    assert "matplotlib" in _names(PROJECT["optional-dependencies"]["plots"])


def test_plots_are_skipped_with_a_note_without_matplotlib(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    # the plot is given up before its data is looked at: no data needed here
    assert plots.plot_jct_cdf(None, tmp_path / "cdf.png") is None  # type: ignore[arg-type]
    assert plots.plot_idle_sweep(None, tmp_path / "sweep.png") is None  # type: ignore[arg-type]
    assert plots.plot_training_curve(None, tmp_path / "curve.png") is None  # type: ignore[arg-type]
    notes = capsys.readouterr().err.splitlines()
    assert notes == [
        f"skipped {tmp_path / name}: plots need matplotlib (pip install 'idlegate[plots]')"
        for name in ("cdf.png", "sweep.png", "curve.png")
    ]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", sorted(cli.commands()))
def test_install_hints_in_the_help_name_real_extras(command: str) -> None:
    # the help is plain text (rich would read `[ray]` as markup and drop it)
    result = CliRunner().invoke(cli.app, [command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    hints = re.findall(r"pip install\s+'(idlegate\S*)'", result.output)  # (wrapped lines)
    if "--ray" in result.output:
        assert "idlegate[ray]" in hints, f"idlegate {command} --help: {hints}"
    extras = set(PROJECT["optional-dependencies"])
    assert all(re.fullmatch(rf"idlegate\[({'|'.join(extras)})\]", h) for h in hints), hints
