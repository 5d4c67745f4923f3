"""The one rule for the names of idlegate's objects (issue 93, item 11): a DagWorkflow's
and an ExecutorPool's name is an RFC 1123 subdomain (the API server's rule for an
object's name) of at most 63 characters, because it is also a label value (a workflow's
on every task pod, a pool's in ``idlegate.io/pool`` routing). ``lint``, the operator's
admission and ``idlegate forecast FILE`` all check it here, with one sentence."""

from __future__ import annotations

import re

from idlegate.errors import SpecError
from idlegate.sim.spec import DNS_SUBDOMAIN_PATTERN

MAX_WORKFLOW_NAME_LENGTH = 63
"""The longest name: a label value has at most 63 characters."""
DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
"""RFC 1123 subdomain: the API server's rule for the names of objects (custom ones too)."""


def check_object_name(name: str, why: str) -> None:
    """Raise SpecError if `name` cannot be an idlegate object's; `why` ends the sentence on
    a name too long (what makes it a label value)."""
    if not DNS_SUBDOMAIN.match(name):
        hint = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.") or "my-workflow"
        raise SpecError(
            f"the name {name!r} is not a valid Kubernetes object name: use lowercase letters, "
            "digits, '-' and '.', starting and ending with a letter or digit (RFC 1123, as "
            f"the API server requires and task pod names need), e.g. {hint!r}"
        )
    if len(name) > MAX_WORKFLOW_NAME_LENGTH:
        raise SpecError(
            f"the name {name!r} is longer than {MAX_WORKFLOW_NAME_LENGTH} characters; {why}"
        )


def check_workflow_name(name: str) -> None:
    """Raise SpecError if `name` cannot be a DagWorkflow's: the operator's admission marks
    such a workflow Invalid, and ``idlegate lint`` reports it, with this message. A name
    that passes gives valid task pod names too (:func:`idlegate.api.task_pods.pod_name`:
    the name, '-', a stage name, which is a DNS label, '-', digits; a long one cut after an
    alphanumeric and ended by a hash)."""
    check_object_name(name, "it is a label value on every task pod")


def check_pool_name(name: str) -> None:
    """Raise SpecError if `name` cannot be an ExecutorPool's (`check_object_name`)."""
    check_object_name(name, "it is the value of the idlegate.io/pool label that routes to it")
