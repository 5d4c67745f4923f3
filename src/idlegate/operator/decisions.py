"""Loading the operator's policy (``--scheduler``, an ExecutorPool's ``spec.policy``, a
reload of its model files); asking it is the core's (:mod:`idlegate.operator.core.decider`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from idlegate.errors import IdlegateError
from idlegate.operator.core.decider import DEFAULT_HEURISTIC
from idlegate.sim.protocol import Scheduler

if TYPE_CHECKING:
    from idlegate.policy.spec import SchedulerSpec

log = logging.getLogger(__name__)


def load_scheduler(spec: str | None) -> Scheduler:
    """The scheduler for ``--scheduler`` (`idlegate.policy.spec`; None: ``default``, the
    portfolio, `idlegate.policy.DEFAULT_SCHEDULER`). Only ``default`` falls back, to
    ``fair`` with a warning, when it cannot be built (the shipped model it starts from
    missing or broken); any other spec that cannot be built raises IdlegateError (the
    operator does not start)."""
    from idlegate.policy import SchedulerSpec, make_scheduler

    parsed = SchedulerSpec.parse(spec or "default")
    try:
        return build_scheduler(parsed)
    except IdlegateError as exc:
        if parsed.kind != "default":
            raise
        log.warning(
            "The default scheduler cannot be used (%s); using %r. Pass --scheduler to choose one.",
            exc,
            DEFAULT_HEURISTIC,
        )
        return make_scheduler(DEFAULT_HEURISTIC)


def build_scheduler(spec: SchedulerSpec | str | None) -> Scheduler:
    """The scheduler `spec` names (None: ``default``), without any fallback: the check a
    policy passes at the start and at every reload of its model files
    (:mod:`idlegate.operator.edge.reload`). An ONNX model is probed on a small state as it
    loads (`idlegate.policy.onnx_runtime`). IdlegateError says what is wrong."""
    from idlegate.policy import SchedulerSpec, make_scheduler

    parsed = SchedulerSpec.of(spec or "default")
    try:
        return make_scheduler(parsed)
    except ImportError as exc:
        raise IdlegateError(
            f"cannot use the scheduler {parsed.format()!r}: the ONNX runtime is not available "
            f"({exc}); install the operator extra (pip install 'idlegate[operator]')"
        ) from None
