"""How the write path's calls flow, from the applier's intents to the API and back (issue 94:
"the applier zig-zags").

    python -m benchmarks.write_path

Run from a checkout's root in its venv; another checkout's code is traced from that
checkout's root with its ``src`` and root on ``PYTHONPATH`` (e.g.
``PYTHONPATH=$PWD/src:$PWD .venv/bin/python -m benchmarks.write_path``).

One workflow of one stage of two tasks on a pool of two, on the in-memory API of the unit
tests (``tests/operator_fakes.py``), from its admission until it has succeeded and its
final status has landed: its pods created gated, released, their ends, its status writes
and its Events. Every Python call in the operator's thread is profiled, and each call made
from a function of the write path is classed by where its callee sits:

* the write path's places, top to bottom: the *applier* (``Applier``: intents into
  writes, the Events' recorder), the *lanes* (``Lanes``, ``Op`` and an object's status
  lane: order, pace and concurrency), the *writes* (each intent's requests to the API:
  ``Applier._create`` and its kind before issue 94, ``edge/writes.py`` after) and the API
  client (``edge/kube.py``);
* a *hand-back*: a call into what owns the path (the pools, a bridge, the core): a
  write's outcome handed to its receiver, where the path ends, or the operator's clock;
* a *leaf*: anything else (outside ``operator/``, the metrics, the lags' and pacing's
  books), neither.

A call from one place into another is a *stop* (each distinct pair of functions once); a
*climb* is a stop into a place above its caller's. Prints each stop (``v`` down, ``^``
climb, ``<`` hand-back) with its calls, then the totals.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from typing import Any

from tests.operator_fakes import harness, stage

ROOT = "/src/idlegate/"
PLACES = ("kube", "writes", "lanes", "applier")
"""The write path's places, bottom to top (a place's index is its height)."""
WRITES = {
    "_create",
    "_release",
    "_evict",
    "_release_stop",
    "_release_argo",
    "_patch_gate",
    "_delete_workflow",
    "_create_workflow",
}
"""The applier's methods that made an intent's requests before issue 94 (its writes)."""
RECEIVERS = (
    "operator/edge/pools.py",
    "operator/edge/bridge.py",
    "operator/core/",
    "operator/kinds/",
)
"""What owns the write path: a write's outcome is handed back there (and the operator's
clock read there, `Bridge.now`); the intents' own types (``core/intents.py``) are leaves."""


def place(where: str, function: str) -> str | None:
    """The place of a function (its file under src/idlegate, its qualified name): one of
    `PLACES`, ``hand-back``, or None (a leaf)."""
    head, _, rest = function.partition(".")
    if where == "operator/edge/applier.py":  # (before issue 94: the whole path in one file)
        if head in ("Lanes", "Op", "_StatusLane"):
            return "lanes"
        if (head == "Applier" and rest.split(".")[0] in WRITES) or head == "_workflow":
            return "writes"
        return "applier"
    found = {
        "operator/edge/lanes.py": "lanes",
        "operator/edge/writes.py": "writes",
        "operator/edge/recorder.py": "applier",
        "operator/edge/kube.py": "kube",
    }.get(where)
    if found is None and where.startswith(RECEIVERS) and where != "operator/core/intents.py":
        return "hand-back"
    return found


Stop = tuple[str, str, str, str]
"""(caller's place, caller, callee's place, callee)."""


async def trace() -> collections.Counter[Stop]:
    h = harness(pool=2)
    body = h.kube.add_workflow("w", {"stages": [stage("a", tasks=2)]})
    stops: collections.Counter[Stop] = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        caller = frame.f_back
        if event != "call" or caller is None:
            return
        code, outer = frame.f_code, caller.f_code
        if ROOT not in code.co_filename or ROOT not in outer.co_filename:
            return
        source = place(outer.co_filename.split(ROOT, 1)[1], outer.co_qualname)
        if source not in PLACES:
            return
        target = place(code.co_filename.split(ROOT, 1)[1], code.co_qualname)
        if target is not None and target != source:
            stops[(source, outer.co_qualname, target, code.co_qualname)] += 1

    pods, namespace = h.indexed(body)
    sys.setprofile(profile)
    try:
        h.pools.admit(body, pods, namespace)
        await h.settle()
        for pod in h.kube.pods_of("w"):
            await h.finish(pod["metadata"]["name"])
    finally:
        sys.setprofile(None)
    if h.kube.status("w").get("phase") != "Succeeded":
        raise RuntimeError("the traced workflow did not succeed: the trace is not the path")
    return stops


def direction(source: str, target: str) -> str:
    if target == "hand-back":
        return "<"
    return "^" if PLACES.index(target) > PLACES.index(source) else "v"


def main() -> None:
    stops = asyncio.run(trace())
    for (source, caller, target, callee), n in sorted(stops.items()):
        mark = direction(source, target)
        print(f"{mark} {source}:{caller} -> {target}:{callee} ({n} call(s))")
    climbs = sum(direction(s, t) == "^" for s, _, t, _ in stops)
    hand_backs = sum(direction(s, t) == "<" for s, _, t, _ in stops)
    print(f"{len(stops)} stops, {climbs} climb(s), {hand_backs} hand-back(s)")


if __name__ == "__main__":
    main()
