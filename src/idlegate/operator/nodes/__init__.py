"""The room on the cluster's nodes, for the pools that follow them: the ledger kept from
node and pod events (:mod:`.ledger`) and which nodes each stage may use (:mod:`.rules`).
How a Node reads is the API's (`idlegate.api.nodes`)."""
