"""idlegate's Kubernetes API, version ``idlegate.io/v1alpha1``: what users write and read.

The custom resources (``DagWorkflow``, ``DagCronWorkflow``, ``ExecutorPool``) as pydantic
models and the CRDs generated from them, the status the operator writes, the labels and the
gate on task pods, the admission rules for pod templates (Pod Security), and ``idlegate
lint``, which checks manifests offline against all of it. Nothing here talks to a cluster:
the operator (:mod:`idlegate.operator`) and the offline tools both build on this package.
The workflow spec itself is :mod:`idlegate.sim.spec`, shared with the simulator.
"""
