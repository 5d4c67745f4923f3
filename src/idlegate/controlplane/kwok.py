"""KWOK's part of the local control plane: the fake nodes and the stages their pods go through.

KWOK (sigs.k8s.io/kwok) plays every kubelet: it keeps the Nodes it manages Ready (their
Leases renewed) and moves each pod bound to one of them through *stages*, each a selector
on the pod, a delay and the status to write. Ours give a task pod the life the operator's
pod contract promises and the tests' simulated kubelet (tests/k8s/kubelet.py) gives it:

1. ``pod-start``: a pod bound to a node (so never while it is gated: a gated pod is not
   scheduled) is ``Running`` at once, its containers started, its IP given;
2. ``pod-fail``: a first attempt (annotation ``idlegate.io/attempt: "0"``) whose template
   carries ``kwok.idlegate.io/exit-code`` ends ``Failed`` with that code after its run time,
   so a test can make first tries fail and watch the retries;
3. ``pod-complete``: any other running pod ends ``Succeeded`` after its run time: the first
   container's ``TASK_DURATION_SECONDS`` (default 1 s) divided by the plane's time factor
   (1 for a user; the end-to-end tests run the operator's clock and the pods 20 times
   faster, as they do on the test API server);
4. ``pod-stop``: a running pod being deleted (an eviction, a graceful delete) is stopped
   after :data:`STOP_SECONDS` (over the time factor): ``Failed``, exit code 143, as
   SIGTERM leaves a process;
5. ``pod-delete``: a pod being deleted that has ended (or never ran) and has no finalizer
   left is removed, as the kubelet does once its containers are gone.
"""

from __future__ import annotations

from typing import Any

NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""The annotation (value ``fake``) that puts a Node in KWOK's hands."""
EXIT_CODE_ANNOTATION = "kwok.idlegate.io/exit-code"
STOP_SECONDS = 1.0
"""How long a deleted running pod takes to stop (a process handling SIGTERM)."""

_RUN_TIME = (
    '((((.spec.containers[0].env // []) | map(select(.name == "TASK_DURATION_SECONDS"))'
    ' | .[0].value) // "1") | tonumber / {factor} | tostring) + "s"'
)
"""jq: a pod's run time as a Go duration, from its first container's environment."""

_STARTED = """\
{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  imageID: ""
  ready: true
  restartCount: 0
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName false ( or .metadata.uid "" ) ( or .metadata.name "" ) \
( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""


def _ended(phase: str, code: str, reason: str) -> str:
    """A status template: every container terminated with `code`, the pod in `phase`."""
    return (
        "{{ $now := Now }}\n"
        "conditions:\n"
        '- {type: Ready, status: "False", lastTransitionTime: {{ $now | Quote }}}\n'
        '- {type: ContainersReady, status: "False", lastTransitionTime: {{ $now | Quote }}}\n'
        "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- name: {{ .name | Quote }}\n"
        "  image: {{ .image | Quote }}\n"
        '  imageID: ""\n'
        "  ready: false\n"
        "  restartCount: 0\n"
        "  started: false\n"
        f"  state: {{terminated: {{exitCode: {code}, reason: {reason}, "
        "startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}\n"
        "{{ end }}\n"
        f"phase: {phase}\n"
    )


def _pod_stage(
    name: str, matches: list[dict[str, Any]], next_: dict[str, Any], **delay: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": matches},
        "next": next_,
    }
    if delay:
        spec["delay"] = delay
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


def _is(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _not_in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def _exists(key: str, yes: bool = True) -> dict[str, Any]:
    return {"key": key, "operator": "Exists" if yes else "DoesNotExist"}


_FIRST_TRY_FAILS = [
    _exists(f'.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'),
    _is('.metadata.annotations["idlegate.io/attempt"]', "0"),
]


def stages(time_factor: float = 1.0) -> list[dict[str, Any]]:
    """Every Stage, node and pod, for a plane whose pods run `time_factor` times faster."""
    run_time = {"durationFrom": {"expressionFrom": _RUN_TIME.format(factor=time_factor)}}
    alive = [_exists(".metadata.deletionTimestamp", False)]
    running = [*alive, _is(".status.phase", "Running")]
    exit_code = f'{{{{ index $.metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}'
    stop_ms = max(1, round(STOP_SECONDS * 1000 / time_factor))
    return [
        *node_stages(),
        _pod_stage(
            "pod-start",
            [*alive, _exists(".status.podIP", False)],
            {"statusTemplate": _STARTED},
        ),
        _pod_stage(
            "pod-fail",
            [*running, *_FIRST_TRY_FAILS],
            {"statusTemplate": _ended("Failed", exit_code, "Error")},
            **run_time,
        ),
        _pod_stage(
            "pod-complete",
            [*running, _exists(f'.metadata.annotations["{EXIT_CODE_ANNOTATION}"]', False)],
            {"statusTemplate": _ended("Succeeded", "0", "Completed")},
            **run_time,
        ),
        _pod_stage(
            "pod-complete-retry",
            [
                *running,
                _exists(f'.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'),
                _not_in('.metadata.annotations["idlegate.io/attempt"]', "0"),
            ],
            {"statusTemplate": _ended("Succeeded", "0", "Completed")},
            **run_time,
        ),
        _pod_stage(
            "pod-stop",
            [_exists(".metadata.deletionTimestamp"), _is(".status.phase", "Running")],
            {"statusTemplate": _ended("Failed", "143", "Error")},
            durationMilliseconds=stop_ms,
        ),
        _pod_stage(
            "pod-delete",
            [
                _exists(".metadata.deletionTimestamp"),
                _exists(".metadata.finalizers", False),
                _not_in(".status.phase", "Running"),
            ],
            {"delete": True},
        ),
    ]


def node_stages() -> list[dict[str, Any]]:
    """A node KWOK manages is Ready at once and stays so (its Lease renewed by KWOK)."""
    ready = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
- {type: InternalIP, address: {{ NodeIP | Quote }}}
- {type: Hostname, address: {{ NodeName | Quote }}}
allocatable:
{{ YAML .status.capacity 1 }}
capacity:
{{ YAML .status.capacity 1 }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version }}
phase: Running
"""
    return [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "node-ready"},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Node"},
                "selector": {
                    "matchExpressions": [
                        {
                            "key": '.status.conditions.[] | select(.type == "Ready") | .status',
                            "operator": "NotIn",
                            "values": ["True"],
                        }
                    ]
                },
                "next": {"statusTemplate": ready},
            },
        }
    ]


def node(name: str, cpu: str, memory: str, gpu: int = 0, pods: int = 250) -> dict[str, Any]:
    """A Node for KWOK to manage, with `cpu`, `memory` and `gpu` (``nvidia.com/gpu``)."""
    capacity: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpu:
        capacity["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }
