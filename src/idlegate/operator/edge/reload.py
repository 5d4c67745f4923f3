"""Hot reload: the operator follows the model files of its policy without restarting.

What a user sees (the specs whose files are watched, the Events, the metric) is in
deploy/README.md ("Hot reload and shadow mode"). A :class:`PolicyWatch` looks at the files
of one spec (:func:`model_files`) every ``--policy-reload-interval`` seconds (loop time:
tests step it with :meth:`PolicyWatch.check`): at what each path resolves to now, its
inode, size and mtime (a ConfigMap swaps a ``..data`` symlink), and when any changed, at
the SHA-256 of the content, so a touched file reloads nothing. A new content is built by
`build_scheduler` (the start's probe) in a thread and handed over in the event loop
between two rounds (the pool's `use_policy`); one that fails keeps the policy in use, and
is tried once.

Every pool reloads (:class:`Reloads`): a pool without ``spec.policy`` follows
``--scheduler`` and gets a policy object of its own built from the same new files; a pool
whose ``spec.policy`` names model files has a watch of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from idlegate.api.notices import Notice
from idlegate.api.pool_spec import DEFAULT_POOL
from idlegate.errors import IdlegateError
from idlegate.operator.decisions import build_scheduler
from idlegate.policy import model_files
from idlegate.sim.protocol import Scheduler

if TYPE_CHECKING:
    from idlegate.api.settings import Settings
    from idlegate.operator.edge.bridge import Bridge
    from idlegate.operator.edge.pools import Pools
    from idlegate.operator.features.shadow import Shadow
    from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)

Stamp = tuple[str, int, int, int] | None
"""(resolved path, inode, size, mtime in ns) of one file; None: it is missing."""


def stamp(path: Path) -> Stamp:
    """What `path` resolves to now and that file's identity (cheap: no read)."""
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except OSError:
        return None
    return (str(real), st.st_ino, st.st_size, st.st_mtime_ns)


def digest(paths: tuple[Path, ...]) -> str:
    """SHA-256 over the contents of `paths`; IdlegateError naming a file that cannot be read."""
    sha = hashlib.sha256()
    for path in paths:
        try:
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    sha.update(block)
        except OSError as exc:
            raise IdlegateError(
                f"the model file {str(path)!r} cannot be read ({exc.strerror or exc}); "
                "check that the volume or ConfigMap still holds it"
            ) from None
        sha.update(b"\0")
    return sha.hexdigest()


class PolicyWatch:
    """The model files of one policy spec, looked at on demand or every interval."""

    def __init__(
        self,
        spec: str | None,
        *,
        role: str,
        current: Callable[[], Scheduler],
        users: Callable[[], Sequence[Callable[[Scheduler], None]]],
        metrics: Metrics,
        report: Callable[[Notice], None] = lambda notice: None,
    ) -> None:
        self.spec = spec
        self.role = role
        """``active`` or ``shadow``: the metric's label and the Events' word."""
        self.current = current
        """The policy in use now (named in the Events)."""
        self.users = users
        """Who takes a new model (the first is named in the Events; more: the pools that follow
        ``--scheduler``), each a policy object of its own, in the event loop between two rounds."""
        self.metrics = metrics
        self.report = report
        self.files = model_files(spec)
        self.where = ", ".join(str(p) for p in self.files)
        self.stamps = tuple(map(stamp, self.files))
        self.digest: str | None = None
        """The content in use (the files as they were when this watch was made)."""
        if self.files and None not in self.stamps:
            self.digest = digest(self.files)

    async def run(self, interval: float) -> None:
        """Look every `interval` seconds, for ever (cancel to stop)."""
        while True:
            await asyncio.sleep(interval)
            await self.check()

    async def check(self) -> bool | None:
        """One look: True if a new model was loaded and applied, False if one failed, None
        if nothing changed."""
        now = tuple(map(stamp, self.files))
        if not self.files or now == self.stamps:
            return None
        self.stamps = now
        try:
            sha = await asyncio.to_thread(digest, self.files)
            if sha == self.digest:
                return None  # touched, or its directory swapped with the same content
            users = self.users()
            built = await asyncio.to_thread(lambda: [build_scheduler(self.spec) for _ in users])
        except Exception as exc:  # whatever the new files do, the policy in use stays
            self._failed(exc)
            return False
        self.digest = sha
        for use, policy in zip(users, built, strict=True):
            use(policy)
        reloaded = (
            f"The {self.role} policy {built[0].name} was reloaded from {self.where} (sha256 "
            f"{sha[:12]}); it decides from the next decision round on."
        )
        self._tell("ok", ("Normal", "PolicyReloaded", reloaded))
        return True

    def _failed(self, exc: Exception) -> None:
        ours = isinstance(exc, IdlegateError)  # (told as it is; anything else, its traceback)
        problem = str(exc) if ours else f"{type(exc).__name__}: {exc}"
        failed = (
            f"The {self.role} policy's model changed ({self.where}) but cannot be used: "
            f"{problem}. The operator keeps the policy {self.current().name} it had; fix or "
            "replace the file to try again."
        )
        self._tell("failed", ("Warning", "PolicyReloadFailed", failed), None if ours else exc)

    def _tell(self, result: str, notice: Notice, exc: Exception | None = None) -> None:
        """Count, log and report (as an Event on the operator's Pod) a reload's `result`."""
        self.metrics.policy_reloads.labels(self.role, result).inc()
        level = logging.INFO if result == "ok" else logging.ERROR
        log.log(level, "%s", notice[2], exc_info=exc)
        self.report(notice)


