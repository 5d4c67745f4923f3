"""Fixtures shared by several test modules."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# which tests read ../shared/data (make test-without-data): tests/data_tests.py
from tests.data_tests import (  # noqa: F401 (pytest finds hooks by their names here)
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_fixture_setup,
    pytest_runtest_protocol,
    pytest_sessionfinish,
)

# Property tests judge what they generate, never how fast: no per-example deadline and no
# health check that fails a test for slow generation (a loaded machine is no defect). A test's
# own @settings still overrides the rest (its number of examples).
settings.register_profile(
    "idlegate",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("idlegate")


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """Undo what a test configured of the logging: a test that runs the operator's CLI in
    this process (test_cli) has kopf add a handler to the root logger bound to the stderr
    the CLI runner captured, and close; every record after it, in any later test (the API
    emulator's aiohttp access log), printed a 'Logging error' traceback. The handlers of
    pytest's own logging plugin come and go with each phase and are left to it."""
    root, quiet = logging.getLogger(), logging.getLogger("asyncio")
    before = (root.level, list(root.handlers), quiet.propagate, list(quiet.handlers))
    yield
    level, handlers, propagate, quiet_handlers = before
    pytests = [h for h in root.handlers if type(h).__module__.startswith("_pytest")]
    root.handlers[:] = [
        *(h for h in handlers if not type(h).__module__.startswith("_pytest")),
        *pytests,
    ]
    root.setLevel(level)
    quiet.propagate, quiet.handlers[:] = propagate, quiet_handlers


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Tiny tensors: torch's thread pool only adds contention (badly so on a busy machine).

    Torch modules apply it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``;
    torch is imported here only when such a module runs.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- the emulated cluster of the end-to-end tests ------------------------------------------------
# Imported lazily: the modules that use them import kopf and kmock; the others need neither.


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An emulated API server serving the project's CRDs, for one test module."""
    from tests.k8s.harness import serving_crd

    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


@pytest.fixture()
def ns(request: pytest.FixtureRequest, api: Any) -> str:
    """A fresh namespace, named after the test module (test_e2e_cron: e2e-cron-...)."""
    from tests.e2e import new_namespace

    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    return new_namespace(api, module.replace("_", "-"))


@pytest.fixture()
def kubelet(api: Any, ns: str) -> Iterator[Any]:
    """A simulated kubelet running the namespace's pods, at the e2e clock's speed."""
    from tests.e2e import SPEED
    from tests.k8s.kubelet import SimKubelet

    with SimKubelet(api, ns, time_factor=1 / SPEED) as k:
        yield k


@pytest.fixture()
def monitor(api: Any, ns: str) -> Iterator[Any]:
    """The namespace's pods watched: created, running at once, duplicates."""
    from tests.e2e import PodMonitor

    mon = PodMonitor(api, ns)
    yield mon
    mon.close()
