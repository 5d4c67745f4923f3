"""A real Kubernetes control plane on loopback, for trying the operator and testing it:
etcd, kube-apiserver, kube-scheduler and kube-controller-manager built from their Go
modules (``make cluster``), and KWOK playing the nodes' kubelets. docs/local-cluster.md
says how to use it; :mod:`idlegate.controlplane.launcher` how it runs."""
