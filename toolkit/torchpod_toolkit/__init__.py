"""torchpod's build-host toolkit, in three rooms over one shared ground.

- ``imagebuild/``: image definitions, locks, the build pipeline and the registry push;
- ``manifests/``: the job writing (``invoke manifests``), a module per job kind;
- ``cluster/`` and ``kube/``: the test harness, containers as nodes and a Kubernetes plane;
- the modules at this top (``settings``, ``grammars``, ``timing``, ``measurements``): the
  ground all three stand on, which imports none of them (tests/unit/test_layout.py).

It runs on the machine that builds and tests images, never inside one: the Dockerfile
copies only ``entrypoints/torchpod``, so an edit here changes no image layer. It may import
``torchpod`` (arch names, errors); ``torchpod`` never imports it.
"""
