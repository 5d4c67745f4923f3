"""Deployment assets (CRD, kustomize base, kind configuration) and their generators."""
