"""Which tests read the shared data, so that CI runs just those once more with it hidden.

A fresh clone has no ``../shared/data``, and every test that reads it must then skip with
its reason (or pass without it). Running the whole suite twice would double CI's time, and
a list kept by hand goes stale, so the suite lists them itself: with
``--list-data-tests=FILE`` each test that found a data set is written to FILE, and
``--only-tests-in=FILE`` runs only the tests FILE names (``make test-without-data`` runs
them with ``IDLEGATE_SHARED_DATA`` pointing at an empty folder).

A test counts as reading data when, while it runs (fixtures included):

* the simulator's default data folder is found (the audit event ``idlegate.data`` that
  `idlegate.sim.datadirs.found_data` raises): a TPC-H or Alibaba workload, or ``mixed``,
  whose DAGs are TPC-H's only when the traces are found;
* a file under a data folder is opened (``tests.helpers.shared_path``, ``$IDLEGATE_TPCH_DIR``,
  ``$IDLEGATE_ALIBABA_DIR``);
* it starts a process whose command line names a data set (``-w tpch``, an SWF trace):
  the process finds the data by itself, out of this one's sight;
* it uses a fixture that read data when it was set up (a module's fixture is set up
  for its first test only, and the tests after it read what it read).

Python's audit hooks cannot be removed, so one hook is installed per process and it
reports to `RECORDER`, whose `running` is the test under way (None: record nothing).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from idlegate.sim.datadirs import shared_data_dir

DATA_SETS = ("tpch", "alibaba", "swf", "argo")
NAMED = re.compile(r"\b(tpch|alibaba|mixed|swf|argo|lublin_256)\b|shared/data")
"""A command line that names a data set (or the workload that uses TPC-H when found)."""


def data_roots() -> tuple[str, ...]:
    """The folders whose files are data: each data set's folder as the tests find it, and
    the folders the trace variables name."""
    roots = [shared_data_dir(name) for name in DATA_SETS]
    roots += [
        Path(v) for v in map(os.environ.get, ("IDLEGATE_TPCH_DIR", "IDLEGATE_ALIBABA_DIR")) if v
    ]
    # as written and as resolved (../shared may be a link): an open's path is only made
    # absolute, since resolving every file the suite opens would cost a stat a component
    paths = [Path(r) for r in roots if r is not None]
    return tuple({f"{p}{os.sep}" for r in paths for p in (os.path.abspath(r), r.resolve())})


class Recorder:
    """The tests that read data, from the audit events raised while each runs."""

    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = tuple(roots)
        self.running: str | None = None
        self.found: set[str] = set()
        self.fixtures: list[str] = []
        """The fixtures being set up, innermost last."""
        self.data_fixtures: set[str] = set()
        """The fixtures whose setup read data, by name."""

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.running is None:
            return
        if (
            event == "idlegate.data"
            or (event == "open" and self._under_roots(args[0]))
            or (event == "subprocess.Popen" and NAMED.search(" ".join(map(str, args[1] or ()))))
        ):
            self.found.add(self.running)
            self.data_fixtures.update(self.fixtures)

    def _under_roots(self, path: object) -> bool:
        if not isinstance(path, str | Path) or not self.roots:
            return False
        return os.path.abspath(path).startswith(self.roots)

    @contextmanager
    def watching(self, nodeid: str, fixtures: Iterable[str] = ()) -> Iterator[None]:
        """Record what the test `nodeid`, using `fixtures`, reads while this runs."""
        self.running = nodeid
        try:
            yield
        finally:
            self.running = None
            if self.data_fixtures.intersection(fixtures):
                self.found.add(nodeid)

    @contextmanager
    def setting_up(self, fixture: str) -> Iterator[None]:
        self.fixtures.append(fixture)
        try:
            yield
        finally:
            self.fixtures.pop()


RECORDER: Recorder | None = None
_HOOKED = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if RECORDER is not None:
        RECORDER.audit(event, args)


def install() -> None:
    """Report this process's audit events to `RECORDER` (once: a hook stays for good)."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("idlegate data")
    group.addoption(
        "--list-data-tests",
        metavar="FILE",
        help="write the node ids of the tests that read ../shared/data (or the trace "
        "variables' folders) to FILE, one a line",
    )
    group.addoption(
        "--only-tests-in",
        metavar="FILE",
        help="run only the tests whose node ids FILE lists (from --list-data-tests)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global RECORDER
    listing = config.getoption("--list-data-tests")
    if not listing:
        return
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        Path(listing).parent.mkdir(parents=True, exist_ok=True)
        Path(listing).write_text("")
    RECORDER = Recorder(data_roots())
    install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if RECORDER is None:
        return (yield)
    with RECORDER.watching(item.nodeid, getattr(item, "fixturenames", ())):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Iterator[Any]:
    if RECORDER is None:
        return (yield)
    with RECORDER.setting_up(fixturedef.argname):
        return (yield)


def pytest_sessionfinish(session: pytest.Session) -> None:
    listing = session.config.getoption("--list-data-tests")
    if RECORDER is None or not listing or not RECORDER.found:
        return
    # each xdist worker appends its own tests, in one write
    with open(listing, "a", encoding="utf-8") as f:
        f.write("".join(f"{nodeid}\n" for nodeid in sorted(RECORDER.found)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only = config.getoption("--only-tests-in")
    if not only:
        return
    path = Path(only)
    if not path.is_file():
        raise pytest.UsageError(
            f"--only-tests-in {only}: no such file; run the suite with --list-data-tests="
            f"{only} first (make test writes it)"
        )
    wanted = set(path.read_text(encoding="utf-8").splitlines())
    keep = [i for i in items if i.nodeid in wanted]
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in wanted])
    items[:] = keep
