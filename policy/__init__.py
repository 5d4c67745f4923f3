"""Scheduling policies: baseline heuristics (and, later, features and the learned policy).

Every policy answers the `Scheduler` protocol of `idlegate.sim.cluster`. Build a
baseline by name with `make_scheduler("fair")`; `SCHEDULERS` lists the names.
"""

from idlegate.policy.heuristics import SCHEDULERS, make_scheduler

__all__ = ["SCHEDULERS", "make_scheduler"]
