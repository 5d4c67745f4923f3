"""The layers import in one direction: the simulator core stays pure."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "onnxruntime", "kopf", "kubernetes", "apscheduler", "prometheus_client")


def _loaded_after(imports: str) -> set[str]:
    code = f"import sys\n{imports}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in out.stdout.split()}


def test_the_simulator_core_imports_nothing_heavy():
    loaded = _loaded_after(
        "import idlegate.sim.cluster, idlegate.sim.engine, idlegate.sim.workloads, "
        "idlegate.sim.tpch, idlegate.sim.metrics"
    )
    assert not loaded & set(HEAVY)


@pytest.mark.parametrize(
    "module", ["idlegate.policy", "idlegate.policy.heuristics", "idlegate.cli"]
)
def test_policies_and_cli_do_not_pull_in_torch_or_kopf(module):
    assert not _loaded_after(f"import {module}") & {"torch", "kopf", "kubernetes"}
