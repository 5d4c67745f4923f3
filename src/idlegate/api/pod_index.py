"""The operator's one index of pods: its keys, and the two indexes it stands for.

kopf evaluates every index and every event handler of a resource on each of its watch
events, and its own machinery around each handler costs more than most handlers do
(benchmarks/kopf_floor.py). So the operator keeps one index of pods, not one per use:
each pod under ``(POD, namespace, name)`` (the room of the pools that follow the nodes,
:mod:`idlegate.operator.edge.nodes`), and a task pod also under ``(TASK, namespace,
workflow)`` (what a workflow is admitted from). :class:`Tagged` reads one of the two as
the index it replaces, keyed without its tag.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from idlegate.api.labels import LABEL_WORKFLOW

POD, TASK = "pod", "task"
"""The tags of the index's keys: every pod by name, a task pod by its workflow."""


def pod_keys(namespace: str | None, name: str, labels: Mapping[str, str]) -> list[tuple[Any, ...]]:
    """The keys a pod is indexed under (the module docstring)."""
    keys: list[tuple[Any, ...]] = [(POD, namespace, name)]
    if LABEL_WORKFLOW in labels:
        keys.append((TASK, namespace, labels[LABEL_WORKFLOW]))
    return keys


class Tagged(Mapping[Any, Any]):
    """The entries of `index` (kopf's, live) under the keys tagged `tag`, keyed without
    the tag: ``Tagged(index, POD)[namespace, name]`` is ``index[POD, namespace, name]``."""

    def __init__(self, index: Mapping[Any, Any], tag: str) -> None:
        self.index, self.tag = index, tag

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        return self.index[(self.tag, *key)]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return (key[1:] for key in list(self.index) if key[0] == self.tag)

    def __len__(self) -> int:
        return sum(1 for _ in self)
