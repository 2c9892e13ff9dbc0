"""The operator models: one module per operator, each making of its job object the pods the
operator creates (their names, hostnames, DNS names and environment), written from that
operator's sources, which its docstring cites. Pure.

common holds the ``Pod`` record and what every model shares (the kubelet's resolution of
the downward API, the launcher's words, the last of a duplicated variable winning). The
models import neither the kinds nor spec: the kinds' records (manifests/kinds/) name a
model, and manifests/operators.py picks a manifest's model by its job object's kind.
"""
