"""Reproductions of operator papercuts found by an independent test (issue 16, item 7): two
operators on one --metrics-port, and names the API server refuses that lint passed."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from idlegate.api.crd import DNS_SUBDOMAIN, MAX_WORKFLOW_NAME_LENGTH
from idlegate.api.task_pods import pod_name
from idlegate.cli import app
from idlegate.sim.spec import MAX_NAME_LENGTH
from tests.operator_fakes import harness, stage

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_a_second_operator_on_a_taken_metrics_port_exits_with_one_line_naming_it(tmp_path):
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    with socket.create_server(("0.0.0.0", 0)) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run(
            [
                *(sys.executable, "-m", "idlegate", "operator", "--standalone", "--pool-size=2"),
                *("--kubeconfig", str(tmp_path / "kubeconfig")),
                *("--metrics-port", str(port), "--health-port", "0"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("Error: cannot listen on 0.0.0.0:") and f"port {port}" in lines[0]
    assert "--metrics-port" in lines[0] and "Traceback" not in run.stderr


MANIFEST = """\
apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata: {{name: {name!r}}}
spec: {{stages: [{{name: a, tasks: 1, taskDurationSeconds: 1}}]}}
"""


@pytest.mark.parametrize(
    "name", ["Nightly", "nightly_etl", "-etl", "etl-", "etl.", "a..b", "a.-b", "é"]
)
def test_lint_refuses_a_name_the_api_server_refuses(tmp_path: Path, name: str):
    (tmp_path / "w.yaml").write_text(MANIFEST.format(name=name))
    result = CliRunner().invoke(app, ["lint", str(tmp_path / "w.yaml")])
    assert result.exit_code == 1
    assert "metadata.name: the name" in result.stdout and "RFC 1123" in result.stdout


@pytest.mark.parametrize("name", ["nightly-etl", "etl.v2", "0a", "a" * MAX_WORKFLOW_NAME_LENGTH])
def test_lint_passes_a_name_the_api_server_takes(tmp_path: Path, name: str):
    (tmp_path / "w.yaml").write_text(MANIFEST.format(name=name))
    assert CliRunner().invoke(app, ["lint", str(tmp_path / "w.yaml")]).exit_code == 0


@pytest.mark.asyncio
async def test_the_operator_marks_an_uppercase_name_invalid_instead_of_creating_pods():
    h = harness()
    await h.submit("Nightly", {"stages": [stage("a")]})
    status = h.kube.status("Nightly")
    assert status["phase"] == "Invalid" and not h.kube.pods
    assert "RFC 1123" in status["conditions"][0]["message"]


label = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?\Z")


@given(
    st.lists(label, min_size=1, max_size=6).map(".".join),
    st.from_regex(rf"\A[a-z0-9]([-a-z0-9]{{0,{MAX_NAME_LENGTH - 2}}}[a-z0-9])?\Z"),
    st.integers(0, 99_999),
    st.integers(0, 9),
)
def test_a_valid_name_gives_valid_pod_names(
    workflow: str, stage_name: str, index: int, attempt: int
):
    workflow = workflow[:MAX_WORKFLOW_NAME_LENGTH].rstrip("-.")
    if not DNS_SUBDOMAIN.match(workflow):
        return  # (cut inside a label's dashes: not a name lint passes)
    name = pod_name(workflow, stage_name, index, attempt)
    assert DNS_SUBDOMAIN.match(name) and len(name) <= 63
