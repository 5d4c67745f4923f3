"""The job kinds a pool schedules, each one workflow's steps in the state machine: the
pairing of a job with the pods another controller creates (:mod:`.pairing`)."""
