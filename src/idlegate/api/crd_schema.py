"""JSON Schema (pydantic's) -> Kubernetes structural schema, for every CRD of the operator.

:mod:`idlegate.api.crd` assembles the CustomResourceDefinitions; the models of each kind
(:mod:`.status`, :mod:`.cron_spec`, :mod:`.pool_spec`) are converted here. The conversion
fails loudly on anything Kubernetes cannot express, so a model change is caught when the CRD
is generated rather than at ``kubectl apply``. No kopf, no kubernetes imports.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

# -- JSON Schema -> Kubernetes structural schema ---------------------------------------------

# the keywords of JSONSchemaProps kept as they are; anything else pydantic emits is an error,
# so a model change that Kubernetes cannot express fails here rather than at `kubectl apply`
_KEPT = frozenset(
    {
        "description",
        "type",
        "format",
        "enum",
        "default",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "required",
        "x-kubernetes-int-or-string",
    }
)
INT_OR_STRING = "x-kubernetes-int-or-string"
"""A node of this mark (a Kubernetes quantity: ``2`` or ``500m``) takes an integer or a
string; it stays without a type, as the structural schema rules allow it."""
_DROPPED = frozenset({"title", "$defs", "definitions", "examples"})

# key order in the YAML: what a reader looks for first
_ORDER = (
    "description",
    "type",
    "format",
    "nullable",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "required",
    "properties",
    "additionalProperties",
    "items",
)


def _resolve(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.rsplit("/", 1)[-1]
    if name in seen:
        raise ValueError(f"recursive model {name!r} cannot be inlined into a structural schema")
    if name not in defs:
        raise ValueError(f"unresolvable $ref {ref!r}")
    # sibling keys of a $ref (e.g. a field's description) win over the referenced model's
    merged = {**copy.deepcopy(defs[name]), **{k: v for k, v in node.items() if k != "$ref"}}
    return _resolve(merged, defs, (*seen, name))


def _infer_type(values: list[Any]) -> str:
    kinds = {type(v) for v in values}
    if kinds <= {str}:
        return "string"
    if kinds <= {bool}:
        return "boolean"
    if kinds <= {int}:
        return "integer"
    if kinds <= {int, float}:
        return "number"
    raise ValueError(f"enum of mixed types {sorted(k.__name__ for k in kinds)}")


def _convert(
    node: dict[str, Any],
    defs: dict[str, Any],
    path: str,
    seen: tuple[str, ...] = (),
    *,
    nullable_optionals: bool = True,
) -> dict[str, Any]:
    """Convert one pydantic JSON Schema node (recursively) into a structural schema node.

    ``X | None`` becomes ``nullable: true`` when `nullable_optionals`, else plain ``X`` (for
    status fields, where None means "absent": the operator dumps with exclude_none).
    """
    node, nullable, seen = _flatten(node, defs, path, seen)

    def sub(value: dict[str, Any], where: str) -> dict[str, Any]:
        return _convert(value, defs, where, seen, nullable_optionals=nullable_optionals)

    out: dict[str, Any] = {"nullable": True} if nullable and nullable_optionals else {}
    if "const" in node:
        node.setdefault("enum", [node.pop("const")])
    if "enum" in node and "type" not in node:
        node["type"] = _infer_type(node["enum"])
    for key, value in node.items():
        if key in _KEPT:
            out[key] = copy.deepcopy(value)
        elif key == "properties":
            out[key] = {name: sub(schema, f"{path}.{name}") for name, schema in value.items()}
        elif key == "items":
            out[key] = sub(value, f"{path}[]")
        elif key == "additionalProperties" and isinstance(value, dict):
            out[key] = sub(value, f"{path}{{}}")
        elif key not in _DROPPED:
            _keyword(node, key, value, out, path)
    if out.get("type") == "object" and not {"properties", "additionalProperties"} & out.keys():
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "type" not in out and not out.get(INT_OR_STRING):
        raise ValueError(f"{path}: no type (a structural schema needs one on every node)")
    return _ordered(out)


def _flatten(
    node: dict[str, Any], defs: dict[str, Any], path: str, seen: tuple[str, ...]
) -> tuple[dict[str, Any], bool, tuple[str, ...]]:
    """`node` with its $ref inlined and its one non-null branch of ``anyOf``/``oneOf``
    merged in; whether a null branch was dropped; the models inlined on the way."""
    seen_here = seen
    if "$ref" in node:
        seen_here = (*seen, node["$ref"].rsplit("/", 1)[-1])
        node = _resolve(node, defs, seen)
    node = dict(node)
    nullable = False
    for union in ("anyOf", "oneOf"):
        if union not in node:
            continue
        if node.get(INT_OR_STRING):  # (its branches are what the mark says)
            del node[union]
            continue
        branches = node.pop(union)
        non_null = [b for b in branches if b.get("type") != "null"]
        if len(non_null) != 1:
            raise ValueError(
                f"{path}: {union} of {len(non_null)} non-null schemas is not structural; "
                "use one type (or a discriminated model flattened by hand)"
            )
        nullable = len(non_null) < len(branches)
        branch = _resolve(non_null[0], defs, seen_here)
        if "$ref" in non_null[0]:
            seen_here = (*seen_here, non_null[0]["$ref"].rsplit("/", 1)[-1])
        node = {**branch, **node}  # the field's own description/default win
    if node.get("default", 0) is None:
        del node["default"]  # absent and null mean the same to the models
    return node, nullable, seen_here


def _keyword(node: dict[str, Any], key: str, value: Any, out: dict[str, Any], path: str) -> None:
    """The structural form of a JSON Schema keyword that is not kept as it is."""
    if key in ("exclusiveMinimum", "exclusiveMaximum"):
        # JSON Schema 2020-12 gives the bound; OpenAPI v3.0 (Kubernetes) a boolean flag
        bound = "minimum" if key == "exclusiveMinimum" else "maximum"
        if bound in node:
            raise ValueError(f"{path}: both {bound} and {key}")
        out[bound] = value
        out[key] = True
    elif key == "additionalProperties":
        if value is True:
            if node.get("properties"):
                raise ValueError(f"{path}: properties with additionalProperties: true")
            # a free-form object (the pod template, kopf's bookkeeping): keep it whole
            out["x-kubernetes-preserve-unknown-fields"] = True
        # False: Kubernetes forbids it; unknown fields are pruned (or rejected by kubectl's
        # strict field validation) instead, which matches extra="forbid"
    elif key == "uniqueItems":
        if value:
            out["x-kubernetes-list-type"] = "set"
    else:
        raise ValueError(f"{path}: JSON Schema keyword {key!r} has no structural equivalent")


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    rank = {k: i for i, k in enumerate(_ORDER)}
    return dict(sorted(node.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def reorder(*nodes: dict[str, Any]) -> None:
    """Put the keys of nodes changed after conversion back into the canonical order, in place."""
    for node in nodes:
        ordered = _ordered(node)
        node.clear()
        node.update(ordered)


def structural_schema(model: type[BaseModel], *, nullable_optionals: bool = True) -> dict[str, Any]:
    """The model's JSON Schema (by alias, validation mode) as a Kubernetes structural schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _convert(raw, defs, model.__name__, nullable_optionals=nullable_optionals)


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The node at a dotted path of property names; `[]` steps into list items."""
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def add_rules(node: dict[str, Any], *rules: dict[str, str]) -> None:
    node.setdefault("x-kubernetes-validations", []).extend(rules)


def conditions_overlay(status: dict[str, Any]) -> None:
    """A status written by the operator, whose conditions are a map list keyed by type."""
    status["description"] = "Observed state, written by the idlegate operator (status subresource)."
    conditions = at(status, "conditions")
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    reorder(status, conditions)


def resource_schema(
    description: str, spec: dict[str, Any], status: dict[str, Any], name_rule: dict[str, str]
) -> dict[str, Any]:
    """The openAPIV3Schema of one of our kinds: its spec, its status and a CEL rule on its
    name's length."""
    return {
        "description": description,
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "x-kubernetes-validations": [name_rule],
    }
