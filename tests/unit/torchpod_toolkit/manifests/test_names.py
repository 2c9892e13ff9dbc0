"""The names a job carries and what it runs (manifests.names)."""

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import names
from torchpod_toolkit.manifests.jobspec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(("image", "problem"), [
    (IMAGE, None), (f"registry.example.com/x@{DIGEST}", None), ("", "is empty"), ("reg/x", "has no tag"),
    ("reg/x:latest", "uses the 'latest' tag"), ("reg/x@sha256:ab", "has digest"), ("reg/x:-bad", "has tag"),
    ("Reg/X:1", "is not an image reference"),
])
def test_image_problem(image, problem):
    said = names.image_problem(image)
    assert said is None if problem is None else said.startswith(problem)


def test_image_arch():
    assert names.image_arch("reg/x:1.0-aarch64") == "aarch64" and names.image_arch(f"reg/x@{DIGEST}") is None


def test_command_env_and_workload():
    assert names.check_command(["train.py", "--lr", "0.1"]) == ("train.py", "--lr", "0.1")
    assert names.check_env(("NCCL_DEBUG=INFO",)) == ("NCCL_DEBUG=INFO",)
    spec = names.check_workload(JobSpec("slurm", 2, IMAGE, (), workload="preflight"))
    assert spec.command == ()


def test_names_refuses_a_namespace_outside_its_grammar():
    with pytest.raises(InputError, match=r"^--namespace='Bad'; expected a DNS-1123 label of at most 63"):
        names.check_names(JobSpec("kubeflow", 2, IMAGE, ("t.py",), namespace="Bad"))


@pytest.mark.parametrize("item", ["RANK=1", "1X=2", "A=\x00", "A=\ud800", "no-equals"])
def test_hostile_env_is_refused_in_one_line(item):
    with pytest.raises(InputError) as err:
        names.check_env((item,))
    assert str(err.value).startswith("--env") and "\n" not in str(err.value)


def test_hostile_image_of_control_characters_is_no_reference():
    assert names.image_problem("reg/x:1\n").startswith("has tag")
    assert names.image_problem("r" * 5000).startswith("is not an image reference")
