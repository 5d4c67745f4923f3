"""The operator's one index of pods: its keys, the index itself, and the end of its first
listing.

kopf evaluates every index and every event handler of a resource on each of its watch
events, and its own machinery around each handler costs more than most handlers do
(benchmarks/kopf_floor.py: a kopf index of pods was 0.95 ms of CPU a pod, a third of
kopf's floor). So the operator keeps its index of pods itself, written by its one pod
event handler (:class:`PodIndex`): each pod under ``(POD, namespace, name)`` (the room of
the pools that follow the nodes, :mod:`idlegate.operator.edge.nodes`), and a task pod also
under ``(TASK, namespace, workflow)`` (what a workflow is admitted from). :class:`Tagged`
reads one of the two as the index it stands for, keyed without its tag.

kopf's index had a meaning of its own: kopf runs no handler before every index has had its
first listing. Ours says when its listing ended (:class:`Listing`): kopf's watch stream
marks the end of a watch's first listing (its ``Bookmark.LISTED``), which kopf keeps to
itself, so :func:`install` wraps kopf's watch stream to tell it; the listing has ended once
every watched namespace marked it and the handler saw each pod it listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.errors import IdlegateError

POD, TASK = "pod", "task"
"""The tags of the index's keys: every pod by name, a task pod by its workflow."""

LISTENER = "_idlegate_pods_listed"
"""The attribute of kopf's settings object (one per operator) holding `install`'s listener."""


def pod_keys(namespace: str | None, name: str, labels: Mapping[str, str]) -> list[tuple[Any, ...]]:
    """The keys a pod is indexed under (the module docstring)."""
    keys: list[tuple[Any, ...]] = [(POD, namespace, name)]
    if LABEL_WORKFLOW in labels:
        keys.append((TASK, namespace, labels[LABEL_WORKFLOW]))
    return keys


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid", ""))


class PodIndex(dict[tuple[Any, ...], list[Mapping[str, Any]]]):
    """Every pod the watch told, by its `pod_keys`, as kopf's index held them (a key to the
    bodies under it), kept by :meth:`seen` at each of the pod's events."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: dict[str, list[tuple[Any, ...]]] = {}
        """Each pod's keys by uid (a label may change them)."""

    def seen(self, event: Mapping[str, Any]) -> str:
        """A pod's watch event (kopf's raw event): the pod as it is now, or gone; its uid."""
        body = event["object"]
        uid, meta = _uid(body), body.get("metadata") or {}
        for key in self._keys.pop(uid, ()):
            left = [b for b in self.get(key, ()) if _uid(b) != uid]
            if left:
                self[key] = left
            else:
                self.pop(key, None)
        if event.get("type") != "DELETED":
            keys = pod_keys(meta.get("namespace"), meta.get("name", ""), meta.get("labels") or {})
            self._keys[uid] = keys
            for key in keys:
                self.setdefault(key, []).append(body)
        return uid


class Listing:
    """The end of the pods watch's first listing, in each of `namespaces` (none: the
    cluster's one watch): `done` is set once each watch marked its listing's end (`listed`)
    and the handler saw (`handled`) every pod those listings held; it calls `then`."""

    def __init__(self, namespaces: Iterable[str], then: Callable[[], None] = lambda: None) -> None:
        self.waiting: set[str | None] = set(namespaces) or {None}
        self.pending: set[str] = set()
        """The uids listed that the handler has not seen yet."""
        self.handled_uids: set[str] = set()
        """The uids the handler saw before their listing ended (forgotten once done)."""
        self.done = asyncio.Event()
        self.then = then
        kopf_watching()  # (a kopf that cannot tell it: refused as the operator is built,
        # one line of the CLI, not at kopf's startup, which kopf retries every minute)

    def listed(self, namespace: str | None, uids: set[str]) -> None:
        """The watch of `namespace` (None: cluster-wide) ended its first listing of `uids`."""
        self.waiting.discard(namespace)
        self.pending |= uids - self.handled_uids
        self._check()

    def handled(self, uid: str) -> None:
        """The pod event handler saw pod `uid` (nothing once `done`)."""
        if self.done.is_set():
            return
        self.handled_uids.add(uid)
        self.pending.discard(uid)
        self._check()

    def _check(self) -> None:
        if not self.waiting and not self.pending and not self.done.is_set():
            self.handled_uids.clear()
            self.done.set()
            self.then()


def kopf_watching() -> ModuleType:
    """kopf's watch module, whose stream marks a listing's end (``Bookmark.LISTED``): kopf
    keeps it to itself, so constraints.txt pins the kopf this reads, and another is refused
    with what to install."""
    try:
        from kopf._cogs.clients import watching

        watching.Bookmark.LISTED  # noqa: B018
    except (ImportError, AttributeError) as error:
        raise IdlegateError(
            "the installed kopf does not say where a watch's first listing ends, which the "
            "operator waits on before it admits anything; install the kopf that "
            "constraints.txt pins (pip install -c constraints.txt '.[operator]')"
        ) from error
    return watching


def install(settings: Any, listener: Callable[[str | None, set[str]], None]) -> None:
    """Tell `listener` (`Listing.listed`) the end of each pods watch's first listing in the
    operator of kopf's `settings` (one object per operator), with the uids it listed:
    kopf's watch stream (wrapped once per process) yields the listing's objects as events of
    type None, then its ``Bookmark.LISTED``, which reaches no handler."""
    watching = kopf_watching()
    setattr(settings, LISTENER, listener)
    original = watching.infinite_watch
    if getattr(original, "_idlegate", False):
        return

    async def infinite_watch(*, settings: Any, resource: Any, **kwargs: Any) -> AsyncIterator[Any]:
        pods = resource.group == "" and resource.plural == "pods"
        uids: set[str] | None = set() if pods else None
        stream = original(settings=settings, resource=resource, **kwargs)
        async with contextlib.aclosing(stream):
            async for event in stream:
                if uids is not None:
                    if event is watching.Bookmark.LISTED:
                        listener = getattr(settings, LISTENER, None)
                        if listener is not None:
                            listener(kwargs.get("namespace"), uids)
                        uids = None
                    elif isinstance(event, dict) and event.get("type") is None:
                        uids.add(_uid(event.get("object") or {}))
                yield event

    infinite_watch._idlegate = True  # type: ignore[attr-defined]
    watching.infinite_watch = infinite_watch  # type: ignore[attr-defined]


def plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `body` (kopf's read-only view, or a raw event's object) as plain dicts and
    lists (what the bridge reads)."""
    return copy.deepcopy(dict(body))


class Tagged(Mapping[Any, Any]):
    """The entries of `index` (a `PodIndex`, live) under the keys tagged `tag`, keyed
    without the tag: ``Tagged(index, POD)[namespace, name]`` is ``index[POD, namespace, name]``."""

    def __init__(self, index: Mapping[Any, Any], tag: str) -> None:
        self.index, self.tag = index, tag

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        return self.index[(self.tag, *key)]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return (key[1:] for key in list(self.index) if key[0] == self.tag)

    def __len__(self) -> int:
        return sum(1 for _ in self)
