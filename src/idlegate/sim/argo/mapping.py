"""Argo Workflow -> job: the mapping rules (the package docstring states them for users).

`map_workflow` walks the workflow from its entrypoint. Every call of a template (a DAG
task, a step, the entrypoint, an exit handler) either

* runs pods (a `container`, `script`, `containerSet`, `resource` or `data` template): one
  stage, whose tasks are the call's fan-out items (1 without a loop);
* runs a nested `dag` or `steps` template: its stages are flattened into the job, each
  fan-out item a copy named by its index;
* runs no pod of its own (`suspend`, `http`, `plugin`): it passes its dependencies through;

and returns its *exits*, the stages its dependents wait for. Templates are found by name
in the workflow (or in the WorkflowTemplate a `templateRef` names, whose own references
resolve in it), so flattening follows Argo's scoping. Everything is pure: dicts in, an
`ArgoJob` out; templates of other objects come from the `templates` lookup.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.argo.model import (
    ArgoCondition,
    ArgoJob,
    ArgoRefusal,
    ArgoRefusalReason,
    ArgoStage,
)
from idlegate.sim.argo.requests import UnknownRequest, template_demand
from idlegate.sim.argo.status import ObservedNodes
from idlegate.sim.external import DEFAULT_PRIOR, MAX_RETRIES, DurationLookup, DurationSource
from idlegate.sim.graphs import cycle_path
from idlegate.sim.resources import EMPTY, ResourceVector
from idlegate.sim.spec import MAX_STAGES, MAX_TASK_SECONDS, MAX_TASKS_PER_STAGE, stage_label

if TYPE_CHECKING:
    import networkx as nx

GROUP = "argoproj.io"
"""Argo's API group."""
WORKFLOW_KINDS = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")
"""The kinds that map to a job."""
TEMPLATE_KINDS = ("WorkflowTemplate", "ClusterWorkflowTemplate")
"""The kinds a `templateRef` or `workflowTemplateRef` may name."""
DURATION_ANNOTATION = "idlegate.io/task-duration-seconds"
"""A template's estimate of one pod's run time, in seconds (its `metadata.annotations`)."""
TEMPLATE_LABEL = "workflows.argoproj.io/workflow-template"
"""The label Argo puts on a Workflow submitted from a WorkflowTemplate."""
POD_KINDS = ("container", "script", "containerSet", "resource", "data")
"""Template types that run a pod per node."""
PASS_KINDS = ("suspend", "http", "plugin")
"""Template types that run no pod of their own (Argo's agent or a wait)."""

TemplateLookup = Mapping[tuple[str, str], Mapping[str, Any]]
"""(kind, name) -> a WorkflowTemplate or ClusterWorkflowTemplate object."""

_CONDITIONAL_DEPENDS = re.compile(
    r"\.(Failed|Errored|Skipped|Omitted|AnyFailed|AnySucceeded)\b|\|\||!"
)
_DEPENDS_TOKEN = re.compile(r"[A-Za-z0-9_][-A-Za-z0-9_]*(?:\.[A-Za-z]+)?")
_PARAM = re.compile(r"\{\{\s*(inputs|workflow)\.parameters\.([-\w]+)\s*\}\}")


def is_argo(obj: Any) -> bool:
    """True for an object of Argo's API group (``apiVersion: argoproj.io/...``)."""
    api = obj.get("apiVersion") if isinstance(obj, Mapping) else None
    return isinstance(api, str) and api.split("/")[0] == GROUP


