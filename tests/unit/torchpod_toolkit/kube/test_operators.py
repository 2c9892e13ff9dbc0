"""torchpod_toolkit.kube.operators, the parts that need no plane: the CRDs a listing says
are Established, an overlay's kustomization copied without its network resources, and an
unknown operator's name refused with the known ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.kube import operators


def test_established_reads_the_condition_of_each_crd():
    listed = {"items": [
        {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Established", "status": "True"}]}},
        {"metadata": {"name": "b"}, "status": {"conditions": [{"type": "Established", "status": "False"}]}},
        {"metadata": {"name": "c"}, "status": {}}, {"metadata": {"name": "d"}}]}
    assert operators.established(listed) == {"a"}


def test_an_unknown_operator_is_refused_with_the_known_ones():
    with pytest.raises(InputError, match="operator 'kube-batch'; expected one of: training-operator, jobset"):
        operators.operator("kube-batch")


def test_an_overlay_without_its_network_resources_points_into_the_module_source():
    upstream = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "ops",
                "resources": ["namespace.yaml", "../../base/crds", "../../third-party/jobset"],
                "secretGenerator": [{"name": "cert", "options": {"disableNameSuffixHash": True}}]}
    local = operators.local_overlay(upstream, Path("/mod/manifests/overlays/manager"), ["../../third-party/jobset"],
                                    Path("/install/overlay"))
    assert local["resources"] == ["../../mod/manifests/overlays/manager/namespace.yaml",
                                  "../../mod/manifests/base/crds"]
    assert local["namespace"] == "ops" and local["secretGenerator"] == upstream["secretGenerator"]
    files = {**upstream, "configMapGenerator": [{"name": "c", "files": ["f"]}]}
    for odd, words in [({**upstream, "patches": [{"path": "p.yaml"}]}, r"fields \['patches'\]"),
                       (files, "generator c reads files")]:
        with pytest.raises(RuntimeFailure, match=words):
            operators.local_overlay(odd, Path("/mod/o"), [], Path("/install/overlay"))
