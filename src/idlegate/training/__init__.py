"""Offline training of the learned policy in the simulator (torch). Imports sim and policy."""
