"""Where a data set is found when the user names none: beside a checkout, never guessed.

Real traces are data, never part of the repository. A user names their directory (a
flag or an environment variable); a developer's checkout finds them in
``<checkout>/../shared/data/<name>`` by itself. `checkout_data_dir` is that one rule,
shared by every trace loader (`sim.tpch`, `sim.alibaba`), as is `resolve_data_dir`, the
one check of the directory a loader is given.

``$IDLEGATE_SHARED_DATA`` names another folder of data sets in place of the checkout's
``../shared/data`` (`shared_data_dir`); an empty folder hides them all, which is how CI
runs the tests that read data once more without it (the Makefile's ``test-without-data``).
Every default found raises the audit event ``idlegate.data`` (name, path), so that a test
run can list the tests that found data (tests/conftest.py) without knowing them in advance.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from idlegate.errors import IdlegateError

_THIS_MODULE = Path(__file__)


def checkout_data_dir(name: str, module: Path = _THIS_MODULE) -> Path | None:
    """``<checkout>/../shared/data/<name>`` if this package runs from a checkout and that
    directory exists, else None.

    A checkout is recognised by its layout, not assumed: `module` (a module of
    ``idlegate.sim``) is ``<checkout>/src/idlegate/sim/<module>.py`` beside
    ``<checkout>/pyproject.toml`` (an editable install, or ``PYTHONPATH=src``). An
    installed package (site-packages) has no checkout, and so no default."""
    found = _beside_checkout(name, module)
    return found if found is not None and found.is_dir() else None


def _beside_checkout(name: str, module: Path) -> Path | None:
    """``<checkout>/../shared/data/<name>``, existing or not; None outside a checkout."""
    src = module.resolve().parents[2]
    checkout = src.parent
    if src.name != "src" or not (checkout / "pyproject.toml").is_file():
        return None
    return checkout.parent / "shared" / "data" / name


SHARED_ENV_VAR = "IDLEGATE_SHARED_DATA"
"""A folder of data sets (``tpch/``, ``alibaba/``, ``swf/``, ``argo/``) in place of the
checkout's ``../shared/data``."""


def shared_data_dir(name: str, module: Path = _THIS_MODULE) -> Path | None:
    """Where the data set `name` is looked for when no flag or variable of its own names it:
    ``$IDLEGATE_SHARED_DATA/<name>`` if that variable is set, else the checkout's
    ``../shared/data/<name>``, else None (an installed package); the path is returned
    whether or not it exists, so that a message can say where it was looked for."""
    root = os.environ.get(SHARED_ENV_VAR)
    if root:
        return Path(root).expanduser() / name
    return _beside_checkout(name, module)


def found_data(name: str, path: Path | None) -> Path | None:
    """`path` if it is a directory, else None; raises the audit event ``idlegate.data``
    for a directory found (the module docstring says who listens)."""
    if path is None or not path.is_dir():
        return None
    sys.audit("idlegate.data", name, str(path))
    return path


def default_data_dir(env_var: str, name: str) -> Path | None:
    """`$env_var` if set, else `shared_data_dir(name)` if it exists, else None."""
    env = os.environ.get(env_var)
    if env:
        path = Path(env).expanduser()
        found_data(name, path)
        return path
    return found_data(name, shared_data_dir(name))


def resolve_data_dir(
    directory: str | Path | None, default: Path | None, trace: str, hint: str, holding: str
) -> Path:
    """`directory`, else `default`; an IdlegateError naming the `trace` (e.g. "TPC-H") and
    saying how to give it (`hint`) when there is none, or it is missing or a file.
    `holding` tells a user who gave none what the directory holds."""
    path = Path(directory).expanduser() if directory is not None else default
    if path is None:
        raise IdlegateError(f"no {trace} trace directory given; {hint} ({holding})")
    if not path.is_dir():
        what = "is a file, not a directory" if path.exists() else "does not exist"
        raise IdlegateError(f"{trace} trace directory {path} {what}; {hint}")
    return path
