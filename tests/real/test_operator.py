"""A DagWorkflow's life on the real control plane: the scenarios of tests/test_e2e_operator.py
that need nothing of the test API server's insides, run here unchanged (tests/real/conftest.py)."""

from tests.test_e2e_operator import (  # noqa: F401  (collected here, on the real plane)
    test_diamond_completes_with_the_right_jct,
)
