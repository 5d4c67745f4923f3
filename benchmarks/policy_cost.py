"""How large a DagWorkflow the pod-security ValidatingAdmissionPolicy admits on a real
kube-apiserver before its CEL runtime cost limit refuses it (failurePolicy Fail).

    python -m benchmarks.policy_cost [--bin out/cluster/bin] [--dir /tmp/policy-cost]

Starts a control plane of ``make cluster``'s binaries in DIR (no node), installs the CRDs
and deploy/components/pod-security/policy.yaml, and waits until the policy refuses a
privileged workflow. Then, by dry-run creates (admission runs in full, nothing is stored)
in a namespace without a Pod Security label (baseline): the largest number of stages, each
with the operator's default template (restricted-compliant), that is admitted, found by
bisection up to the CRD's limit of stages; and whether that limit of stages without a
template is admitted. Prints both, then stops the plane.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from idlegate.api.crd import KINDS, render_crd
from idlegate.api.status import MAX_CR_STAGES
from idlegate.controlplane.client import ApiRefusal
from idlegate.controlplane.launcher import Plane, start, stop
from tests.security_cases import SC0, edit, escalated, restricted_template, workflow

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "deploy" / "components" / "pod-security" / "policy.yaml"
NAMESPACE = "policy-cost"
_names = itertools.count()


def answer(plane: Plane, obj: dict[str, Any]) -> str:
    """ "" when the API server admits a dry-run create of `obj`, else its message."""
    obj["metadata"] = {"name": f"w{next(_names)}", "namespace": NAMESPACE}
    path = f"/apis/idlegate.io/v1alpha1/namespaces/{NAMESPACE}/dagworkflows"
    try:
        plane.client().request("POST", path, obj, query={"dryRun": "All"})
    except ApiRefusal as exc:
        return str(exc.body.get("message") or exc)
    return ""


def templated(plane: Plane, stages: int) -> str:
    return answer(plane, workflow(*[restricted_template() for _ in range(stages)]))


def largest_admitted(plane: Plane, limit: int) -> int:
    """The largest number of templated stages admitted, in [0, limit] (admission is
    monotone in the number of stages: each adds cost)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if templated(plane, middle) == "":
            low = middle
        else:
            high = middle - 1
    return low


def in_force(plane: Plane) -> None:
    """Waits until the policy refuses a privileged template (the API server serves the
    CRDs and loads the policy asynchronously); at most 600 tries, one a second."""
    privileged = escalated(edit((f"{SC0}.privileged", True)))
    for _ in range(600):
        if "ValidatingAdmissionPolicy" in answer(plane, workflow(privileged)):
            return
        time.sleep(1)
    raise SystemExit("The policy did not come into force in 600 s: see the API server's log.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, default=ROOT / "out" / "cluster" / "bin")
    parser.add_argument("--dir", type=Path, default=None, help="the plane's folder")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="policy-cost-"))
    plane = start(directory, args.bin, nodes=())
    try:
        client = plane.client()
        for kind in KINDS:
            client.request(
                "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", render_crd(kind)
            )
        client.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        kubectl = ["kubectl", f"--kubeconfig={plane.kubeconfig}", "apply", "-f", str(POLICY)]
        subprocess.run(kubectl, check=True, capture_output=True)
        in_force(plane)
        largest = largest_admitted(plane, MAX_CR_STAGES)
        print(f"stages with the default template, the most admitted: {largest}")
        print(f"  one more: {templated(plane, largest + 1)[-160:]}")
        bare = answer(plane, workflow(*[None] * MAX_CR_STAGES))
        print(f"{MAX_CR_STAGES} stages without a template: {bare or 'admitted'}")
    finally:
        stop(plane)


if __name__ == "__main__":
    main()
