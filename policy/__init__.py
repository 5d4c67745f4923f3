"""Scheduling policies: baseline heuristics, the analytic idle rule, features and the learned policy.

Every policy answers the `Scheduler` protocol of `idlegate.sim.cluster`. Build a
baseline by name with `make_scheduler("fair")`; `SCHEDULERS` lists the names.
"""

# analytic imports heuristics, so it registers itself here rather than in heuristics
from idlegate.policy.analytic import make_analytic
from idlegate.policy.heuristics import SCHEDULERS, make_scheduler

SCHEDULERS["analytic"] = make_analytic

__all__ = ["SCHEDULERS", "make_scheduler"]
