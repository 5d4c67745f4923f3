"""The layers import in one direction: the simulator core stays pure."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HEAVY = ("torch", "onnxruntime", "kopf", "kubernetes", "apscheduler", "prometheus_client")


def _loaded_after(imports: str) -> set[str]:
    code = f"import sys\n{imports}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in out.stdout.split()}


def test_the_simulator_core_imports_nothing_heavy():
    loaded = _loaded_after(
        "import idlegate.sim.cluster, idlegate.sim.engine, idlegate.sim.workloads, "
        "idlegate.sim.tpch, idlegate.sim.metrics"
    )
    assert not loaded & set(HEAVY)


@pytest.mark.parametrize(
    "module",
    ["idlegate.policy", "idlegate.policy.heuristics", "idlegate.evaluation", "idlegate.cli"],
)
def test_policies_and_cli_do_not_pull_in_torch_or_kopf(module):
    assert not _loaded_after(f"import {module}") & {"torch", "kopf", "kubernetes"}


def test_the_default_portfolio_replays_without_torch():
    # default, what the operator's image runs, replays its candidates (the ONNX policy
    # among them) in the simulator: onnxruntime, never torch
    loaded = _loaded_after(
        "from idlegate.policy import make_scheduler\n"
        "from idlegate.sim.engine import simulate\n"
        "from idlegate.sim.workloads import build_workload\n"
        "brain = make_scheduler('default?min_window=4&every=4&window=8')\n"
        "simulate(build_workload('synthetic', 0, num_jobs=12), brain, 0)\n"
        "assert any('learned:default' in c.scores for c in brain.rounds)"
    )
    assert "onnxruntime" in loaded and not loaded & {"torch", "kopf", "kubernetes"}


def test_evaluation_imports_nothing_heavy():
    # onnxruntime loads only when a learned spec is built; matplotlib only when a plot is drawn
    loaded = _loaded_after(
        "import idlegate.evaluation, idlegate.evaluation.console, idlegate.evaluation.plots"
    )
    assert not loaded & {*HEAVY, "matplotlib"}


LOWER_LAYERS = ("sim", "policy", "training", "operator", "integrations")


@pytest.mark.parametrize("layer", LOWER_LAYERS)
def test_lower_layers_never_import_evaluation_or_the_cli(layer):
    # evaluation sits above sim and policy, the CLI above everything: an import the other
    # way round would make the layers circular
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / layer
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                if name.startswith(("idlegate.evaluation", "idlegate.cli")):
                    offenders.append(f"{path.relative_to(root.parent)}: {name}")
    assert offenders == []


def test_evaluation_imports_only_lower_layers():
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "evaluation"
    allowed = (
        "idlegate.sim",
        "idlegate.policy",
        "idlegate.evaluation",
        "idlegate.errors",
        "idlegate.config",  # the configs' base (pydantic only)
        "idlegate.parallel",  # the task pools (local processes or Ray), imports nothing heavy
        "idlegate.progress",  # progress lines on stderr, the standard library only
        "idlegate.textfiles",  # reading a user's text file, the standard library only
    )
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("idlegate."):
                assert node.module.startswith(allowed), f"{path.name}: {node.module}"


def test_the_simulator_asks_no_other_systems_api():
    # sim maps what other systems say (Argo's manifests, Airflow's REST answers) as dicts;
    # asking them over HTTP is idlegate.integrations', which sits above
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "sim"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "idlegate.integrations"
            ):
                offenders.append(f"{path.relative_to(root.parent)}: {node.module}")
    assert offenders == []


def _imports(root: Path) -> list[tuple[str, str]]:
    """(file under src/idlegate, module imported) of every import in the `root` package,
    those under TYPE_CHECKING and inside functions included."""
    src = Path(__file__).resolve().parents[1] / "src" / "idlegate"
    found = []
    for path in sorted((src / root).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            found += [(str(path.relative_to(src)), name) for name in names]
    return found


def _offenders(root: str, *banned: str) -> list[str]:
    return [f"{where}: {name}" for where, name in _imports(Path(root)) if name.startswith(banned)]


@pytest.mark.parametrize("room", ["operator/core", "operator/kinds"])
def test_the_operator_core_imports_neither_edge_nor_features_nor_decisions(room):
    # the core (and the job kinds it holds) is what happened in, intents out: nothing it
    # imports may reach the API, a clock, or a module that calls back into it
    banned = ("idlegate.operator.edge", "idlegate.operator.features", "idlegate.operator.decisions")
    assert _offenders(room, *banned) == []


def _rounds_asked(root: Path) -> list[str]:
    """The calls of a round (``.schedule()``) in the modules under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if call and node.func.attr == "schedule":
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_job_kinds_hand_the_pool_what_to_do_and_never_call_its_round():
    # issue 94: a kind's step (a pod seen, a write refused) called back into the pool's
    # `schedule()`; it returns what the pool is to do (`Then`), and the core does it
    # (`Core.then`). Nor is the DagWorkflow kind named "admission": that is the queues'
    # (`sim/admission.py`)
    operator = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "operator"
    assert _rounds_asked(operator / "kinds") == []
    from idlegate.operator.kinds.protocol import Pool

    assert not hasattr(Pool, "schedule")
    assert [p.name for p in operator.rglob("admission*.py")] == []


