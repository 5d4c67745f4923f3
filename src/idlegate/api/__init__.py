"""idlegate's Kubernetes API, version ``idlegate.io/v1alpha1``: what users write and read.

The custom resources (``DagWorkflow``, ``DagCronWorkflow``, ``ExecutorPool``) as pydantic
models and the CRDs generated from them, the status the operator writes, the labels and the
gate on task pods, the admission rules for pod templates (Pod Security), the Events' texts,
the operator's settings, the visibility API's document, and ``idlegate lint``, which checks
manifests offline against all of it. Nothing here talks to a cluster or runs: no event
loop, thread, process, timer or book kept from event to event (those are the operator's,
:mod:`idlegate.operator`, which builds on this package as the offline tools do;
tests/test_layers.py holds it). The workflow spec itself is :mod:`idlegate.sim.spec`,
shared with the simulator.
"""
