"""Test infrastructure for the Kubernetes operator: an API server emulator and a kubelet.

* :mod:`.apiserver` — :class:`KubeApiEmulator` (kmock 0.8 + a real-API-server
  compatibility layer), :class:`ApiServer` (runs it in a background thread on
  127.0.0.1, writes a kubeconfig, offers thread-safe accessors), plus
  :func:`apiserver_fixture` / :func:`running_apiserver` and :func:`make_crd`.
* :mod:`.kubelet` — :class:`SimKubelet`, a simulated scheduler + kubelet that
  honours ``spec.schedulingGates`` and runs pods for their declared durations.
"""

from tests.k8s.apiserver import (
    ApiServer,
    KubeApiEmulator,
    Route,
    api_error,
    apiserver_fixture,
    make_crd,
    parse_route,
    running_apiserver,
)
from tests.k8s.kubelet import SimKubelet

__all__ = [
    "ApiServer",
    "KubeApiEmulator",
    "Route",
    "SimKubelet",
    "api_error",
    "apiserver_fixture",
    "make_crd",
    "parse_route",
    "running_apiserver",
]
