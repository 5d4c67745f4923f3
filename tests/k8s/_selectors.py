"""Label and field selectors as the Kubernetes API server understands them.

Label selectors support the equality-based (``a=b``, ``a==b``, ``a!=b``) and
the set-based (``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``) requirements.
Field selectors support ``=``, ``==`` and ``!=`` on dotted paths such as
``metadata.name``, ``metadata.namespace``, ``status.phase``, ``spec.nodeName``
or ``involvedObject.name`` (the real server allows only a per-kind subset of
fields; here every dotted path is accepted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, Any]], bool]


class SelectorError(ValueError):
    """A selector string that the API server would reject with 400 Bad Request."""


_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_KEY_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")


def _split_requirements(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parentheses in selector {selector!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SelectorError(f"unbalanced parentheses in selector {selector!r}")
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _check_key(key: str, selector: str) -> str:
    if not _KEY_RE.match(key):
        raise SelectorError(f"invalid label key {key!r} in selector {selector!r}")
    return key


def parse_label_selector(selector: str | None) -> Callable[[Mapping[str, str]], bool]:
    """Compile a label selector into a predicate over a labels dict."""
    if not selector:
        return lambda labels: True
    checks: list[Callable[[Mapping[str, str]], bool]] = []
    for req in _split_requirements(selector):
        if m := _SET_RE.match(req):
            key = _check_key(m["key"], selector)
            values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
            if m["op"] == "in":
                checks.append(lambda lb, k=key, vs=values: k in lb and lb[k] in vs)
            else:
                checks.append(lambda lb, k=key, vs=values: k not in lb or lb[k] not in vs)
        elif "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            _check_key(key, selector)
            checks.append(lambda lb, k=key, v=value: lb.get(k) != v)
        elif "==" in req or "=" in req:
            key, value = (s.strip() for s in re.split(r"==?", req, maxsplit=1))
            _check_key(key, selector)
            checks.append(lambda lb, k=key, v=value: lb.get(k) == v)
        elif req.startswith("!"):
            key = _check_key(req[1:].strip(), selector)
            checks.append(lambda lb, k=key: k not in lb)
        else:
            key = _check_key(req, selector)
            checks.append(lambda lb, k=key: k in lb)
    return lambda labels: all(check(labels) for check in checks)


def _dig(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _as_field_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(selector: str | None) -> Matcher:
    """Compile a field selector into a predicate over a whole object."""
    if not selector:
        return lambda obj: True
    checks: list[Matcher] = []
    for req in _split_requirements(selector):
        if "!=" in req:
            path, value = (s.strip() for s in req.split("!=", 1))
            negate = True
        elif "=" in req:
            path, value = (s.strip() for s in re.split(r"==?", req, maxsplit=1))
            negate = False
        else:
            raise SelectorError(f"invalid field selector requirement {req!r}")
        if not path:
            raise SelectorError(f"invalid field selector requirement {req!r}")
        if negate:
            checks.append(lambda o, p=path, v=value: _as_field_string(_dig(o, p)) != v)
        else:
            checks.append(lambda o, p=path, v=value: _as_field_string(_dig(o, p)) == v)
    return lambda obj: all(check(obj) for check in checks)
