"""Build-side tooling: image definitions, build and push command builders.

Used by ``tasks.py`` on the build host. Nothing here runs inside the image at launch
time; pyyaml and the docker SDK are imported only by the modules that need them.
"""