def test_the_round_finder_finds_a_kind_that_asks_for_a_round(tmp_path):
    (tmp_path / "workflow.py").write_text("def observe(pool, pod):\n    pool.schedule()\n")
    assert _rounds_asked(tmp_path) == ["workflow.py:2: pool.schedule()"]


WRITE_PATH = {
    "applier.py": {"lanes", "writes", "recorder", "kube"},  # (and what is not the edge)
    "recorder.py": {"lanes", "writes", "kube"},
    "lanes.py": {"writes", "kube"},
    "writes.py": {"kube"},
    "kube.py": set(),
}
"""The write path, top to bottom: each module and the edge modules it may import."""


def test_the_write_path_goes_down_one_way():
    # issue 94: `Applier.apply` visited the applier, the pods' manifests, the API client
    # and the evictions and came back up (the lanes ran the applier's own closures); now
    # the applier turns intents into ops, the lanes run them, the writes make the requests
    # and hand the outcome back, and none imports a module above it
    # (`python benchmarks/write_path.py` lists the calls: no climb)
    above = {}
    for name, below in WRITE_PATH.items():
        edge = {
            module.removeprefix("idlegate.operator.edge.").split(".")[0]
            for where, module in _imports(Path("operator/edge"))
            if where == f"operator/edge/{name}" and module.startswith("idlegate.operator.edge.")
        }
        above[name] = sorted(edge - below)
    assert above == {name: [] for name in WRITE_PATH}


def test_the_operator_features_do_not_import_the_edge():
    # features answer the core's events with intents; the applier is the one write path
    assert _offenders("operator/features", "idlegate.operator.edge") == []


def test_only_the_bridge_reaches_into_a_pools_core():
    # the features and the rest of the edge reach a pool's core through its entry
    # (`Bridge.handle`) and the facts it emits; what they read of the pool, the bridge
    # reads for them (`Bridge.workflows`, `Bridge.held`, ...)
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "operator"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() == "edge/bridge.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "core":
                offenders.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


VERBS = ("handle", "carry", "admit")
"""What enters a pool: an event, outputs to carry out, an admission (`Pools.join` is the
pools' alone)."""


