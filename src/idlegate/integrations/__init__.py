"""idlegate's clients of other systems' APIs (Airflow's REST API), over plain HTTP.

Above the simulator: `idlegate.sim` maps what these read (pure dicts in, jobs out) and
imports nothing of this package.
"""
