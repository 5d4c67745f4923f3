"""The end-to-end scenarios on a real control plane (tests/k8s/real.py)."""