def _entries(path: Path) -> list[str]:
    """The calls in `path` that enter a pool other than through the pools' door: a verb
    called on anything but the pools (`pools`, `x.pools`), and any call through
    `pools.default`."""

    def pools(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == "pools") or (
            isinstance(node, ast.Attribute) and node.attr == "pools"
        )

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        through_default = isinstance(receiver, ast.Attribute) and receiver.attr == "default"
        elsewhere = node.func.attr in VERBS and not pools(receiver)
        if elsewhere or (through_default and pools(receiver.value)):
            found.append(f"{node.lineno}: {ast.unparse(node.func)}")
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def test_every_kind_enters_a_pool_through_the_pools_door():
    # issue 68's one door: a workflow of any kind enters the pool `Pools.place` picks, by
    # `Pools.admit` (a DagWorkflow) or `Pools.join` (an Argo Workflow, an Airflow run), and
    # anything of it then goes through `Pools.handle` to the pool holding it; so no feature
    # or edge module holds a bridge of its own (Argo's and Airflow's handed their Join to
    # the bridge `Pools.route` gave, then placed it again in `Core._queue`).
    # The bridge's own module and the pools' are the door; the core sees no bridge at all.
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "operator"
    door = ("edge/bridge.py", "edge/pools.py")
    offenders = [
        f"{path.relative_to(root).as_posix()}:{entry}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).as_posix() not in door and path.parent.name != "core"
        for entry in _entries(path)
    ]
    assert offenders == []


