"""What one pod of an Argo template requests: the pod Argo would create, as the kube-scheduler
sizes it.

Argo builds a template's pod from the template and the workflow; of what it builds, these
carry requests, and `template_demand` reads them into the pod spec that
`idlegate.sim.resources.pod_request` sizes (containers summed, at least each init
container, pod-level resources for what they name):

* the main container: a `container` or `script` template's, named ``main`` as Argo names
  it; a `containerSet`'s containers; the template's `sidecars` run beside it and its
  `initContainers` before it;
* pod-level resources: the template's `podResources`, else the workflow's;
* `podSpecPatch`: the workflow's, then the template's (Argo applies them in this order),
  each merged as a strategic merge patch merges a pod spec: mappings key by key, a list of
  containers container by name, any other value replaced.

Parameters the mapping can resolve (``{{inputs.parameters.X}}``, ``{{workflow.parameters.X}}``)
are substituted first. A request that names one it cannot resolve (an output of an earlier
step, say) is known only as the workflow runs: the stage then requests nothing, and a note
says so. Not counted: the `init` and `wait` containers Argo adds to every pod, whose requests
are the controller's configuration (its ``executor.resources``), not the manifest's; and the
pods of `resource` and `data` templates, which are Argo's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

import yaml

from idlegate.errors import IdlegateError
from idlegate.sim.resources import EMPTY, ResourceVector, pod_request

_UNRESOLVED = re.compile(r"\{\{.*?\}\}")
_BY_NAME = frozenset({"containers", "initContainers"})
"""Lists a strategic merge patch of a pod spec merges item by item, keyed by `name`."""


class UnknownRequest(Exception):
    """A request (or patch) names a parameter only the run settles."""


def template_demand(
    template: Mapping[str, Any],
    spec: Mapping[str, Any],
    substitute: Callable[[str], str],
    where: str,
) -> ResourceVector:
    """The effective request of one pod of `template` in the workflow `spec` (module
    docstring); `substitute` resolves the parameters it can in a text. Raises
    UnknownRequest when a request is known only as the workflow runs, and IdlegateError
    (naming `where`) for a request that is not a quantity."""
    pod = _pod(template)
    if pod is None:
        return EMPTY
    level = template.get("podResources") or spec.get("podResources")
    if isinstance(level, Mapping):
        pod["resources"] = dict(level)
    patches = [p for p in (spec.get("podSpecPatch"), template.get("podSpecPatch")) if _text(p)]
    for patch in patches:
        pod = _merge(pod, _patch(substitute(patch), where))
    try:
        return pod_request(_resolved(_sized(pod), substitute), _POD)
    except IdlegateError as exc:
        path, _, why = str(exc).partition(": ")
        said = _in_template(path, template, "spec.podResources" if level is not None else "")
        patched = " (with podSpecPatch)" if patches else ""
        raise IdlegateError(f"{where}: {said}{patched}: {why}") from None


_POD = "\0pod"
"""Where `pod_request` is told the pod is, to find what a message's path names."""


def _text(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def _in_template(path: str, template: Mapping[str, Any], workflow_level: str) -> str:
    """`path` into the pod `_pod` builds, as the path into the template a user wrote."""
    match = re.match(r"\0pod(?:\.(containers|initContainers)\[(\d+)\])?(.*)", path)
    if match is None:
        return path
    key, index, rest = match[1], int(match[2] or 0), match[3]
    if key is None:  # pod-level resources
        return (
            "podResources" if "podResources" in template else workflow_level
        ) + rest.removeprefix(".resources")
    if key == "initContainers":
        return f"initContainers[{index}]{rest}"
    if "containerSet" in template:
        return f"containerSet.containers[{index}]{rest}"
    main = "container" if "container" in template else "script"
    return f"{main}{rest}" if index == 0 else f"sidecars[{index - 1}]{rest}"


def _pod(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod spec of the template's containers, or None for a template whose pod is
    Argo's own (resource, data) or that runs none."""
    if isinstance(template.get("container"), Mapping):
        main = [{**template["container"], "name": "main"}]
    elif isinstance(template.get("script"), Mapping):
        main = [{**template["script"], "name": "main"}]
    elif isinstance(template.get("containerSet"), Mapping):
        main = list(_mappings(template["containerSet"].get("containers")))
    else:
        return None
    return {
        "containers": main + _mappings(template.get("sidecars")),
        "initContainers": _mappings(template.get("initContainers")),
    }


_SIZING = ("name", "resources", "restartPolicy")
"""A container's fields that bear on its pod's request (the rest, such as arguments that
name a step's output, do not)."""


def _sized(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Of `pod`, only what its request depends on."""
    out: dict[str, Any] = {
        key: [{k: c[k] for k in _SIZING if k in c} for c in _mappings(pod.get(key))]
        for key in _BY_NAME
    }
    for key in ("resources", "overhead"):
        if isinstance(pod.get(key), Mapping):
            out[key] = pod[key]
    return out


def _mappings(items: Any) -> list[dict[str, Any]]:
    return [dict(c) for c in items if isinstance(c, Mapping)] if isinstance(items, list) else []


def _patch(text: str, where: str) -> Mapping[str, Any]:
    if _UNRESOLVED.search(text):
        raise UnknownRequest
    try:
        patch = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise IdlegateError(
            f"{where}: podSpecPatch is not JSON or YAML ({exc}); write a pod spec patch "
            'such as {"containers": [{"name": "main", "resources": {...}}]}'
        ) from None
    if not isinstance(patch, Mapping):
        raise IdlegateError(f"{where}: podSpecPatch must be a mapping (a patch of the pod spec)")
    return patch


def _merge(base: Any, patch: Any, key: str = "") -> Any:
    """`patch` merged into `base` as a strategic merge patch of a pod spec is."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base.get(k), v, k) if k in base else v
        return out
    if key in _BY_NAME and isinstance(base, list) and isinstance(patch, list):
        out_list = list(base)
        names = [c.get("name") if isinstance(c, Mapping) else None for c in out_list]
        for item in patch:
            name = item.get("name") if isinstance(item, Mapping) else None
            if name is not None and name in names:
                i = names.index(name)
                out_list[i] = _merge(out_list[i], item)
            else:
                out_list.append(item)
        return out_list
    return patch


def _resolved(value: Any, substitute: Callable[[str], str]) -> Any:
    """`value` with its texts' parameters substituted; UnknownRequest if a text keeps a
    ``{{...}}`` only the run settles."""
    if isinstance(value, Mapping):
        return {k: _resolved(v, substitute) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v, substitute) for v in value]
    if isinstance(value, str) and "{{" in value:
        text = substitute(value)
        if _UNRESOLVED.search(text):
            raise UnknownRequest
        return text
    return value
