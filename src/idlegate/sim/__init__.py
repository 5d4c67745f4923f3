"""The pure core: workflow spec, DAG algorithms, the cluster state machine and the simulator.

Nothing here imports torch, onnxruntime, kopf or kubernetes, reads the wall clock or does
I/O beyond the loaders that read a path they are given (workflow files, TPC-H traces).
"""