def test_the_edge_writes_no_workflows_conditions():
    # a workflow's conditions (PoolFound, waiting for its pool) are the core's to write:
    # the edge routes an admission and says why a workflow waits with an event (cron.py
    # writes a DagCronWorkflow's own, which no core holds)
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "operator" / "edge"
    offenders = []
    for path in sorted(p for p in root.rglob("*.py") if p.name != "cron.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            touches = isinstance(node, ast.Attribute) and node.attr == "conditions"
            if touches or (isinstance(node, ast.Name) and node.id == "Conditions"):
                offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_the_simulator_imports_nothing_above_it():
    banned = ("idlegate.api", "idlegate.policy", "idlegate.operator")
    assert _offenders("sim", *banned) == []


RUNTIME = ("asyncio", "threading", "_thread", "concurrent.futures", "multiprocessing")
"""What runs: an event loop, threads, processes (issue 94: api/ is what users write and read)."""


def test_the_api_is_the_contract_and_runs_nothing():
    # issue 94: api/ holds what users write and read (the CRDs and their models, specs,
    # status, lint, the visibility API's types); what runs (loops, timers, threads,
    # processes, caches, stateful books) is the operator's, in rooms named by concept
    assert _offenders("api", *RUNTIME) == []
    assert _offenders("api", "idlegate.operator") == []


def _layer(module: str) -> str | None:
    """The layer of a module of the package: its subpackage under idlegate (``api``,
    ``operator``, ``sim`` ...); None for a top-level module (``errors``, ``config``: the
    foundation every layer builds on)."""
    src = Path(__file__).resolve().parents[1] / "src" / "idlegate"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and (src / parts[1]).is_dir() else None


def _inherited(src: Path, package: str = "idlegate") -> list[str]:
    """Each class of the package under `src` whose base is a class imported from another
    layer (`_layer`), as "module.Class <- module.Base"."""
    found = []
    for path in sorted(src.rglob("*.py")):
        parts = (package, *path.relative_to(src).with_suffix("").parts)
        module = ".".join(parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.update({a.asname or a.name: node.module for a in node.names})
            elif isinstance(node, ast.Import):
                imported.update({a.asname or a.name: a.name for a in node.names})
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for base in cls.bases:
                name = ast.unparse(base).split("[")[0]
                origin = imported.get(name.split(".")[0], "")
                if origin.startswith(package + ".") and _layer(origin) not in (
                    None,
                    _layer(module),
                ):
                    found.append(f"{module}.{cls.name} <- {origin}.{name}")
    return found


def test_no_class_subclasses_a_class_of_another_layer():
    # issue 94: `ForecastRefresh(ForecastBook)` subclassed api/'s book from the operator, so
    # its runtime's path ran through `super()` into another layer; composition, or both in
    # one layer
    assert _inherited(Path(__file__).resolve().parents[1] / "src" / "idlegate") == []


def test_the_subclass_finder_finds_a_class_of_another_layer(tmp_path):
    # (the test above, on the code it was written against: the operator's refresh)
    for where in ("api", "operator"):
        (tmp_path / where).mkdir()
    (tmp_path / "api" / "book.py").write_text("class ForecastBook:\n    pass\n")
    (tmp_path / "operator" / "refresh.py").write_text(
        "from idlegate.api.book import ForecastBook\n"
        "from idlegate.errors import IdlegateError\n\n"
        "class ForecastRefresh(ForecastBook):\n    pass\n\n"
        "class RefreshError(IdlegateError):\n    pass\n"
    )
    assert _inherited(tmp_path) == [
        "idlegate.operator.refresh.ForecastRefresh <- idlegate.api.book.ForecastBook"
    ]


def _handlers() -> list[tuple[str, str, str]]:
    """(resource plural or "" for the process's, module, qualified name) of every kopf
    handler `build_registry` registers, Argo's, Airflow's and the webhooks' included, each
    unwrapped from the object it is given."""
    import functools

    kopf = pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator

    settings = Settings(
        pool_size=1, policy="fair", argo=True, airflow_url="http://airflow:8080", webhook_port=1
    )
    registry = build_registry(Operator(settings))
    assert isinstance(registry, kopf.OperatorRegistry)
    found = []
    for part in ("_activities", "_indexing", "_watching", "_spawning", "_changing", "_webhooks"):
        for handler in getattr(registry, part).get_all_handlers():
            fn = handler.fn
            while isinstance(fn, functools.partial):
                fn = fn.func
            selector = getattr(handler, "selector", None)
            plural = "" if selector is None else selector.any_name
            found.append((plural, fn.__module__, fn.__qualname__))
    return found


def test_each_resources_kopf_handlers_are_one_modules_module_level_functions():
    # issue 94: the 24 handlers were closures inside `build_registry`, so neither a reader
    # nor a tool could follow a pod event from its handler; now each is a function at
    # module level, one module per resource it watches, given what it serves by name
    found = _handlers()
    assert [f"{m}.{q}" for _, m, q in found if "<locals>" in q or "." in q] == []
    modules: dict[str, set[str]] = {}
    for plural, module, _ in found:
        modules.setdefault(plural, set()).add(module.removeprefix("idlegate.operator.handlers."))
    assert modules == {
        "": {"process"},
        "namespaces": {"namespaces"},
        "nodes": {"nodes"},
        "pods": {"pods"},
        "dagworkflows": {"workflows"},
        "dagcronworkflows": {"cronworkflows"},
        "executorpools": {"pools"},
        "priorityclasses": {"priorityclasses"},
        "workflows": {"argo_workflows"},
        "workflowtemplates": {"argo_templates"},
        "clusterworkflowtemplates": {"argo_templates"},
    }


def test_no_operator_object_assigns_its_method_over_anothers():
    # a callback is given at construction: `other.on_x = self.method` hides from a reader
    # (and from tools) the path from an event to its write
    root = Path(__file__).resolve().parents[1] / "src" / "idlegate" / "operator"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(cls, ast.ClassDef):
                continue
            methods = {
                f.name for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            for node in ast.walk(cls):
                if not isinstance(node, ast.Assign):
                    continue
                value = node.value
                own = isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                if not (own and value.value.id == "self" and value.attr in methods):
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and ast.unparse(target.value) != "self":
                        offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports: every import, those under
    TYPE_CHECKING and inside functions included (a circle closed by a type is one)."""
    src = Path(__file__).resolve().parents[1] / "src"
    modules = {}
    for path in sorted((src / "idlegate").rglob("*.py")):
        name = ".".join(path.relative_to(src).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others_types_included():
    # issue 81: the admission, cluster, engine, fork, gate and legality closed a circle
    # through TYPE_CHECKING imports while their objects called each other: the types
    # they share are in modules each imports (`sim.admission_types`, `sim.runs`)
    assert _cycles(_graph()) == []


def test_a_circle_closed_by_a_type_only_import_is_found():
    # the finder itself, on a circle of two closed by a type
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def _twins(src: Path) -> dict[str, list[str]]:
    """The public classes of the package under `src` defined in more than one module."""
    defined: dict[str, list[str]] = {}
    for path in sorted(src.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(str(path.relative_to(src)))
    return {name: where for name, where in defined.items() if len(where) > 1}


def test_no_two_public_classes_share_a_name():
    # one name per type (issue 81): a reader who meets `Forecast` must know which (the
    # status's, not the replays' `PoolForecast`), `Pool` which pool, `Schedule` which
    # schedule; each is named by what it is
    assert _twins(Path(__file__).resolve().parents[1] / "src" / "idlegate") == {}


def test_the_twin_finder_finds_two_classes_of_one_name(tmp_path):
    (tmp_path / "a.py").write_text("class Forecast:\n    pass\n\nclass _Own:\n    pass\n")
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "b.py").write_text("class Forecast:\n    pass\n\nclass _Own:\n    pass\n")
    assert _twins(tmp_path) == {"Forecast": ["a.py", "deep/b.py"]}


COMPUTED = re.compile(r"\+= |\+ ?1\b|\benumerate\(|\bsorted\(|\.sort\(")
"""What working out a position looks like, in a function that names one: counting, ranking."""


def _worked_out(text: str) -> list[str]:
    """The functions of a module's `text` that work out a position (name one and count
    or rank)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = "\n".join(line.split("#")[0] for line in ast.unparse(node).splitlines())
        if "position" in body.lower() and COMPUTED.search(body):
            found.append(node.name)
    return found


READERS = [
    "dashboard/model.py: waiting_views",  # (the visibility document's positions, read)
    "dashboard/model.py: workflow_rows",  # (rows in the document's order, read)
    "evaluation/forecast_eval.py: evaluate_seed",  # (reads `AdmissionResult.position`)
    "sim/forecast.py: forecast",  # (reads `AdmissionResult.position`)
    "sim/queues.py: queue_of",  # (a namespace's position in a list)
    "sim/resources.py: free_after",  # (a resource's position in a vector)
]
"""The functions the grep below meets that read a position, or name another kind."""


def test_no_module_outside_the_admission_computes_a_position():
    # issue 81: the admission numbers each position in its order (`sim.admission_entries`);
    # everything else reads them (the forecast's ranking by arrival and the visibility
    # API's count of the waiting ahead were the second position). Its reasons: below
    src = Path(__file__).resolve().parents[1] / "src" / "idlegate"
    offenders = []
    for path in sorted(src.rglob("*.py")):
        where = path.relative_to(src).as_posix()
        if where.startswith(("sim/admission", "policy/", "training/")):
            continue  # (the admission; a policy ranks what it decides, not a queue)
        offenders += [f"{where}: {n}" for n in _worked_out(path.read_text(encoding="utf-8"))]
    assert offenders == READERS


def test_the_grep_finds_a_position_worked_out():
    # (the test above, on the code it was written against: main's two positions)
    ranked = """
def queue_positions(cluster):
    waiting = sorted((j for j in cluster.jobs if j.first_start is None), key=lambda j: j.id)
    seen = {}
    for job in waiting:
        seen[job.queue] = seen.get(job.queue, 0) + 1
"""
    counted = """
def pool_entry(name, core):
    ahead = 0
    for job, _, reason in entries:
        ahead += not started
        waiting.append({"position": None if started else ahead})
"""
    assert _worked_out(ranked) == ["queue_positions"]
    assert _worked_out(counted) == ["pool_entry"]


class _OnePerWorkflow:
    """A policy that gives each workflow one executor (cap 1), then waits."""

    name = "one-per-workflow"

    def reset(self, rng: object) -> None:
        pass

    def decide(self, view: Any) -> Any:
        from idlegate.sim.protocol import WAIT, Decision

        stage = next((s for s in view.runnable_stages() if not s.job.held), None)
        return WAIT if stage is None else Decision(stage, 1)


class _Waits:
    """A policy that waits whatever it is shown."""

    name = "waits"

    def reset(self, rng: object) -> None:
        pass

    def decide(self, view: Any) -> Any:
        from idlegate.sim.protocol import WAIT

        return WAIT


def _shown(policy: Any, pool: int, queues: Any, workflows: list[tuple[str, int, int]]) -> list[Any]:
    """Admit `workflows` (name, queue, priority; each two stages of one 10 s task, side by
    side) one a second into a core of `pool` executors deciding by `policy`, and for each
    Waiting reason it says: (the verdict shown, the verdict each decider wrote: the cap
    rule's, the admission entry's hold, the round's, and the Event's text)."""
    from unittest import mock

    from idlegate.api import notices
    from idlegate.api.settings import Settings
    from idlegate.operator.core.core import Core
    from idlegate.operator.core.decider import Decider
    from idlegate.operator.core.events import Admit
    from idlegate.operator.metrics import Metrics
    from idlegate.sim.legality import cap_holds

    core = Core(Settings(pool_size=pool, queues=queues), policy, metrics=Metrics(pool, policy.name))
    rounds: list[Any] = []
    seen: list[Any] = []
    decide, waiting = Decider.decide, notices.waiting

    def deciding(self: Any, cluster: Any, now: float) -> Any:
        rounds.append(done := decide(self, cluster, now))
        return done

    def said(stage: Any, cluster: Any, verdict: Any) -> Any:
        notice = waiting(stage, cluster, verdict)
        entry = cluster.admission_result().of(stage.job)
        hold = None if entry is None else entry.holds.get(stage)
        capped = cap_holds(stage.job) if cluster.free_executors else None
        seen.append((verdict, capped, hold, rounds[-1].ended, notice[2]))
        return notice

    one = {"tasks": 1, "taskDurationSeconds": 10.0}
    with (
        mock.patch.object(Decider, "decide", deciding),
        mock.patch.object(notices, "waiting", said),
    ):
        for i, (name, queue, priority) in enumerate(workflows):
            meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "generation": 1}
            stages = [{"name": "a", **one}, {"name": "b", **one}]
            body = {"metadata": meta, "spec": {"stages": stages}}
            core.handle(Admit(body, [], queue=queue, priority=priority), 1_700_000_000.0 + i)
    return seen


def test_the_reason_shown_is_the_one_its_decider_wrote_on_every_path():
    # issue 94: a Waiting Event said "parallelism cap" worked out from `job.cap` after the
    # round, and guessed between "pod not created yet" and "policy started other work";
    # now each reason is written where it is decided (the cap rule, the admission's phases
    # in the entry, the round's end) and the Event says the one that decided, adding
    # nothing but the executors left free
    from idlegate.api.queueing import QueueFile
    from idlegate.sim.admission_result import Reason
    from idlegate.sim.queues import QueueSpec

    pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    queues = QueueFile(
        (
            QueueSpec("a", {"pods": 1000}, borrowing_limit={"pods": 0}),
            QueueSpec("b", {"pods": 1000}),
        )
    )
    said = [
        *_shown(_OnePerWorkflow(), 2, None, [("w", 0, 0)]),  # (the cap rule)
        *_shown(_Waits(), 1, None, [("w", 0, 0)]),  # (the round: the policy waits)
        *_shown(_OnePerWorkflow(), 1, None, [("w", 0, 0), ("v", 0, 0)]),  # (the pool's room)
        *_shown(_OnePerWorkflow(), 3, queues, [("w", 0, 0), ("v", 0, 0)]),  # (the queue's limit)
        *_shown(_OnePerWorkflow(), 2, None, [("w", 0, 0), ("v", 0, 1)]),  # (a priority)
    ]
    for verdict, capped, hold, ended, text in said:
        assert verdict == (capped or hold or ended)  # (one verdict, its decider's)
        assert f"waits for an executor: {verdict.message}" in text
    decided = {verdict.reason for verdict, *_ in said}
    assert {Reason.PARALLELISM_CAP, Reason.POLICY, Reason.FREE_RESOURCES} <= decided, decided
    assert decided & {Reason.BORROWING_LIMIT, Reason.QUOTA, Reason.COHORT_FULL}, decided