def template_index(objects: Iterable[Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The WorkflowTemplates and ClusterWorkflowTemplates among `objects`, by (kind, name)."""
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for obj in objects:
        if is_argo(obj) and obj.get("kind") in TEMPLATE_KINDS:
            name = (obj.get("metadata") or {}).get("name")
            if isinstance(name, str):
                out[(obj["kind"], name)] = obj
    return out


def workflow_name(obj: Mapping[str, Any]) -> str:
    """``metadata.name``, else the generateName without its trailing '-', else 'workflow'."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or str(meta.get("generateName") or "").rstrip("-")
    return str(name or "workflow")


def map_workflow(
    obj: Mapping[str, Any],
    *,
    templates: TemplateLookup | None = None,
    durations: DurationLookup | None = None,
    prior: float = DEFAULT_PRIOR,
    nodes: Mapping[str, Any] | None = None,
) -> ArgoJob:
    """The job an Argo Workflow (or WorkflowTemplate, ClusterWorkflowTemplate, CronWorkflow)
    maps to.

    `templates`: the WorkflowTemplates its references may name; `durations`: a history
    lookup; `prior`: the estimate without either; `nodes`: its ``status.nodes`` (by default
    the object's own), which settle fan-out sizes and skipped nodes. ArgoRefusal (with a
    `reason`) for a manifest that does not map, SpecError for a bad annotation.
    """
    kind = obj.get("kind")
    if not is_argo(obj) or kind not in WORKFLOW_KINDS:
        raise ArgoRefusal(
            ArgoRefusalReason.NOT_A_WORKFLOW,
            f"{kind or 'a document with no kind'} is not one of Argo's {', '.join(WORKFLOW_KINDS)}",
        )
    name = workflow_name(obj)
    where = f"{kind} {name}"
    spec = obj.get("spec")
    if kind == "CronWorkflow" and isinstance(spec, Mapping):
        spec = spec.get("workflowSpec")
    if not isinstance(spec, Mapping):
        raise ArgoRefusal(ArgoRefusalReason.INVALID, f"{where}: spec is missing or not a mapping")
    lookup = templates or {}
    spec, template_key = _with_workflow_template(spec, obj, lookup, where)
    if nodes is None:
        nodes = (
            (obj.get("status") or {}).get("nodes")
            if isinstance(obj.get("status"), Mapping)
            else None
        )
    walker = _Walker(
        where=where,
        lookup=lookup,
        template_key=template_key,
        durations=durations,
        prior=prior,
        observed=ObservedNodes.from_nodes(nodes, name),
        workflow_params=_params(spec.get("arguments"), {}),
    )
    walker.run(spec)
    if not walker.stages:
        raise ArgoRefusal(
            ArgoRefusalReason.NO_PODS,
            f"{where} runs no pod (only suspend, http or plugin templates), so there is "
            "nothing to schedule",
        )
    parallelism = spec.get("parallelism")
    return ArgoJob(
        name=name,
        kind=str(kind),
        template_key=template_key,
        stages=tuple(walker.stages),
        parallelism=parallelism if isinstance(parallelism, int) and parallelism >= 1 else None,
        notes=tuple(dict.fromkeys(walker.notes)),
    )


def _with_workflow_template(
    spec: Mapping[str, Any], obj: Mapping[str, Any], lookup: TemplateLookup, where: str
) -> tuple[Mapping[str, Any], str]:
    """The spec with a `workflowTemplateRef`'s template merged in (the workflow's own fields
    win, as in Argo), and the key a history is looked up by."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    ref = spec.get("workflowTemplateRef")
    if not isinstance(ref, Mapping):
        key = labels.get(TEMPLATE_LABEL) if isinstance(labels, Mapping) else None
        stem = str((obj.get("metadata") or {}).get("generateName") or "").rstrip("-")
        return spec, str(key or stem or workflow_name(obj))
    kind = "ClusterWorkflowTemplate" if ref.get("clusterScope") else "WorkflowTemplate"
    ref_name = str(ref.get("name"))
    base = lookup.get((kind, ref_name))
    if base is None:
        raise ArgoRefusal(
            ArgoRefusalReason.MISSING_WORKFLOW_TEMPLATE,
            f"{where} runs {kind} {ref_name!r}, which is not given; pass it along "
            "(in the same file, or the templates lookup)",
        )
    merged = {
        **(base.get("spec") or {}),
        **{k: v for k, v in spec.items() if k != "workflowTemplateRef"},
    }
    args = _merge_arguments((base.get("spec") or {}).get("arguments"), spec.get("arguments"))
    if args:
        merged["arguments"] = args
    return merged, ref_name


def _merge_arguments(base: Any, own: Any) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for source in (base, own):
        for p in (source or {}).get("parameters") or [] if isinstance(source, Mapping) else []:
            if isinstance(p, Mapping) and "name" in p:
                params[p["name"]] = p
    return {"parameters": list(params.values())} if params else {}


def _params(arguments: Any, defaults: Mapping[str, str]) -> dict[str, str]:
    """Parameter name -> value (as text) of an `arguments` (or `inputs`) block."""
    out = dict(defaults)
    block = arguments.get("parameters") if isinstance(arguments, Mapping) else None
    for p in block or []:
        if isinstance(p, Mapping) and "name" in p:
            value = p.get("value", p.get("default"))
            if value is not None:
                out[str(p["name"])] = value if isinstance(value, str) else json.dumps(value)
    return out


@dataclass(frozen=True)
class _Scope:
    """Where template names resolve: a workflow's or a WorkflowTemplate's templates."""

    label: str
    templates: Mapping[str, Mapping[str, Any]]


@dataclass
class _Call:
    """One call of a template: where it sits and what it inherits."""

    path: str
    deps: tuple[str, ...]
    params: dict[str, str]
    condition: ArgoCondition | None
    stack: tuple[tuple[str, str], ...]
    """(scope, template) of the calls it is nested in: a repeat is recursion."""


@dataclass
class _Walker:
    where: str
    lookup: TemplateLookup
    template_key: str
    durations: DurationLookup | None
    prior: float
    observed: ObservedNodes
    workflow_params: dict[str, str]
    stages: list[ArgoStage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    spec: Mapping[str, Any] = field(default_factory=dict)

    def run(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        scope = _Scope(self.where, _by_name(spec.get("templates"), self.where))
        entry = spec.get("entrypoint")
        if not isinstance(entry, str) or not entry:
            raise ArgoRefusal(
                ArgoRefusalReason.NO_ENTRYPOINT,
                f"{self.where} has no entrypoint, so nothing runs on its own (a library of "
                "templates for templateRef); set spec.entrypoint to map it as a workflow",
            )
        start = _Call("", (), {}, None, ())
        exits = self.invoke({"template": entry}, scope, start)
        handler = spec.get("onExit") or ((spec.get("hooks") or {}).get("exit") or {}).get(
            "template"
        )
        if isinstance(handler, str):
            self.invoke(
                {"template": handler}, scope, _Call(".onExit", exits, start.params, None, ())
            )
        for hook, body in (spec.get("hooks") or {}).items():
            if hook != "exit" and isinstance(body, Mapping):
                call = _Call(f".hooks.{hook}", (), start.params, ArgoCondition.HOOK, ())
                self.invoke(body, scope, call)

    # -- calls -------------------------------------------------------------------------

    def invoke(self, task: Mapping[str, Any], scope: _Scope, call: _Call) -> tuple[str, ...]:
        """Add the stages of one call (a task, a step) and return its exits."""
        template, inner = self.resolve(task, scope, call.path)
        params = self.bind(task, template, call.params)
        count, known = self.fanout(task, call.params, call.path)
        key = (inner.label, str(template.get("name")))
        if key in call.stack:
            raise ArgoRefusal(
                ArgoRefusalReason.RECURSION,
                f"{self.where}: template {key[1]!r} calls itself (at {call.path or 'the entrypoint'}), "
                "so how many stages it has is known only as it runs",
            )
        if template.get("daemon") or task.get("daemon"):
            raise ArgoRefusal(
                ArgoRefusalReason.DAEMON,
                f"{self.where}: {call.path or 'the entrypoint'} runs template {key[1]!r} as a "
                "daemon, which keeps running beside its dependents; a job's tasks finish "
                "before their dependents start",
            )
        condition = call.condition or (ArgoCondition.WHEN if task.get("when") else None)
        sub = _Call(call.path, call.deps, params, condition, (*call.stack, key))
        kind = _kind(template)
        if kind in POD_KINDS:
            exits: tuple[str, ...] = (self.add_stage(template, sub, count, known),)
        elif kind in PASS_KINDS:
            self.notes.append(
                f"{kind} template {key[1]!r} runs no pod; its dependents wait only for "
                "what it waits for"
            )
            exits = call.deps
        elif kind in ("dag", "steps"):
            exits = self.nested(template, inner, sub, kind, count)
        else:
            raise ArgoRefusal(
                ArgoRefusalReason.INVALID,
                f"{self.where}: template {key[1]!r} has no container, script, resource, "
                "data, containerSet, dag, steps, suspend, http or plugin",
            )
        return exits + self.exit_handler(task, template, scope, inner, call, exits)

    def exit_handler(
        self,
        task: Mapping[str, Any],
        template: Mapping[str, Any],
        scope: _Scope,
        inner: _Scope,
        call: _Call,
        exits: tuple[str, ...],
    ) -> tuple[str, ...]:
        """Stages of a task's or template's `onExit` / `hooks` (after the call's exits)."""
        out: tuple[str, ...] = ()
        for owner, where in ((task, scope), (template, inner)):
            raw = owner.get("hooks")
            hooks: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            handler = owner.get("onExit") or (hooks.get("exit") or {}).get("template")
            if isinstance(handler, str):
                sub = _Call(f"{call.path}.onExit", exits, call.params, call.condition, call.stack)
                out += self.invoke({"template": handler}, where, sub)
            for hook, body in hooks.items():
                if hook != "exit" and isinstance(body, Mapping):
                    sub = _Call(
                        f"{call.path}.hooks.{hook}",
                        call.deps,
                        call.params,
                        ArgoCondition.HOOK,
                        call.stack,
                    )
                    self.invoke(body, where, sub)
        return out

    def resolve(
        self, task: Mapping[str, Any], scope: _Scope, path: str
    ) -> tuple[Mapping[str, Any], _Scope]:
        """The template a task calls, and the scope its own references resolve in."""
        if isinstance(task.get("inline"), Mapping):
            return {"name": f"{path or 'entry'}-inline", **task["inline"]}, scope
        ref = task.get("templateRef")
        if isinstance(ref, Mapping):
            kind = "ClusterWorkflowTemplate" if ref.get("clusterScope") else "WorkflowTemplate"
            obj = self.lookup.get((kind, str(ref.get("name"))))
            if obj is None:
                raise ArgoRefusal(
                    ArgoRefusalReason.MISSING_WORKFLOW_TEMPLATE,
                    f"{self.where}: {path or 'the entrypoint'} uses {kind} "
                    f"{ref.get('name')!r}, which is not given; pass it along",
                )
            inner = _Scope(
                f"{kind} {ref.get('name')}",
                _by_name((obj.get("spec") or {}).get("templates"), f"{kind} {ref.get('name')}"),
            )
            return self.find(inner, str(ref.get("template")), path), inner
        return self.find(scope, str(task.get("template")), path), scope

    def find(self, scope: _Scope, name: str, path: str) -> Mapping[str, Any]:
        template = scope.templates.get(name)
        if template is None:
            raise ArgoRefusal(
                ArgoRefusalReason.MISSING_TEMPLATE,
                f"{self.where}: {path or 'the entrypoint'} calls template {name!r}, which "
                f"{scope.label} does not define; {_defined(name, scope.templates)}",
            )
        return template

    def bind(
        self, task: Mapping[str, Any], template: Mapping[str, Any], outer: dict[str, str]
    ) -> dict[str, str]:
        """The input parameters a template sees: its inputs' defaults, then the task's
        arguments (whose `{{inputs.parameters.X}}` are the caller's)."""
        args = _params(task.get("arguments"), {})
        bound = {k: _substitute(v, outer, self.workflow_params) for k, v in args.items()}
        return {**_params(template.get("inputs"), {}), **bound}

    def fanout(
        self, task: Mapping[str, Any], params: dict[str, str], path: str
    ) -> tuple[int | None, bool]:
        """(items, known) of a call's loop; (None, True) without one. An unknown count is
        settled by `status.nodes` once Argo expands it."""
        count = _loop_count(task, params, self.workflow_params)
        if count is None and not any(k in task for k in ("withItems", "withParam", "withSequence")):
            return None, True
        seen = self.observed.fanout(path)
        if seen is not None:
            return seen, True
        return (count, True) if count is not None else (1, False)

    # -- what a call adds --------------------------------------------------------------

    def add_stage(
        self, template: Mapping[str, Any], call: _Call, count: int | None, known: bool
    ) -> str:
        tasks = count if count is not None else 1
        skipped = self.observed.skipped_items(call.path)
        if tasks > MAX_TASKS_PER_STAGE:
            raise ArgoRefusal(
                ArgoRefusalReason.TOO_MANY_STAGES,
                f"{self.where}: {call.path} fans out to {tasks} pods, more than a stage may "
                f"have ({MAX_TASKS_PER_STAGE})",
            )
        name = self.stage_name(call.path)
        duration, source = self.estimate(template, name)
        stage = ArgoStage(
            name=name,
            path=call.path,
            template=str(template.get("name")),
            tasks=max(1, tasks - skipped),
            tasks_known=known,
            duration=duration,
            duration_source=source,
            depends_on=call.deps,
            retries=_retries(template),
            demand=self.demand(template, call),
            condition=call.condition,
            skipped=self.observed.is_skipped(call.path) or tasks == 0 or 0 < tasks <= skipped,
        )
        self.stages.append(stage)
        if len(self.stages) > MAX_STAGES:
            raise ArgoRefusal(
                ArgoRefusalReason.TOO_MANY_STAGES,
                f"{self.where} has more than {MAX_STAGES:,} stages once flattened, more than "
                "idlegate holds in memory for one workflow",
            )
        return name

    def nested(
        self, template: Mapping[str, Any], scope: _Scope, call: _Call, kind: str, count: int | None
    ) -> tuple[str, ...]:
        copies = [call.path] if count is None else [f"{call.path}({i})" for i in range(count)]
        exits: tuple[str, ...] = ()
        for path in copies:
            sub = _Call(path, call.deps, call.params, call.condition, call.stack)
            body = (
                self.dag(template, scope, sub)
                if kind == "dag"
                else self.steps(template, scope, sub)
            )
            exits += body
        return exits

    def steps(self, template: Mapping[str, Any], scope: _Scope, call: _Call) -> tuple[str, ...]:
        deps = call.deps
        for g, group in enumerate(self.steps_of(template)):
            exits: tuple[str, ...] = ()
            for step in group:
                sub = _Call(
                    f"{call.path}[{g}].{step.get('name')}",
                    deps,
                    call.params,
                    call.condition,
                    call.stack,
                )
                exits += self.invoke(step, scope, sub)
            deps = _unique(exits) if group else deps
        return deps

    def steps_of(self, template: Mapping[str, Any]) -> list[list[Mapping[str, Any]]]:
        """A `steps` template's groups; INVALID unless it is a list of groups, each a list
        of steps (Argo refuses any other shape: a group is a list even of one step)."""
        groups = template.get("steps")
        if not isinstance(groups, list):
            self.malformed(
                template, "steps", "a list of step groups (steps: [[...], [...]])", groups
            )
        out = []
        for g, group in enumerate(groups):
            group = group or []  # an empty group (`- `) runs nothing
            if not isinstance(group, list):
                self.malformed(
                    template,
                    f"steps[{g}]",
                    "a group: a list of steps run in parallel, even of one step "
                    "(steps: [[{name: a, template: t}]])",
                    group,
                )
            out.append(self.all_mappings(template, f"steps[{g}]", group, "step"))
        return out

    def dag_tasks(self, template: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """A `dag` template's tasks by name; INVALID unless `dag.tasks` is a list of tasks."""
        body = template.get("dag")
        if not isinstance(body, Mapping):
            self.malformed(template, "dag", "a mapping with a list of tasks", body)
        tasks = body.get("tasks")
        if not isinstance(tasks, list):
            self.malformed(
                template, "dag.tasks", "a list of tasks (tasks: [{name: a, template: t}])", tasks
            )
        return {
            str(t.get("name")): t for t in self.all_mappings(template, "dag.tasks", tasks, "task")
        }

    def all_mappings(
        self, template: Mapping[str, Any], key: str, items: list[Any], what: str
    ) -> list[Mapping[str, Any]]:
        """`items`, each checked to be a mapping (a step or task)."""
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                self.malformed(
                    template, f"{key}[{i}]", f"a {what} (name: ..., template: ...)", item
                )
        return items

    def malformed(self, template: Mapping[str, Any], key: str, expected: str, got: Any) -> NoReturn:
        """Refuse a template whose `key` does not have the shape Argo expects."""
        raise ArgoRefusal(
            ArgoRefusalReason.INVALID,
            f"{self.where}: template {template.get('name')!r}: {key} must be {expected}, "
            f"not {_shape(got)}",
        )

    def dag(self, template: Mapping[str, Any], scope: _Scope, call: _Call) -> tuple[str, ...]:
        import networkx as nx  # (here: `idlegate lint` starts without it)

        body = template["dag"]
        tasks = self.dag_tasks(template)
        needs = {name: _dependencies(task) for name, task in tasks.items()}
        graph = nx.DiGraph()
        graph.add_nodes_from(tasks)
        for name, deps in needs.items():
            for dep in deps:
                if dep not in tasks:
                    raise ArgoRefusal(
                        ArgoRefusalReason.BAD_DAG,
                        f"{self.where}: task {name!r} of template {template.get('name')!r} "
                        f"depends on {dep!r}, which is no task of it",
                    )
                graph.add_edge(dep, name)
        cycle = cycle_path(graph)
        if cycle is not None:
            raise ArgoRefusal(
                ArgoRefusalReason.BAD_DAG,
                f"{self.where}: the tasks of template {template.get('name')!r} depend on each "
                f"other in a cycle: {cycle}; break it by removing one of these dependencies",
            )
        wanted = _targets(body.get("target"), call.params, self.workflow_params, graph)
        exits_of: dict[str, tuple[str, ...]] = {}
        order = {name: i for i, name in enumerate(tasks)}  # (in the template's order)
        for name in nx.lexicographical_topological_sort(graph, key=order.__getitem__):
            if wanted is not None and name not in wanted:
                continue
            task = tasks[name]
            deps = (
                _unique(e for d in needs[name] for e in exits_of[d]) if needs[name] else call.deps
            )
            condition = call.condition
            if isinstance(task.get("depends"), str) and _CONDITIONAL_DEPENDS.search(
                task["depends"]
            ):
                condition = condition or ArgoCondition.DEPENDS
            sub = _Call(f"{call.path}.{name}", deps, call.params, condition, call.stack)
            exits_of[name] = self.invoke(task, scope, sub)
        chosen = wanted if wanted is not None else set(tasks)
        needed = {d for m in exits_of for d in needs[m]}
        leaves = [n for n in exits_of if n in chosen and n not in needed]
        return _unique(e for n in leaves for e in exits_of[n])

    # -- names, demands and estimates ----------------------------------------------------

    def demand(self, template: Mapping[str, Any], call: _Call) -> ResourceVector:
        """What one pod of the call requests (`idlegate.sim.argo.requests`); nothing, and a
        note, when the request is known only as the workflow runs."""
        name = template.get("name")
        try:
            return template_demand(
                template,
                self.spec,
                lambda text: _substitute(text, call.params, self.workflow_params),
                f"{self.where}: template {name!r}",
            )
        except UnknownRequest:
            self.notes.append(
                f"template {name!r} requests resources named by a parameter known only as "
                "the workflow runs; its pods count as requesting nothing until then"
            )
            return EMPTY
        except IdlegateError as exc:
            raise ArgoRefusal(ArgoRefusalReason.INVALID, str(exc)) from None

    def stage_name(self, path: str) -> str:
        """A DNS label from the node path (step groups left out); a hash of the path is
        appended when the plain name is taken or too long."""
        return stage_label(re.sub(r"\[\d+\]", "", path), self._names, key=path)

    def estimate(self, template: Mapping[str, Any], stage: str) -> tuple[float, DurationSource]:
        """History, else the template's annotation, else the prior."""
        if self.durations is not None:
            found = self.durations(self.template_key, stage)
            if found is not None and 0 < found <= MAX_TASK_SECONDS:
                return float(found), DurationSource.HISTORY
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        raw = annotations.get(DURATION_ANNOTATION) if isinstance(annotations, Mapping) else None
        if raw is not None:
            return _annotation_seconds(
                raw, f"{self.where}: template {template.get('name')!r}"
            ), DurationSource.ANNOTATION
        return self.prior, DurationSource.PRIOR


def _annotation_seconds(raw: Any, where: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TASK_SECONDS):
        raise SpecError(
            f"{where}: the annotation {DURATION_ANNOTATION} must be a number of seconds "
            f'> 0 and <= {MAX_TASK_SECONDS} (e.g. "90"), got {raw!r}'
        )
    return value


def _by_name(templates: Any, owner: str) -> dict[str, Mapping[str, Any]]:
    """`owner`'s `spec.templates` by name; INVALID unless it is a list (or absent)."""
    if templates is not None and not isinstance(templates, list):
        raise ArgoRefusal(
            ArgoRefusalReason.INVALID,
            f"{owner}: spec.templates must be a list of templates "
            f"(templates: [{{name: main, container: ...}}]), not {_shape(templates)}",
        )
    return {str(t.get("name")): t for t in templates or [] if isinstance(t, Mapping)}


def _defined(name: str, templates: Mapping[str, Any]) -> str:
    """The templates there are (the closest to `name` first), for a missing one's message."""
    if not templates:
        return "it defines no template"
    close = difflib.get_close_matches(name, list(templates), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}it defines {', '.join(map(repr, templates))}"


def _shape(value: Any) -> str:
    """What a parsed YAML value is, for a message: "a mapping", "a list", "null"..."""
    if value is None:
        return "missing (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    names = {bool: "a boolean", str: "a string", int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")


def _kind(template: Mapping[str, Any]) -> str | None:
    for kind in (*POD_KINDS, "dag", "steps", *PASS_KINDS):
        if template.get(kind) is not None:
            return kind
    return None


def _dependencies(task: Mapping[str, Any]) -> tuple[str, ...]:
    """The tasks a DAG task waits for: `dependencies`, or every task its `depends` names
    (Argo evaluates the expression once all of them are done)."""
    deps = task.get("dependencies")
    if isinstance(deps, list):
        return tuple(dict.fromkeys(str(d) for d in deps))
    expr = task.get("depends")
    if not isinstance(expr, str):
        return ()
    return tuple(dict.fromkeys(t.split(".")[0] for t in _DEPENDS_TOKEN.findall(expr)))


def _targets(
    target: Any, inputs: Mapping[str, str], workflow: Mapping[str, str], graph: nx.DiGraph
) -> set[str] | None:
    """A DAG's `target` tasks and what they depend on (None: every task)."""
    import networkx as nx  # (here: `idlegate lint` starts without it)

    if not isinstance(target, str) or not target.strip():
        return None
    text = _substitute(target, inputs, workflow)
    if "{{" in text:
        return None
    names = {t for t in re.split(r"[\s,]+", text) if t in graph}
    if not names:
        return None
    return names | {a for n in names for a in nx.ancestors(graph, n)}


def _substitute(text: str, inputs: Mapping[str, str], workflow: Mapping[str, str]) -> str:
    """`text` with the `{{inputs.parameters.X}}` and `{{workflow.parameters.X}}` it can
    resolve replaced (anything else left as written)."""

    def value(m: re.Match[str]) -> str:
        known = inputs if m.group(1) == "inputs" else workflow
        return known.get(m.group(2), m.group(0))

    return _PARAM.sub(value, text)


def _loop_count(
    task: Mapping[str, Any], inputs: Mapping[str, str], workflow: Mapping[str, str]
) -> int | None:
    """The number of items of a call's loop when the manifest says it, else None."""
    items = task.get("withItems")
    if isinstance(items, list):
        return len(items)
    raw = task.get("withParam")
    if isinstance(raw, str):
        text = _substitute(raw, inputs, workflow)
        if "{{" not in text:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return None
            return len(value) if isinstance(value, list) else None
        return None
    seq = task.get("withSequence")
    if isinstance(seq, Mapping):

        def number(key: str) -> int | None:
            v = seq.get(key)
            text = _substitute(str(v), inputs, workflow) if v is not None else None
            return int(text) if text is not None and text.lstrip("-").isdigit() else None

        count, start, end = number("count"), number("start"), number("end")
        if count is not None:
            return count
        if end is not None:
            return abs(end - (start or 0)) + 1
    return None


def _retries(template: Mapping[str, Any]) -> int:
    strategy = template.get("retryStrategy")
    if not isinstance(strategy, Mapping):
        return 0
    limit = strategy.get("limit")
    try:
        return max(0, min(MAX_RETRIES, int(str(limit))))
    except ValueError:
        return MAX_RETRIES if limit is None else 0


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
