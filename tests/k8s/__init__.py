"""The Kubernetes side of the end-to-end tests, on kmock (see :mod:`tests.k8s.apiserver`).

* :mod:`.apiserver`: :class:`~tests.k8s.apiserver.Emulator`, kmock's emulator with the API
  server semantics the operator relies on;
* :mod:`.harness`: :class:`~tests.k8s.harness.ApiServer`, that emulator on a port in a thread,
  with a kubeconfig, accessors and ``kubectl``;
* :mod:`.kubelet`: :class:`~tests.k8s.kubelet.SimKubelet`, which runs gated pods once released;
* :mod:`.airflow_executor`: :class:`~tests.k8s.airflow_executor.AirflowExecutor`, a stand-in
  for Airflow's scheduler and KubernetesExecutor (its REST API, its gated worker pods);
* :mod:`._patching`: merge and JSON patches, the tests' one copy.
"""
