"""The files of src/idlegate whose functions run on a DagWorkflow's way from kopf's report
of it to its first gate removal (issue 29's "files on the path"), and how many functions.

    python -m benchmarks.admission_path

One workflow of one stage of two tasks on a pool of two, admitted as kopf's ``admit``
handler does (:func:`idlegate.operator.edge.intake.admit`, which the handler in
``operator/main.py`` awaits: main.py is counted too) against the in-memory API of
``tests/operator_fakes.py``; every Python call in the operator's thread is profiled
until the first gate removal's request has returned. Prints each file with the number
of calls into it, then the totals.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import sys
from typing import Any

from idlegate.operator.edge import intake
from tests.operator_fakes import harness, stage

ROOT = "/src/idlegate/"


async def trace() -> tuple[collections.Counter[str], set[tuple[str, str]]]:
    h = harness(pool=2)
    body = h.kube.add_workflow("w", {"stages": [stage("a", tasks=2)]})
    calls: collections.Counter[str] = collections.Counter({"operator/main.py": 1})
    functions: set[tuple[str, str]] = {("operator/main.py", "admit")}
    patch = h.kube.patch_pod

    async def first_removal(namespace: str, name: str, ops: list[dict[str, Any]]) -> Any:
        answer = await patch(namespace, name, ops)
        sys.setprofile(None)
        return answer

    h.kube.patch_pod = first_removal  # type: ignore[method-assign]

    def profile(frame: Any, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and ROOT in name:
            where = name.split(ROOT, 1)[1]
            calls[where] += 1
            functions.add((where, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        await intake.admit(h.pools, copy.deepcopy(body))
        await h.settle()
    finally:
        sys.setprofile(None)
    return calls, functions


def main() -> None:
    calls, functions = asyncio.run(trace())
    for where, n in sorted(calls.items()):
        print(f"{where:40s} {n:5d}")
    print(f"{len(calls)} files, {len(functions)} functions")


if __name__ == "__main__":
    main()
