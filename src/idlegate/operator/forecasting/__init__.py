"""The forecast wing's runtime: when a pool refreshes, where its replays run, and the
apply step that writes what comes back (docs/architecture.md, "The forecast wing")."""
