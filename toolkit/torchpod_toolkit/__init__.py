"""torchpod's build-host toolkit: image definitions, the build engine, the registry push,
and the containers-as-nodes harness.

It runs on the machine that builds and tests images, never inside one: the Dockerfile
copies only ``entrypoints/torchpod``, so an edit here changes no image layer. It may import
``torchpod`` (arch names, errors); ``torchpod`` never imports it.
"""
