"""The operator's pure core: what happened in, intents out (:mod:`.intents`).

Nothing here does I/O, imports kopf or a Kubernetes client, or reads the wall clock: the
time is passed in. The edge applies the intents against the API and hands their outcomes
back.
"""
