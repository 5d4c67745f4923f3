"""idlegate: idle-aware scheduling of DAG workflows (simulator, policy, operator)."""

__version__ = "0.1.0"
