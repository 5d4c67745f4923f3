"""One call to stop tasks and what became of each victim as the API answered (issue 82):
the book `Core.stop_tasks` keeps while a reclaim's evictions are asked, counted in the
order `idlegate.api.eviction`'s docstring tells (point 1: that many asked at once, the
next one asked for each not stopped, until enough are stopped or none is left)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from idlegate.errors import IdlegateError


@dataclass(eq=False)
class Evictions:
    """One call to stop tasks: the `victims` (executors) in the order to try them, how many
    are `needed`, and for whom (`queue`, `reason`); what became of each as the API
    answers (the module docstring, point 1)."""

    victims: tuple[int, ...]
    needed: int
    queue: str
    reason: str
    decided: str | None = None
    """How a ``decide: Forecast`` queue's stops were decided (`idlegate.operator.core.judging`:
    the verdict's clause, or the rules' when none came), said on each ``Preempted`` Event."""
    asked: set[int] = field(default_factory=set)
    """Victims whose eviction is asked and not answered yet."""
    stopped: list[int] = field(default_factory=list)
    """Victims stopped, in the order their evictions were taken."""
    ended: list[int] = field(default_factory=list)
    """Victims whose task ended by itself first (as much room, nothing stopped)."""
    refused: dict[int, str] = field(default_factory=dict)
    """Victims not stopped, with why (a PodDisruptionBudget's refusal, not stoppable)."""
    _tried: int = 0

    def __post_init__(self) -> None:
        if self.needed < 1:
            raise IdlegateError(f"stopping tasks needs at least one, not {self.needed}")
        if len(set(self.victims)) != len(self.victims):
            raise IdlegateError(f"a task is named twice among the victims {self.victims}")

    def take(self) -> int | None:
        """The next victim to ask for, while fewer than `needed` are stopped or asked;
        None when enough are (or none is left)."""
        if len(self.stopped) + len(self.ended) + len(self.asked) >= self.needed:
            return None
        if self._tried == len(self.victims):
            return None
        victim = self.victims[self._tried]
        self._tried += 1
        self.asked.add(victim)
        return victim

    def ask(self, evict: Callable[[int], str | None]) -> None:
        """Ask `evict` for the next victims (`take`) while too few are stopped or asked:
        it asks for one's eviction, or says why it is not stopped."""
        while (victim := self.take()) is not None:
            if (why := evict(victim)) is not None:
                self.settle(victim, why=why)

    def settle(self, victim: int, *, stopped: bool = False, why: str | None = None) -> None:
        """`victim`'s answer: stopped, refused (`why`), else ended by itself."""
        self.asked.discard(victim)
        if stopped:
            self.stopped.append(victim)
        elif why is not None:
            self.refused[victim] = why
        else:
            self.ended.append(victim)

    @property
    def done(self) -> bool:
        """Every answer is in: enough were stopped, or none is left to ask."""
        return not self.asked and (
            len(self.stopped) + len(self.ended) >= self.needed or self._tried == len(self.victims)
        )
