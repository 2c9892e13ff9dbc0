"""The folder `torchpod run` puts first on its workers' PYTHONPATH, for its sitecustomize.

Python imports ``sitecustomize`` once, at start-up, from the first folder of sys.path that
has one (the site module, Python 3.9+): this folder's arms the worker's stack dump
(torchpod.stacks) and then runs the sitecustomize the interpreter would have found without
it, so an image's own (Debian's, a site's) still runs. Nothing in the training script changes.
"""
