"""The test API server on a port: :class:`ApiServer` runs an :class:`Emulator` behind
``kmock.Server`` on 127.0.0.1 in a thread with its own event loop, writes a kubeconfig for
kopf, the ``kubernetes`` client and ``kubectl``, and gives the tests thread-safe accessors.

    with ApiServer(tmp_path) as api:
        api.create(PODS, {...}, namespace="default")
        api.kubectl("get", "pods")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar

import kmock
import yaml

from idlegate.api.crd import KINDS, render_crd
from tests.k8s.apiserver import EVENTS, Emulator
from tests.k8s.scheduler import KubeScheduler

T = TypeVar("T")


class LoopThread:
    """A server on its own event loop in a daemon thread, from enter to exit: a subclass's
    :meth:`_serve` sets ``_loop`` and ``_stop``, sets ``_ready`` once it listens, and returns
    once ``_stop`` is set. `what` names it in errors."""

    what = "the server"

    def __init__(self, thread_name: str) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=thread_name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError(f"{self.what} did not start within 10 s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        raise NotImplementedError

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` run in the server's loop."""
        assert self._loop is not None, f"{self.what} is not running"
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(30)


class ApiServer(LoopThread):
    """An :class:`Emulator` served in a background thread (see the module docstring)."""

    what = "the test API server"

    def __init__(self, directory: Path) -> None:
        super().__init__("k8s-api")
        self.emulator = Emulator()
        self.scheduler = KubeScheduler(self.emulator)
        """Binds pods to the Nodes once some exist (tests/k8s/scheduler.py)."""
        self.directory = Path(directory)
        self.kubeconfig = self.directory / "kubeconfig"
        self.url = ""
        self.mute: list[str] = []
        """Every Event the operator posted whose reason or message says nothing."""
        self.emulator.subscribe(self._heard)

    def _heard(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        ours = bool(obj.get("reportingComponent"))  # (the operator's; not a test's own)
        if res == EVENTS and etype == "ADDED" and ours and (why := says_nothing(obj)):
            self.mute.append(why)

    def assert_events_say_why(self) -> None:
        """Fail if an Event was posted with an empty reason, message or clause (issue 68)."""
        assert not self.mute, "\n".join(self.mute)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with kmock.Server(self.emulator) as server:
            self.url = f"http://{server.host}:{server.port}"
            write_kubeconfig(self.kubeconfig, self.url)
            self._ready.set()
            await self._stop.wait()
            self.emulator.close_watches()

    def resource(self, spec: kmock.resource | str) -> kmock.resource:
        """The served resource `spec` names: ``pods``, ``v1/pods``, ``group/version/plural``."""
        wanted = kmock.resource(spec)
        (found,) = [res for res in list(self.emulator.resources) if wanted.check(res)]
        return found

    def get(self, res: kmock.resource | str, namespace: str | None, name: str) -> dict | None:
        """The object, or None if there is none."""
        try:
            return self.call(self.emulator.get, self.resource(res), namespace, name)
        except kmock.KubernetesError as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self, res: kmock.resource | str, namespace: str | None = None, **selectors: str
    ) -> list:
        """The live objects (``label_selector=``, ``field_selector=`` as the API takes them)."""
        return self.call(self.emulator.list, self.resource(res), namespace, **selectors)

    def create(self, res: kmock.resource | str, body: dict, namespace: str | None = None) -> dict:
        return self.call(self.emulator.create, self.resource(res), body, namespace)

    def patch(
        self,
        res: kmock.resource | str,
        namespace: str | None,
        name: str,
        patch: Any,
        **options: str,
    ) -> dict:
        """Patch (``patch_type=`` merge or json, ``subresource=``)."""
        return self.call(self.emulator.patch, self.resource(res), namespace, name, patch, **options)

    def delete(self, res: kmock.resource | str, namespace: str | None, name: str) -> dict:
        return self.call(self.emulator.delete, self.resource(res), namespace, name)

    real = False
    """Not a real control plane (tests/k8s/real.py's is)."""

    def namespace_ready(self, namespace: str) -> None:
        """Pods may be created in a new namespace at once here: the emulator needs no
        ServiceAccount (a real API server does: tests/k8s/real.py waits for it)."""

    def subscribe(
        self, callback: Callable[[kmock.resource, str, dict[str, Any]], None], plurals: Any = None
    ) -> Callable[[], None]:
        """`callback(resource, event type, object)` for every write from now on (to any
        resource: `plurals` is for the real plane's watches, tests/k8s/real.py), until the
        returned function is called."""
        unsubscribe = self.call(lambda: self.emulator.subscribe(callback))
        return lambda: self.call(unsubscribe)

    def assert_no_internal_errors(self) -> None:
        """Fail if the emulator itself crashed on a request (a 500 that is a bug of the tests)."""
        assert not self.emulator.internal_errors, "\n".join(self.emulator.internal_errors)

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the real ``kubectl`` against this server; fail on a non-zero exit."""
        binary = shutil.which("kubectl")
        assert binary is not None, "kubectl is not installed"
        command = [
            binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.directory / 'kube-cache'}",
            *args,
        ]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
        assert result.returncode == 0, f"kubectl {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result


def write_kubeconfig(path: Path, url: str) -> None:
    """Write a kubeconfig for the server at `url` (a fixed token, no TLS)."""
    cluster = {"name": "test", "cluster": {"server": url}}
    user = {"name": "test", "user": {"token": "test"}}
    context = {"name": "test", "context": {"cluster": "test", "user": "test"}}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [user],
        "contexts": [context],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config))


_EMPTY = re.compile(r":\s*(?:[;,)]|\.(?:\s|$)|$)|\(\s*\)|;\s*;")
"""An empty clause: nothing after a colon ("waits for an executor: ; 3 stay free"), or
empty parentheses."""


def says_nothing(event: dict[str, Any]) -> str | None:
    """What is wrong with an Event whose reason, message or one of its clauses is empty (it
    and its object, for the failure), else None."""
    reason, message = event.get("reason") or "", event.get("message") or ""
    if reason.strip() and message.strip() and not _EMPTY.search(message):
        return None
    involved = event.get("involvedObject") or {}
    where = f"{involved.get('kind')} {involved.get('namespace')}/{involved.get('name')}"
    return f"{where}: {reason!r} {message!r}"


def serving_crd(directory: Path) -> Iterator[ApiServer]:
    """An API server serving the project's real CRDs (printer columns, status), for a module
    fixture to ``yield from``; at the end it fails if the emulator crashed on a request."""
    with ApiServer(directory) as server:
        for kind in KINDS:
            server.create("customresourcedefinitions", render_crd(kind))
        yield server
        server.assert_no_internal_errors()
        server.assert_events_say_why()
