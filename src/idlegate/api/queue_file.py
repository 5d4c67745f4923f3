"""A file of a pool's queues (``--queues FILE``): YAML or JSON, a list of queues or
``{queues: [...]}``, each read by the one parser, `idlegate.sim.queues.queues_from`."""

from __future__ import annotations

from pathlib import Path

import yaml

from idlegate.errors import IdlegateError
from idlegate.sim.queues import QueueSpec, queues_from


def read_queues(path: Path | str) -> tuple[QueueSpec, ...]:
    """The queues of the file at `path`; IdlegateError naming the file for a missing or
    unreadable one, or a bad queue."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise IdlegateError(f"{where}: cannot read the queues file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise IdlegateError(
            f"{where} is not YAML or JSON ({' '.join(str(exc).split())}); give a list of "
            "queues, e.g. - {name: team-a, nominal: {pods: 10}}"
        ) from None
    return queues_from(data, where=where)
