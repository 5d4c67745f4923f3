"""The files of src/idlegate whose functions run on a DagWorkflow's way from kopf's report
of it to its first gate removal (issue 29's "files on the path"), how many functions, and
how often the path climbs back up the operator's layers (issue 42).

    python -m benchmarks.admission_path

One workflow of one stage of two tasks on a pool of two, admitted as kopf's ``admit``
handler in ``operator/handlers/workflows.py`` does (``Operator.workflow_created``:
:meth:`idlegate.operator.edge.pools.Pools.admit`
with the workflow's pods and namespace from kopf's indexes, here the in-memory API of
``tests/operator_fakes.py``: the handler's module is counted once); every Python call in
the operator's thread is profiled until the first gate removal's request has returned.
Prints each file with the number of calls into it, then the totals.

A *climb* is a call from a function of a lower layer of the operator into one of a higher
layer (the process, ``main.py``, ``runtime.py`` and ``handlers/``, above ``edge/`` above
``features/``, ``forecasting/``, ``lag/`` and ``decisions.py`` above ``core/``,
``kinds/`` and ``nodes/``; ``metrics.py``, ``metric_families.py``, kopf's settings and
retries and everything outside ``operator/`` are leaves, neither), made from the moment
the core's entry (``Core.handle``) is first called. Each distinct (caller, callee) pair
of functions is listed once with its calls.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from typing import Any

from tests.operator_fakes import harness, stage

ROOT = "/src/idlegate/"
ENTRY = ("operator/core/core.py", "handle")
"""The core's one entry: the climbs are counted from its first call on."""

Climb = tuple[str, str, str, str]
"""(caller's file, caller, callee's file, callee)."""


def layer(where: str) -> int:
    """The operator layer of a file under src/idlegate (0: a leaf, outside the layers)."""
    inner = where.removeprefix("operator/")
    leaves = ("metrics.py", "metric_families.py", "kopf_settings.py", "kopf_retries.py")
    if inner == where or inner in (*leaves, "__init__.py"):
        return 0
    if inner in ("main.py", "runtime.py") or inner.startswith("handlers/"):
        return 4
    if inner.startswith("edge/"):
        return 3
    if inner.startswith(("features/", "forecasting/", "lag/")) or inner == "decisions.py":
        return 2
    return 1  # core/, kinds/, nodes/


async def trace() -> tuple[
    collections.Counter[str], set[tuple[str, str]], collections.Counter[Climb]
]:
    h = harness(pool=2)
    body = h.kube.add_workflow("w", {"stages": [stage("a", tasks=2)]})
    handler = "operator/handlers/workflows.py"
    calls: collections.Counter[str] = collections.Counter({handler: 1})
    functions: set[tuple[str, str]] = {(handler, "admit")}
    climbs: collections.Counter[Climb] = collections.Counter()
    entered = False
    patch = h.kube.patch_pod

    async def first_removal(namespace: str, name: str, ops: list[dict[str, Any]]) -> Any:
        answer = await patch(namespace, name, ops)
        sys.setprofile(None)
        return answer

    h.kube.patch_pod = first_removal  # type: ignore[method-assign]
    pods, namespace = h.indexed(body)  # (what kopf's indexes hold: read before the handler)

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal entered
        name = frame.f_code.co_filename
        if event != "call" or ROOT not in name:
            return
        where, function = name.split(ROOT, 1)[1], frame.f_code.co_name
        calls[where] += 1
        functions.add((where, function))
        entered = entered or (where, function) == ENTRY
        caller = frame.f_back
        if not entered or caller is None or ROOT not in caller.f_code.co_filename:
            return
        source = caller.f_code.co_filename.split(ROOT, 1)[1]
        if 0 < layer(source) < layer(where):
            climbs[(source, caller.f_code.co_name, where, function)] += 1

    sys.setprofile(profile)
    try:
        h.pools.admit(body, pods, namespace)  # (the handler's call)
        await h.settle()
    finally:
        sys.setprofile(None)
    return calls, functions, climbs


def main() -> None:
    calls, functions, climbs = asyncio.run(trace())
    for where, n in sorted(calls.items()):
        print(f"{where:40s} {n:5d}")
    operator = sum(where.startswith("operator/") for where in calls)
    print(f"{len(calls)} files ({operator} of operator/), {len(functions)} functions")
    for (source, caller, where, callee), n in sorted(climbs.items()):
        print(f"climb: {source} {caller} -> {where} {callee} ({n} call(s))")
    print(f"{len(climbs)} climb(s) up the operator's layers from the core's entry")


if __name__ == "__main__":
    main()
