"""The policy package imports in one direction: no circle, and no import inside a function
that hides one.

An import inside a function is fine for a heavy optional dependency (onnxruntime is
imported only when a model is built), but not to dodge a circle: a module that would
fail to import at the top of another because that one imports it back. The module-level
imports of `idlegate` are read from the sources (`ast`), imports under ``if
TYPE_CHECKING:`` left out (they never run); an import of ``a.b.c`` also runs the packages
``a.b`` and ``a`` that the importer is not inside.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import idlegate

ROOT = Path(idlegate.__file__).resolve().parent
POLICY = "idlegate.policy"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> Iterator[str]:
    """The idlegate modules `node` runs, in `importer`: each named module, and for ``from
    X import Y`` the module X.Y when Y is one."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = importer if _is_package(importer) else importer.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        names = [base, *(f"{base}.{a.name}" for a in node.names)]
    for name in names:
        if name in MODULES:
            yield name


def _with_packages(target: str, importer: str) -> Iterator[str]:
    """`target` and the packages above it that `importer` is not inside (importing a
    module first runs its packages' ``__init__``)."""
    parts = target.split(".")
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name in MODULES and name != importer and not importer.startswith(name + "."):
            yield name
    yield target


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


Imports = tuple[set[str], list[tuple[str, int]]]
"""A module's (module-level imports, (module, line) of each import inside a function)."""


def _imports(name: str, source: str | None = None) -> Imports:
    """(modules `name` imports at module level, (module, line) of each import inside a
    function), read from `source` (default: the module's file)."""
    tree = ast.parse(MODULES[name].read_text() if source is None else source)
    top: set[str] = set()
    local: list[tuple[str, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in _targets(child, name):
                    for module in _with_packages(target, name):
                        if in_function:
                            local.append((module, child.lineno))
                        else:
                            top.add(module)
            inner = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            visit(child, inner)

    visit(tree, False)
    return top, local


GRAPH = {name: _imports(name) for name in MODULES}


def _reaches(
    start: str, goal: str, local: bool = False, graph: dict[str, Imports] = GRAPH
) -> list[str] | None:
    """A path of module-level imports (`local`: and imports inside functions) from
    `start` to `goal` in `graph`, or None."""
    seen, stack = {start}, [[start]]
    while stack:
        path = stack.pop()
        top, inner = graph[path[-1]]
        for nxt in sorted(top | ({m for m, _ in inner} if local else set())):
            if nxt == goal:
                return [*path, nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append([*path, nxt])
    return None


def _policy_modules() -> list[str]:
    return sorted(m for m in MODULES if m == POLICY or m.startswith(POLICY + "."))


def test_no_policy_module_imports_itself_back_at_module_level() -> None:
    circles = []
    for name in _policy_modules():
        for target in GRAPH[name][0]:
            back = _reaches(target, name)
            if back is not None:
                circles.append(" -> ".join([name, *back]))
    assert circles == []


def _dodges(names: list[str], graph: dict[str, Imports] = GRAPH) -> list[str]:
    """Each import inside a function of `names` whose target imports the importer back,
    through module-level imports or other imports inside functions."""
    dodges = []
    for name in names:
        for target, line in graph[name][1]:
            back = _reaches(target, name, local=True, graph=graph)
            if target == name or back is not None:
                path = " -> ".join(back or [name])
                dodges.append(f"{name}:{line} imports {target}, which imports {path}")
    return dodges


def test_no_import_inside_a_policy_function_dodges_a_circle() -> None:
    assert _dodges(_policy_modules()) == []


def test_the_check_sees_a_circle_dodged_inside_a_function() -> None:
    # (the account module took the tie rule from the portfolio at a call: that circle;
    # the portfolio imports account at module level, so only the injected import closes it)
    account, portfolio = "idlegate.policy.account", "idlegate.policy.portfolio"
    source = (
        MODULES[account].read_text() + "\n\ndef _tie():\n    import idlegate.policy.portfolio\n"
    )
    graph = {**GRAPH, account: _imports(account, source)}
    assert portfolio not in graph[account][0]
    assert _dodges([account], GRAPH) == []
    assert [d.split(",")[0] for d in _dodges([account], graph)] == [
        f"{account}:{len(source.splitlines())} imports {portfolio}"
    ]


def test_the_check_follows_a_circle_through_other_imports_inside_functions() -> None:
    # a imports b at a call, b imports c at module level, c imports a at a call: neither
    # function's import alone meets a module-level path back, so the check must follow both
    graph: dict[str, Imports] = {
        "a": (set(), [("b", 3)]),
        "b": ({"c"}, []),
        "c": (set(), [("a", 7)]),
    }
    assert _dodges(["a", "b", "c"], graph) == [
        "a:3 imports b, which imports b -> c -> a",
        "c:7 imports a, which imports a -> b -> c",
    ]


def test_each_policy_module_imports_first_in_a_fresh_interpreter() -> None:
    """Each policy module imported as the first idlegate module of an interpreter (the
    others forgotten before each: an import order that only works when another module
    came first fails here)."""
    script = (
        "import importlib, sys\n"
        f"names = {_policy_modules()!r}\n"
        "bad = []\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] == 'idlegate']:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


KNOWN_CIRCLES: list[list[str]] = []
"""The circles of modules still there, each sorted; a new one fails the test below."""


def _circles(graph: dict[str, Imports] = GRAPH) -> list[list[str]]:
    """The strongly connected components of more than one module of `graph`, counting the
    imports inside functions (each sorted, in the order of their first module): every
    module of one imports every other, through a path of imports (Tarjan's, iterative)."""
    edges = {name: sorted(top | {m for m, _ in inner}) for name, (top, inner) in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(edges.get(target, ()))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                circle = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    circle.append(member)
                    if member == node:
                        break
                if len(circle) > 1:
                    found.append(sorted(circle))
    return sorted(found)


def test_no_idlegate_modules_import_each_other_in_a_circle() -> None:
    # a circle, even one closed by an import inside a function, makes a module that cannot
    # be read (or imported first) alone: issue 68's house has none but the known one
    assert _circles() == KNOWN_CIRCLES


def test_the_circle_check_finds_one_closed_inside_a_function() -> None:
    graph: dict[str, Imports] = {
        "a": ({"b"}, []),
        "b": (set(), [("c", 4)]),
        "c": ({"a"}, []),
        "d": ({"a"}, []),
    }
    assert _circles(graph) == [["a", "b", "c"]]
