"""What a task instance's worker pod requests, as far as Airflow's REST API tells it.

Under the KubernetesExecutor a task sizes its worker pod with ``executor_config={"pod_override":
V1Pod(...)}``, merged over the executor's pod template. The API gives each task instance's
``executor_config`` as text, Python's rendering of that dict (``str(dict)``: the pod as the
Kubernetes client's ``to_dict()`` writes it, snake_case keys, ``None`` for what is unset).
`instance_demand` reads it back (`ast.literal_eval`: literals only, nothing is run) and sizes
the pod override's containers as the kube-scheduler would (`idlegate.sim.resources.pod_request`:
containers summed, at least each init container, pod-level resources, overhead).

What the API does not show is not counted: the executor's pod template (its own requests, for
a container the override does not size), and the pod a KubernetesPodOperator starts beside its
worker. The operator, which sees the worker pods themselves, sizes them from the pods.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from idlegate.sim.resources import EMPTY, ResourceVector, pod_request

_CAMEL = {"init_containers": "initContainers", "restart_policy": "restartPolicy"}
"""The pod fields `pod_request` reads that the client's `to_dict()` writes in snake_case."""


class UnreadableConfig(ValueError):
    """An ``executor_config`` text that is not a literal dict (an object the API could
    only render by its name, say)."""


def instance_demand(executor_config: Any, where: str) -> ResourceVector:
    """What the worker pod of a task instance with this ``executor_config`` (the API's text,
    or the dict) requests; EMPTY without a pod override. UnreadableConfig for a text that
    is no literal; IdlegateError (naming `where`) for a request that is no quantity."""
    spec = pod_override_spec(executor_config)
    if spec is None:
        return EMPTY
    return pod_request(spec, f"{where}: executor_config.pod_override.spec")


def pod_override_spec(executor_config: Any) -> dict[str, Any] | None:
    """The pod spec of the pod override in a task instance's ``executor_config`` (the API's
    text, or the dict), in the API server's field names; None without one.
    UnreadableConfig for a text that is no literal."""
    config = _config(executor_config)
    override = config.get("pod_override") if isinstance(config, Mapping) else None
    spec = override.get("spec") if isinstance(override, Mapping) else None
    return _camel(spec) if isinstance(spec, Mapping) else None


def _config(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text in ("{}", "None"):
        return {}
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UnreadableConfig(text[:80]) from None


def _camel(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec's fields that size it, in the API server's names."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = _CAMEL.get(key, key)
        if name in ("containers", "initContainers") and isinstance(value, list):
            value = [
                {_CAMEL.get(k, k): v for k, v in c.items()} if isinstance(c, Mapping) else c
                for c in value
            ]
        out[name] = value
    return out
