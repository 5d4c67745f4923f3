"""A fresh clone has no ../shared/data: how CI hides it from the tests that read it
(``make test-without-data``), and how the suite lists those tests (tests/data_tests.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from idlegate.sim.alibaba import default_alibaba_dir
from idlegate.sim.datadirs import SHARED_ENV_VAR, shared_data_dir
from idlegate.sim.tpch import default_tpch_dir
from idlegate.sim.workloads import build_workload
from tests import data_tests
from tests.helpers import need_shared

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def no_trace_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("IDLEGATE_TPCH_DIR", raising=False)
    monkeypatch.delenv("IDLEGATE_ALIBABA_DIR", raising=False)
    return monkeypatch


def test_the_shared_data_variable_names_the_folder_and_an_empty_one_hides_it(
    no_trace_variables: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "tpch").mkdir()
    no_trace_variables.setenv(SHARED_ENV_VAR, str(tmp_path))
    assert default_tpch_dir() == tmp_path / "tpch"
    assert default_alibaba_dir() is None  # (no alibaba/ there)
    assert shared_data_dir("alibaba") == tmp_path / "alibaba"  # where it was looked for

    no_trace_variables.setenv(SHARED_ENV_VAR, str(tmp_path / "absent"))
    assert default_tpch_dir() is None
    # mixed takes TPC-H-like DAGs when the traces are hidden (what test_portfolio met)
    assert build_workload("mixed", 1, num_jobs=4).name != "mixed-tpch"
    with pytest.raises(pytest.skip.Exception, match=r"absent/swf/x\.swf not found"):
        need_shared("swf", "x.swf")


def test_a_test_that_reads_data_is_listed(no_trace_variables, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "tpch").mkdir(parents=True)
    (data / "tpch" / "q1.json").write_text("{}")
    (tmp_path / "other.txt").write_text("")
    no_trace_variables.setenv(SHARED_ENV_VAR, str(data))
    recorder = data_tests.Recorder(data_tests.data_roots())
    no_trace_variables.setattr(data_tests, "RECORDER", recorder)
    data_tests.install()

    with recorder.watching("opens-a-trace"):
        (data / "tpch" / "q1.json").read_text()
    with recorder.watching("opens-another-file"):
        (tmp_path / "other.txt").read_text()
    with recorder.watching("finds-the-traces"):
        default_tpch_dir()  # (the audit event idlegate.data)
    with recorder.watching("runs-a-tpch-compare"):
        subprocess.run([sys.executable, "-c", "pass", "-w", "tpch"], check=True)
    with recorder.watching("runs-a-synthetic-compare"):
        subprocess.run([sys.executable, "-c", "pass", "-w", "synthetic"], check=True)
    # a module's fixture reads the data for its first test; the next reads what it read
    with recorder.watching("first-of-module"), recorder.setting_up("library"):
        (data / "tpch" / "q1.json").read_text()
    with recorder.watching("second-of-module", ["library", "tmp_path"]):
        pass
    with recorder.watching("another-fixture", ["tmp_path"]):
        pass
    no_trace_variables.setattr(data_tests, "RECORDER", None)
    assert recorder.found == {
        "opens-a-trace",
        "finds-the-traces",
        "runs-a-tpch-compare",
        "first-of-module",
        "second-of-module",
    }


def test_the_listed_tests_run_and_no_other(tmp_path: Path) -> None:
    chosen = "tests/test_data_hidden.py::test_no_test_finds_the_shared_data_by_a_path_of_its_own"
    listing = tmp_path / "listed.txt"
    listing.write_text(f"{chosen}\n")

    def pytest(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider"]
        return subprocess.run(
            [*command, "-q", "tests/test_data_hidden.py", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )

    ran = pytest(f"--only-tests-in={listing}")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.search(r"\b1 passed, 3 deselected\b", ran.stdout), ran.stdout
    missing = pytest(f"--only-tests-in={tmp_path / 'nope.txt'}")
    assert missing.returncode != 0
    assert f"--only-tests-in {tmp_path / 'nope.txt'}: no such file; run the suite" in (
        missing.stderr
    )


PATH_OF_ITS_OWN = re.compile(r'"shared"\s*[/,]\s*"data"|/\s*"shared"\s*/')


def test_no_test_finds_the_shared_data_by_a_path_of_its_own() -> None:
    # a test building ../shared/data itself would read it with the data "hidden", and CI's
    # run without data would not be one; tests/helpers.shared_path is the one way (and
    # docs_figures' BESIDE is what a page's command names, checked with it hidden too)
    own = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/*.py")]
        if path.name not in ("helpers.py", "docs_figures.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PATH_OF_ITS_OWN.search(line) and "tmp_path" not in line
    ]
    assert own == []
