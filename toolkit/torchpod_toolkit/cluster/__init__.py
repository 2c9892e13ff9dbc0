"""Containers as nodes: the harness behind `invoke demo`, tests/cluster and bench/.

``topology`` says, purely, what each node of an N-node job looks like under a given
scheduler (hostname, the names the scheduler lists, the environment it sets, files it
writes); ``runner`` turns that into containers on a private Docker network with the
Docker SDK and always removes them; ``demo`` is `invoke demo`. Build host only.
"""
