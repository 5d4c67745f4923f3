"""Whether this replica may write now: the one gate of every write the operator sends.

Without leader election the gate stays open. With it, :func:`idlegate.operator.edge.leader.elect`
binds it, once, to the replica's elector: open only while that elector leads. The API
client (:class:`~idlegate.operator.edge.kube.KubeApi`), the lanes and the applier are each
given the same gate when they are built, so that none of them needs rewiring afterwards.
"""

from __future__ import annotations

from typing import Protocol


class Leading(Protocol):
    """What the gate follows (:class:`~idlegate.operator.edge.leader.Elector`)."""

    @property
    def is_leader(self) -> bool: ...


class WriteGate:
    """Open unless bound to an elector that does not lead now."""

    def __init__(self) -> None:
        self._elector: Leading | None = None

    def follow(self, elector: Leading) -> None:
        """Open from now on only while `elector` leads (bound once: one election per
        replica)."""
        if self._elector is not None:
            raise RuntimeError("This write gate already follows an elector.")
        self._elector = elector

    def open(self) -> bool:
        """Whether a write may be sent now."""
        return self._elector is None or self._elector.is_leader
