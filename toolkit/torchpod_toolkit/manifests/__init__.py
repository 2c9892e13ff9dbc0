"""`invoke manifests`: Kubernetes jobs and HPC batch scripts that run torchpod images.

spec (the request, checked once) -> kube / hpc (objects and scripts, from podtemplate,
runtimes, directives and shellwords) -> render (files with their how-to-submit header:
headers, regenerate) -> outfiles (written all or none). operators models what each
operator makes of a rendered manifest (pods, names, environment), one model per operator
under models/; policy checks what a manifest may ask of a cluster.
"""
