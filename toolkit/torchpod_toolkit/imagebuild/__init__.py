"""The image build: definitions and locks in, reproducible images and their registry push out.

``invoke build`` (tasks.py) runs :func:`.pipeline.build`, a one-way pipeline of named stages
(inputs, base, payload, image, probe) over the modules here. It stands on the shared ground
one level up (:mod:`torchpod_toolkit.settings`, :mod:`~torchpod_toolkit.grammars`,
:mod:`~torchpod_toolkit.timing`) and on the launcher package's contract; the job-writing side
(:mod:`torchpod_toolkit.manifests`) never imports it, and the test harness
(:mod:`torchpod_toolkit.cluster`, :mod:`torchpod_toolkit.kube`) uses it only to find the
Docker engine and the images it built.
"""
