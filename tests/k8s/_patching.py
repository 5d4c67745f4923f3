"""The two PATCH flavours the operator sends, on plain JSON documents: the tests' only copy.

* ``application/merge-patch+json`` (RFC 7386): :func:`merge_patch`; ``null`` deletes a key,
  lists are replaced whole.
* ``application/json-patch+json`` (RFC 6902): :func:`apply_json_patch`, through the
  ``jsonpatch`` library (a dependency of kmock). A failed ``test`` op, as the operator's
  gate removal uses to guard the gate's index, raises :class:`PatchFailed`: the API server
  answers 422 and so must every fake of it.

Both return a new document and leave their arguments unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer


class PatchFailed(ValueError):
    """A patch that does not apply to the document (the API server's 422 Unprocessable)."""


def merge_patch(doc: Any, patch: Any) -> Any:
    """`doc` with the RFC 7386 merge patch `patch` applied."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(doc) if isinstance(doc, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_json_patch(doc: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """`doc` with the RFC 6902 operations `ops` applied; PatchFailed if any does not apply."""
    if not isinstance(ops, list) or not all(isinstance(op, Mapping) for op in ops):
        raise PatchFailed("a JSON patch must be a list of operation objects")
    try:
        result = jsonpatch.apply_patch(copy.deepcopy(dict(doc)), ops)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise PatchFailed(f"the JSON patch does not apply: {exc}") from exc
    if not isinstance(result, dict):
        raise PatchFailed("the JSON patch replaced the whole document with a non-object")
    return result
