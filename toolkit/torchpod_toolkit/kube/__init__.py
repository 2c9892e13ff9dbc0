"""A real Kubernetes control plane for the tests: its programs built from Go modules.

``build`` turns the Go module in ``kube/`` (``go.mod``/``go.sum`` pin k8s.io/kubernetes,
every k8s.io staging module and etcd) into programs in a cache outside the checkout, keyed
by what decides their bytes; ``plane`` starts etcd, kube-apiserver,
kube-controller-manager and kube-scheduler from them on loopback, in a throwaway folder
with certificates made at start; ``operators`` installs the operators built from their
own modules; ``kubelet`` (with ``pod*``) stands in for the nodes' kubelets; ``demo`` runs
one rendered manifest on a plane of its own (`invoke demo --kube`). Build host only:
nothing here reaches an image.
"""
