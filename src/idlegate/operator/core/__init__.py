"""The operator's pure core: what happened in, intents out (:mod:`.intents`). No I/O, no kopf
or Kubernetes client, no wall clock: the time is passed in."""
