"""What the deploy tests read: deploy/'s paths, its sample workflows and kustomize builds."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
SAMPLES = DEPLOY / "samples"
KIND_UP = DEPLOY / "kind-up.sh"
VALID_SAMPLES = ("diamond.yaml", "tpch-q3.yaml")
INVALID_SAMPLE = "invalid-cycle.yaml"
RIGID_SAMPLE = "rigid-jobs.yaml"
"""Several one-stage gang workflows (rigid jobs) in one file."""
CLEANUP_SAMPLE = "cleanup.yaml"
"""A workflow with every cleanup, deadline and suspend field set."""
MIN_KUBERNETES = (1, 30)  # pod scheduling gates are GA from 1.30 on
NAMESPACE = "idlegate-system"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def committed_crd() -> dict[str, Any]:
    """The CRD as committed in deploy/base."""
    return load_yaml(BASE / "crd.yaml")


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def sample_files() -> dict[str, list[dict[str, Any]]]:
    """Every sample file's documents, by file name (rigid-jobs.yaml holds several)."""
    return {p.name: load_all(p) for p in sorted(SAMPLES.glob("*.yaml"))}


def samples() -> dict[str, dict[str, Any]]:
    """The one-workflow samples, by file name."""
    return {name: docs[0] for name, docs in sample_files().items() if len(docs) == 1}


def sample_workflows() -> list[tuple[str, dict[str, Any]]]:
    """Every workflow of every sample, as ("file[index]", document)."""
    files = sample_files().items()
    return [(f"{name}[{i}]", doc) for name, docs in files for i, doc in enumerate(docs)]


def sample_templates() -> list[tuple[str, dict[str, Any]]]:
    """(workflow, stage) of every sample stage with a pod template. Fails when there is
    none, so that a check over them cannot pass by checking nothing."""
    found = [
        (name, stage)
        for name, sample in sample_workflows()
        for stage in sample["spec"]["stages"]
        if "template" in stage
    ]
    assert found, "no sample stage has a pod template: a check over them would check nothing"
    return found


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize DIRECTORY` builds (skips the test without kubectl)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(f"kubectl is not installed: cannot run `kubectl kustomize {directory}`")
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"kubectl kustomize {directory} failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def only(built: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one object of `kind` in a build."""
    (obj,) = [d for d in built if d["kind"] == kind]
    return obj


def parse_node_image(image: str) -> tuple[int, int]:
    """(major, minor) of a kindest/node image pinned by version tag and digest."""
    match = re.fullmatch(r"kindest/node:v(\d+)\.(\d+)\.(\d+)@sha256:[0-9a-f]{64}", image)
    assert match, f"{image}: pin kindest/node by version tag and digest"
    return int(match[1]), int(match[2])


def validate_versions() -> list[str]:
    """The Kubernetes versions to validate against: the oldest supported and kind's."""
    config = load_yaml(DEPLOY / "kind" / "kind-config.yaml")
    (kind,) = {parse_node_image(n["image"]) for n in config["nodes"]}
    return [f"{major}.{minor}" for major, minor in sorted({MIN_KUBERNETES, kind})]
