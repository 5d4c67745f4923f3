"""Where a data set is found when the user names none: beside a checkout, never guessed.

Real traces are data, never part of the repository. A user names their directory (a
flag or an environment variable); a developer's checkout finds them in
``<checkout>/../shared/data/<name>`` by itself. `checkout_data_dir` is that one rule,
shared by every trace loader (`sim.tpch`, `sim.alibaba`), as is `resolve_data_dir`, the
one check of the directory a loader is given.
"""

from __future__ import annotations

import os
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
    src = module.resolve().parents[2]
    checkout = src.parent
    if src.name != "src" or not (checkout / "pyproject.toml").is_file():
        return None
    found = checkout.parent / "shared" / "data" / name
    return found if found.is_dir() else None


def default_data_dir(env_var: str, name: str) -> Path | None:
    """`$env_var` if set, else the checkout's ``../shared/data/<name>``, else None."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    return checkout_data_dir(name)


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
