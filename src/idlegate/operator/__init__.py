"""The Kubernetes operator (kopf): drives the core state machine with wall-clock time and pod
events. Imports sim and policy, never torch."""
