"""The three PATCH flavours of the Kubernetes API, applied to plain JSON dicts.

* ``application/merge-patch+json``: RFC 7386 (``null`` deletes, lists replace).
* ``application/json-patch+json``: RFC 6902 via the ``jsonpatch`` library
  (a dependency of kmock); a failed ``test`` op raises :class:`PatchFailed`.
* ``application/strategic-merge-patch+json``: a practical subset of the
  strategic merge patch: merge keys for the well-known list fields of pods
  and metadata (containers, env, volumes, schedulingGates, conditions,
  ownerReferences...), a union for ``finalizers``, and the ``$patch``,
  ``$retainKeys``, ``$deleteFromPrimitiveList/…`` and ``$setElementOrder/…``
  directives (the last one is accepted and ignored). Other lists replace,
  exactly as with the merge patch.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer


class PatchFailed(ValueError):
    """A patch that cannot be applied: the server answers 422 Unprocessable Entity."""


class PatchMalformed(ValueError):
    """A patch body of the wrong shape: the server answers 400 Bad Request."""


# Field name → merge key, for lists of dicts in strategic merge patches.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "readinessGates": "conditionType",
    "hostAliases": "ip",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}

# Lists of scalars that are merged as sets (patchStrategy=merge on primitives).
PRIMITIVE_MERGE_LISTS: frozenset[str] = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch; returns a new value (no mutation)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch; raises :class:`PatchFailed` on any failure."""
    if not isinstance(ops, list) or not all(isinstance(op, Mapping) for op in ops):
        raise PatchMalformed("a JSON patch must be a list of operation objects")
    try:
        result = jsonpatch.apply_patch(copy.deepcopy(dict(target)), ops, in_place=False)
    except jsonpatch.JsonPatchTestFailed as e:
        raise PatchFailed(f"the JSON patch test operation failed: {e}") from e
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise PatchFailed(f"the JSON patch cannot be applied: {e}") from e
    if not isinstance(result, dict):
        raise PatchFailed("the JSON patch replaced the whole object with a non-object")
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch (see the module docstring for the subset)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    retain_keys = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, Mapping):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    if isinstance(retain_keys, list):
        result = {k: v for k, v in result.items() if k in retain_keys}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current_list: list[Any] = list(current) if isinstance(current, list) else []
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, Mapping) and "$patch" in i)]
    if field in PRIMITIVE_MERGE_LISTS:
        merged = list(current_list)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, Mapping) for item in patch):
        return [strategic_merge_patch(None, item) for item in patch]
    merged = [copy.deepcopy(item) for item in current_list]
    for item in patch:
        if key not in item:
            merged.append(copy.deepcopy(item))
            continue
        index = next(
            (
                i
                for i, old in enumerate(merged)
                if isinstance(old, Mapping) and old.get(key) == item[key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge_patch(None, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged
