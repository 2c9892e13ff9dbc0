"""What the operator models share, and the one model written by hand. Pure.

common holds the ``Pod`` record and what Kubernetes itself does (the kubelet's resolution of
the downward API, the launcher's words, the last of a duplicated variable winning, the
stand-ins for a node's name and an object's UID). runai adds Run:ai's variables to the
PyTorchJob's pods: no Run:ai scheduler runs in the tests, so they rest on Run:ai's
documentation. Every other operator's model is derived from recordings of what the real
operator did (manifests/derive.py), never written here.
"""