class Reloads:
    """Every watch of model files: ``--scheduler``'s (its new model goes to the default pool
    and, as an object of its own, to each pool without ``spec.policy``), ``--shadow``'s, and
    each ExecutorPool's ``spec.policy``'s, from its creation or last change of spec until
    the next. None with an interval of 0, for a policy object given in
    `Settings.scheduler`, or for a spec without files."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        report: Callable[[Notice], None],
        *,
        active: Callable[[], Scheduler],
        use: Callable[[Scheduler], None],
        shadow: Shadow | None = None,
    ) -> None:
        self.settings = settings
        self.pools: Pools
        """Set by :meth:`start`, before any watch runs or a pool changes."""
        self._watch = watch = partial(PolicyWatch, metrics=metrics, report=report)
        watches = []
        if settings.scheduler is None:
            users = partial(self._following, use)
            watches.append(watch(settings.policy, role="active", current=active, users=users))
        if shadow is not None and settings.shadow is not None:
            current, replace = (lambda: shadow.policy), (lambda: [shadow.replace])
            watches.append(watch(settings.shadow, role="shadow", current=current, users=replace))
        self.watches = [w for w in watches if w.files and settings.policy_reload_interval]
        """The operator's own: of its policy and of its shadow."""
        self._tasks: list[asyncio.Task[None]] = []
        self._pools: dict[str, tuple[Bridge, asyncio.Task[None]]] = {}
        """Each pool's own watch, with the state machine it reloads."""

    def start(self, pools: Pools) -> None:
        """Run the operator's watches in the running loop; the pools' follow :meth:`changed`."""
        self.pools = pools
        loop, every = asyncio.get_running_loop(), self.settings.policy_reload_interval
        self._tasks = [loop.create_task(w.run(every)) for w in self.watches]

    async def stop(self) -> None:
        """Stop every watch."""
        tasks = self._tasks + [task for _, task in self._pools.values()]
        self._tasks, self._pools = [], {}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _following(self, use: Callable[[Scheduler], None]) -> list[Callable[[Scheduler], None]]:
        """Who takes a new model of ``--scheduler``: the default pool (`use`), then each
        pool without ``spec.policy``."""
        return [use] + [
            partial(self._use, name, bridge)
            for name, bridge in self.pools.bridges.items()
            if name != DEFAULT_POOL and not self.pools.specs[name].policy
        ]

    def _use(self, name: str, bridge: Bridge, policy: Scheduler) -> None:
        if self.pools.bridges.get(name) is bridge:
            bridge.use_policy(policy)  # (a pool rebuilt meanwhile loaded the files itself)

    def changed(self, name: str) -> None:
        """Pool `name` was applied (or removed): a pool rebuilt with a ``spec.policy`` that
        names model files gets a watch of its own, and a gone pool's watch stops."""
        bridge = self.pools.bridges.get(name)
        old = self._pools.get(name)
        if old is not None and old[0] is bridge:
            return  # (the same state machine: its watch goes on)
        if old is not None:
            old[1].cancel()
            del self._pools[name]
        every = self.settings.policy_reload_interval
        spec = self.pools.specs[name].policy if bridge else None
        if bridge is None or not spec or not every or not model_files(spec):
            return
        current, users = (
            (lambda: bridge.scheduler),
            (lambda: [partial(self._use, name, bridge)]),
        )
        watch = self._watch(spec, role="active", current=current, users=users)
        self._pools[name] = (bridge, asyncio.get_running_loop().create_task(watch.run(every)))
