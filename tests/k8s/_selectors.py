"""Label and field selectors of the equality kind (``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``).

Those are what the operator, kopf and ``kubectl describe`` send; a set-based term (``in``,
``notin``) is refused with :class:`SelectorError` rather than matched wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_TERM = re.compile(r"^(?P<neg>!)?(?P<key>[A-Za-z0-9_./-]+)(?:(?P<op>==|!=|=)(?P<value>[^,]*))?$")


Matcher = Callable[[Callable[[str], str | None]], bool]
"""A selector's predicate over a lookup (key -> value or None)."""


class SelectorError(ValueError):
    """A selector the test API server does not understand (its 400 Bad Request)."""


def matcher(selector: str | None) -> Matcher:
    """A predicate over a lookup (key -> value or None) for `selector` (None: everything)."""
    terms = []
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        match = _TERM.match(term)
        if match is None or (match["neg"] and match["op"]):
            raise SelectorError(f"the test API server understands no selector term {term!r}")
        terms.append(
            (match["key"], match["op"] or ("absent" if match["neg"] else "present"), match["value"])
        )

    def matches(lookup: Callable[[str], str | None]) -> bool:
        for key, op, value in terms:
            found = lookup(key)
            if (op == "present" and found is None) or (op == "absent" and found is not None):
                return False
            if (op in ("=", "==") and found != value) or (op == "!=" and found == value):
                return False
        return True

    return matches


def field(obj: Mapping[str, Any], path: str) -> str | None:
    """The string form of `obj`'s field at the dotted `path`, as field selectors compare it."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return str(value).lower() if isinstance(value, bool) else str(value)
