"""The guards every reader of a user's YAML or JSON document goes through (issue 93, items
8 and 9): a key given twice (`DuplicateKey`), a document nested deeper than `MAX_DEPTH`
lists and mappings (`TooDeep`: a 5,000-deep list was a RecursionError's traceback), and
aliases that expand to more than `MAX_ALIAS_NODES` nodes beyond the document's own
(`TooManyAliases`: a 9-level "billion laughs" ran ``lint`` to 2.3 GB).

YAML is read with `YamlLoader` (or a loader mixing in `GuardedYaml`), JSON with
`json_document`: each refusal is one sentence with its place, never a traceback.
Kubernetes refuses the same shapes (its YAML reader bounds alias expansion; no manifest
nests a hundred deep)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from idlegate.errors import SpecError

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings a document may have (a DagWorkflow's pod
template nests about 15 deep)."""
MAX_ALIAS_NODES = 1_000_000
"""Most nodes aliases may add to a YAML document beyond its own."""


class YamlRefusal(yaml.constructor.ConstructorError, SpecError):
    """A YAML document a guard refuses: a YAML error, so that it leaves the loader, and a
    SpecError, so that a reader may raise it as it is; says its place (`at`), not PyYAML's
    own message ("while constructing a mapping in "<unicode string>" ...")."""

    def __init__(self, sentence: str, mark: yaml.Mark | None) -> None:
        super().__init__(None, None, sentence, mark)
        self.line: int = mark.line + 1 if mark else 1
        """Where it is (counted from 1)."""
        self.column: int = mark.column + 1 if mark else 1

    @property
    def sentence(self) -> str:
        """What is wrong and how to fix it, without the place."""
        return str(self.problem)

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.sentence}"

    def at(self, where: str) -> str:
        """The error in `where` (a file): ``FILE line 13, column 7: the key ...``."""
        return f"{where} {self}"


class DuplicateKey(YamlRefusal):
    """A key given twice in one mapping: PyYAML keeps the last, so a repeated ``tasks:``
    would run silently with the other value; kubectl refuses it."""

    def __init__(self, key: Any, mark: yaml.Mark) -> None:
        super().__init__(f"the key {key!r} is given twice in one mapping; keep one", mark)


def too_deep() -> str:
    """The sentence of a document nested too deep."""
    return (
        f"the document nests lists and mappings more than {MAX_DEPTH} deep, which no "
        "manifest, history or config does; check how it was made"
    )


class TooDeep(YamlRefusal):
    """A document nested deeper than `MAX_DEPTH`."""

    def __init__(self, mark: yaml.Mark | None) -> None:
        super().__init__(too_deep(), mark)


class TooManyAliases(YamlRefusal):
    """Aliases that expand a document by more than `MAX_ALIAS_NODES` (or into itself)."""

    def __init__(self, mark: yaml.Mark | None, cycle: bool = False) -> None:
        why = (
            "an alias refers to a node that holds it, so the document never ends"
            if cycle
            else f"its aliases (*name) expand it by more than {MAX_ALIAS_NODES:,} nodes"
        )
        super().__init__(f"{why}; write the repeated parts out, or fewer of them", mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_node(root: yaml.Node) -> None:
    """Raise `TooDeep` or `TooManyAliases` for a composed document. Each node is visited
    once (an alias is the same node met again): its height and expanded size are counted
    from its children's, without recursion."""
    height: dict[int, int] = {}
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            height[key] = 1 + max((height[id(k)] for k in kids), default=0)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            on_path.discard(key)
            if height[key] > MAX_DEPTH:
                raise TooDeep(node.start_mark)
            continue
        if key in height:
            continue
        if key in on_path:
            raise TooManyAliases(node.start_mark, cycle=True)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in height)
    if size[id(root)] - len(size) > MAX_ALIAS_NODES:
        raise TooManyAliases(root.start_mark)


class GuardedYaml:
    """A YAML loader's mix-in: refuses a key given twice (`DuplicateKey`), a document too
    deep (`TooDeep`, before PyYAML's own composer recurses out of the stack) and an alias
    bomb (`TooManyAliases`, before anything walks its expansion)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # (the pure-Python composer's)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise TooDeep(self.peek_event().start_mark)  # type: ignore[attr-defined]
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        check_node(node)
        return super().construct_document(node)  # type: ignore[misc]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may repeat keys
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            if key in seen:
                raise DuplicateKey(key, key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class YamlLoader(GuardedYaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader where PyYAML was built with it (the same documents, parsed
    several times faster: large history files are YAML too), guarded (`GuardedYaml`)."""


class PyYamlLoader(GuardedYaml, yaml.SafeLoader):
    """PyYAML's own safe loader, guarded: its messages are the ones lint quotes."""


EXPONENT = re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$")
"""A number with an exponent and no dot (``1e3``): a float to Kubernetes (YAML 1.2 and
JSON), a string to PyYAML's YAML 1.1, which then said ``taskDurationSeconds: 1e3`` "must
be a number of seconds"."""
for _loader in (YamlLoader, PyYamlLoader):
    _loader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT, list("-+0123456789"))


def _depth_exceeded_at(text: str) -> int:
    """Where in JSON `text` the nesting first passes `MAX_DEPTH` (0 if nowhere)."""
    depth, in_string, escaped = 0, False, False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif c in "]}":
            depth -= 1
    return 0


def _depth(doc: Any) -> int:
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return deepest


def json_document(text: str) -> Any:
    """`text` parsed as JSON, or json.JSONDecodeError (which every JSON reader reports
    with its place) when it is not JSON or nests deeper than `MAX_DEPTH`."""
    try:
        doc = json.loads(text)
    except RecursionError:
        doc = None
    else:
        if _depth(doc) <= MAX_DEPTH:
            return doc
    raise json.JSONDecodeError(too_deep(), text, _depth_exceeded_at(text))
