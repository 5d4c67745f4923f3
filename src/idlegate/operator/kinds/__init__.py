"""The job kinds a pool schedules, each one workflow's steps in the state machine behind
one protocol (:mod:`.protocol`): idlegate's own DagWorkflow (:mod:`.workflow`: its steps
and its admission, reading a DagWorkflow and the pods it has), and a workflow whose pods
another controller creates (:mod:`.external`, paired with them by :mod:`.pairing`).
A kind hands the pool what to do next; it never calls back into the pool's round."""
