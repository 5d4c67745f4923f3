"""How late the operator is and how it paces its writes to stay on time (issue 79): the
lags measured against the API server's own times and bounded (:mod:`.lag`), and each
object's writes coalesced, paced and ordered by urgency (:mod:`.pacing`)."""
