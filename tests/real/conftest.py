"""Fixtures of the real control plane's tests: the same names as the test API server's
(tests/conftest.py), so a scenario of a test_e2e_* module imported here runs unchanged.

One plane per test process (pytest-xdist worker), started at the first test that needs it
(about 5 s) and stopped at the end; KWOK runs each pod for its declared duration divided
by the e2e clock's SPEED, as the simulated kubelet does. Each test gets its own namespace.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import pytest

from idlegate.controlplane.launcher import NodeSpec
from tests.e2e import SPEED, PodMonitor, new_namespace
from tests.k8s.real import RealApiServer, real_plane

NODES = [NodeSpec(count=3, cpu="8", memory="32Gi", gpu=0)]
"""Room for every scenario's pool (the operator's executors bound what runs, not them)."""


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealApiServer]:
    yield from real_plane(tmp_path_factory.mktemp("plane"), SPEED, NODES)


@pytest.fixture(scope="module")
def api(plane: RealApiServer) -> RealApiServer:
    return plane


@pytest.fixture()
def ns(request: pytest.FixtureRequest, api: RealApiServer) -> Iterator[str]:
    """A fresh namespace with its ServiceAccount (a pod needs it); at the end, every Event
    the operator posted there must say why."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = new_namespace(api, "real-" + module.replace("_", "-"))
    yield name
    api.assert_events_say_why(name)


@pytest.fixture()
def kubelet() -> Iterator[Any]:
    """KWOK plays every kubelet (its stages: idlegate.controlplane.kwok): a pod runs what it
    declares and a deleted one stops in KWOK's STOP_SECONDS, so what a scenario sets of the
    simulated kubelet (``durations``, ``stop_seconds``) is kept here and not used."""
    yield types.SimpleNamespace()


@pytest.fixture()
def monitor(api: RealApiServer, ns: str) -> Iterator[PodMonitor]:
    mon = PodMonitor(api, ns)
    yield mon
    mon.close()
