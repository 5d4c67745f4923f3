"""The operator's edge: what talks to the API for the core (the applier of its intents)."""
