"""`invoke manifests`: Kubernetes jobs and HPC batch scripts that run torchpod images.

spec (the request, checked once) -> kube / hpc (objects and scripts) -> render (files with
their how-to-submit header). operators models what each operator makes of a rendered
manifest (pods, names, environment); policy checks what a manifest may ask of a cluster.
"""
