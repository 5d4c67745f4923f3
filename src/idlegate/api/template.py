"""Admission check of a stage's pod template: its shape, and what its namespace allows.

The shape is :mod:`idlegate.sim.pod_template`'s (one check for the operator, ``idlegate
lint``, the simulator's workflow files and ``idlegate forecast FILE``): the fields the
operator writes into each task pod, what every pod needs, and the type of every field the
Pod Security checks read, as strictly as the API's own types.

Given the namespace's :class:`~idlegate.api.podsecurity.NamespacePolicy`, a template
of that shape is then held to the namespace's Pod Security level and service-account
allow-list (:func:`idlegate.api.podsecurity.check_template`): the operator creates
pods with its own rights, so it must refuse what the namespace would refuse its author.
Everything else is passed through to the API server, which judges it when the pod is
created (and a pod the API server refuses fails its workflow, see
:mod:`idlegate.operator.edge.applier`).

A template that fails here makes the workflow ``Invalid`` at admission, with the path of
the offending field, before any executor is given to it.
"""

from __future__ import annotations

from typing import Any

from idlegate.api import podsecurity
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.sim.pod_template import invalid_template, template_problems
from idlegate.sim.spec import WorkflowSpec


def check_template(
    template: Any, where: str = "template", policy: NamespacePolicy | None = None
) -> None:
    """Raise SpecError, naming the field path under `where`, unless `template` (a stage's
    ``template``; None means the default template, which meets restricted) is one the
    operator can build pods from and, with `policy`, one the namespace allows."""
    problems = template_problems(template, where)
    if not problems and template is not None and policy is not None:
        found = podsecurity.check_template(
            template,
            level=policy.level,
            allowed_service_accounts=policy.allowed_service_accounts,
            path_prefix=where,
        )
        problems = [str(v) for v in found]
    if problems:
        raise invalid_template(problems)


def check_templates(
    spec: WorkflowSpec, where: str = "spec", policy: NamespacePolicy | None = None
) -> None:
    """:func:`check_template` for every stage of `spec` (paths like spec.stages[2].template)."""
    for i, stage in enumerate(spec.stages):
        check_template(stage.template, f"{where}.stages[{i}].template", policy)
