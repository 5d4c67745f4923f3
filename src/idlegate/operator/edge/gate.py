"""Whether this replica may write now: the one gate of every write the operator sends.

Without leader election the gate stays open. With it, :func:`idlegate.operator.edge.leader.elect`
binds it, once, to the replica's elector: open only while that elector leads. The API
client (:class:`~idlegate.operator.edge.kube.KubeApi`), the lanes and the applier are each
given the same gate when they are built, so that none of them needs rewiring afterwards.
"""

from __future__ import annotations

from collections.abc import Callable


class WriteGate:
    """Open unless bound to an elector that does not lead now."""

    def __init__(self) -> None:
        self._leads: Callable[[], bool] | None = None

    def follow(self, leads: Callable[[], bool]) -> None:
        """Open from now on only while `leads()` (the elector's; bound once: one election
        per replica)."""
        if self._leads is not None:
            raise RuntimeError("This write gate already follows an elector.")
        self._leads = leads

    def open(self) -> bool:
        """Whether a write may be sent now."""
        return self._leads is None or self._leads()
