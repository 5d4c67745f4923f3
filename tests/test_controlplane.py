"""The local control plane's command without a plane (tests/real/ runs on one): what it
refuses and says, and the KWOK stages it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from idlegate.controlplane import kwok
from idlegate.controlplane.launcher import binaries
from idlegate.errors import IdlegateError


def command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "idlegate.controlplane", *args], capture_output=True, text=True
    )


def test_missing_binaries_say_how_to_build_them(tmp_path: Path) -> None:
    with pytest.raises(IdlegateError, match=r"not found in .*: build the control plane first"):
        binaries(tmp_path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["up", "--time-factor", "0"], "Error: --time-factor must be above 0, not 0.0."),
        (["up", "--nodes", "-1"], "Error: --nodes and --node-gpu must be 0 or more."),
        (["up"], "build the control plane first with `make cluster`"),
        (
            ["up", "--node-memory", "lots"],
            "--node-memory 'lots' is not a quantity Kubernetes reads",
        ),
        (["up", "--node-cpu", "-4"], "--node-cpu '-4' is not a quantity Kubernetes reads"),
    ],
)
def test_up_refuses_in_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    result = command(*args, "--dir", str(tmp_path / "plane"), "--bin", str(tmp_path / "none"))
    assert result.returncode == 1
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_down_and_status_with_no_plane(tmp_path: Path) -> None:
    down, status = (
        command("down", "--dir", str(tmp_path)),
        command("status", "--dir", str(tmp_path)),
    )
    assert (down.returncode, status.returncode) == (0, 1)
    assert "No control plane is recorded in" in down.stdout + status.stdout


def test_the_stages_run_a_pod_its_declared_duration_over_the_time_factor() -> None:
    stages = {s["metadata"]["name"]: s["spec"] for s in kwok.stages(time_factor=20)}
    assert set(stages) == {
        "node-ready",
        "pod-start",
        "pod-fail",
        "pod-complete",
        "pod-complete-retry",
        "pod-stop",
        "pod-delete",
    }
    run_time = stages["pod-complete"]["delay"]["durationFrom"]["expressionFrom"]
    assert '"TASK_DURATION_SECONDS"' in run_time and "tonumber / 20 " in run_time
    assert stages["pod-stop"]["delay"] == {"durationMilliseconds": 50}  # 1 s over 20
