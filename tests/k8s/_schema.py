"""Structural-schema handling of custom resources: defaulting, pruning, validation.

The real API server prunes every field that a CRD's ``openAPIV3Schema`` does not
declare (unless ``x-kubernetes-preserve-unknown-fields: true``), applies
``default:`` values, and rejects invalid objects with 422 Invalid. A classic
operator bug is writing ``status`` fields that the schema does not declare: a
real cluster silently drops them, and so does this emulator.

Validation uses ``jsonschema`` (Draft 4 semantics, the OpenAPI v3 flavour) when
it is installed; otherwise only defaulting and pruning are done.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

try:  # jsonschema is a dev dependency of the project; validation is skipped without it.
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def _preserves(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def prune(value: Any, schema: Mapping[str, Any] | None, *, root: bool = False) -> Any:
    """Drop the fields unknown to a structural schema (in place; returns the value)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if (root or embedded) and key in _ROOT_KEEP:
                continue
            if props is not None and key in props:
                prune(value[key], props[key])
            elif isinstance(additional, Mapping):
                prune(value[key], additional)
            elif additional is True or _preserves(schema):
                continue
            else:
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            prune(item, schema["items"])
    return value


def apply_defaults(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """Fill in ``default:`` values of absent properties (in place; returns the value)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                apply_defaults(value[key], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key, sub_value in value.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(sub_value, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            apply_defaults(item, schema["items"])
    return value


def _to_json_schema(schema: Any) -> Any:
    """Translate the OpenAPI v3 flavour (nullable, int-or-string) into JSON Schema."""
    if isinstance(schema, list):
        return [_to_json_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties", "definitions"):
            result[key] = {k: _to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            result[key] = _to_json_schema(value)
        elif key.startswith("x-kubernetes-") or key in ("nullable", "format", "default"):
            continue
        else:
            result[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        result.pop("type", None)
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in result:
        types = result["type"] if isinstance(result["type"], list) else [result["type"]]
        result["type"] = [*types, "null"]
    return result


def validate(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> list[str]:
    """Return the human-readable validation errors (empty if valid or not checkable)."""
    if schema is None or jsonschema is None:
        return []
    body = {k: v for k, v in obj.items() if k not in _ROOT_KEEP}
    root_schema = dict(_to_json_schema(schema))
    props = {k: v for k, v in (root_schema.get("properties") or {}).items() if k not in _ROOT_KEEP}
    root_schema["properties"] = props
    root_schema["required"] = [r for r in root_schema.get("required", []) if r not in _ROOT_KEEP]
    if not root_schema["required"]:
        del root_schema["required"]
    validator = jsonschema.Draft4Validator(root_schema)
    errors: list[str] = []
    for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in error.absolute_path) or "<root>"
        errors.append(f"{path}: Invalid value: {error.message}")
    return errors
