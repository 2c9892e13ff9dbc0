"""torchpod_toolkit.manifests.podfields: --volume, --node-selector and --toleration parsed from
their one form into records, each part held to the grammar Kubernetes validates it with, and
anything else refused in one line naming the flag."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import podfields
from torchpod_toolkit.manifests.headers import script_source
from torchpod_toolkit.manifests.podfields import Toleration, Volume
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


@pytest.mark.parametrize("text, want", [
    ("pvc:datasets:/data:ro", Volume("pvc", "datasets", "/data", True)),
    ("pvc:ckpt.v2:/ckpt/", Volume("pvc", "ckpt.v2", "/ckpt", False)),
    ("hostpath:/scratch/ds:/data", Volume("hostpath", "/scratch/ds", "/data", False)),
    ("configmap:train-code:/workspace", Volume("configmap", "train-code", "/workspace", True)),  # always read-only
])
def test_a_volume_is_its_kind_source_mount_and_mode(text, want):
    assert podfields.parse_volume(text) == want


@pytest.mark.parametrize("text, needle", [
    ("nfs:server:/data", "expected pvc:CLAIM"), ("pvc:data", "expected pvc:CLAIM"), ("pvc:data:/d:rw", "expected"),
    ("pvc:Data:/d", "not a Kubernetes object name"), ("pvc:a_b:/d", "not a Kubernetes object name"),
    ("hostpath:relative:/d", "not an absolute path"), ("hostpath:/a,b:/d", "expected pvc"),
    ("pvc:d:/a/../etc", "no '..'"), ("pvc:d:/da ta", "not an absolute path"), ("pvc:d:/d\n", "not an absolute"),
    ("pvc:d:/dev/shm", "where the job mounts its own"), ("pvc:d:/tmp/x", "where the job mounts its own"),
    ("pvc:d:/", "where the job mounts its own"), ("pvc:d:/opt/torchpod/lib", "where the job mounts its own"),
    ("configmap:\u0441ode:/w", "not a Kubernetes object name"), (None, "expected pvc:CLAIM"),
])
def test_any_other_volume_is_one_line_naming_the_flag(text, needle):
    with pytest.raises(InputError) as exc:
        podfields.parse_volume(text)
    assert str(exc.value).startswith("--volume=") and needle in str(exc.value) and str(exc.value).isprintable()


def test_two_volumes_at_one_mount_path_are_refused():
    with pytest.raises(InputError, match="two volumes at /data"):
        podfields.parse_volumes(["pvc:a:/data", "hostpath:/x:/data/"])


def test_selectors_and_tolerations_take_kubernetes_label_grammar():
    assert podfields.parse_selectors(["nvidia.com/gpu.product=NVIDIA-H100", "zone="]) == (
        ("nvidia.com/gpu.product", "NVIDIA-H100"), ("zone", ""))
    assert podfields.parse_toleration("nvidia.com/gpu:NoSchedule") == Toleration("nvidia.com/gpu", None, "NoSchedule")
    assert podfields.parse_toleration("dedicated=ml:NoExecute").as_object() == {
        "key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}


@pytest.mark.parametrize("parse, text, needle", [
    (lambda t: podfields.parse_selectors([t]), "novalue", "expected KEY=VALUE"),
    (lambda t: podfields.parse_selectors([t]), "Bad_Prefix/x=1", "not a label key"),
    (lambda t: podfields.parse_selectors([t]), "k=-x", "not a label value"),
    (lambda t: podfields.parse_selectors([t]), "k=" + "v" * 64, "not a label value"),
    (lambda t: podfields.parse_selectors(["a=1", t]), "a=2", "given twice"),
    (lambda t: podfields.parse_toleration(t), "gpu:NoSchedul", "EFFECT one of"),
    (lambda t: podfields.parse_toleration(t), "gpu", "EFFECT one of"),
    (lambda t: podfields.parse_toleration(t), "a b=c:NoSchedule", "not a label key"),
    (lambda t: podfields.parse_toleration(t), "k=$(id):NoExecute", "not a label value"),
])
def test_a_bad_selector_or_toleration_is_one_line(parse, text, needle):
    with pytest.raises(InputError) as exc:
        parse(text)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_a_kubernetes_script_with_nothing_mounted_where_it_is_read_is_said_in_the_header():
    spec = check(JobSpec("volcano", 2, IMAGE, ("train.py", "--lr", "1")))
    (note,) = script_source(spec)
    assert note.startswith("Script: train.py is read from /workspace in the container") and "--volume" in note
    assert f"# {note}" in render(JobSpec("volcano", 2, IMAGE, ("train.py",)))[0].text
    mounted = [dict(volume=("configmap:code:/workspace",)), dict(volume=("pvc:src:/work",), workdir="/work/project")]
    for fields in mounted:
        assert script_source(check(JobSpec("kubeflow", 2, IMAGE, ("train.py",), **fields))) == []
    assert script_source(check(JobSpec("kubeflow", 2, IMAGE, ("/opt/torchpod/examples/ddp_resnet.py",)))) == []
    assert script_source(check(JobSpec("slurm", 2, IMAGE, ("train.py",)))) == []  # the submit directory is bound


def test_a_host_path_volume_needs_a_container_and_a_claim_needs_kubernetes():
    with pytest.raises(InputError, match="^--volume hostpath:/d:/d with --runtime none"):
        check(JobSpec("slurm", 2, IMAGE, ("t.py",), runtime="none", volume=("hostpath:/d:/d",)))
    with pytest.raises(InputError, match="^--volume pvc:data:/d with --scheduler pbs: a PVC or ConfigMap"):
        check(JobSpec("pbs", 2, IMAGE, ("t.py",), volume=("pvc:data:/d",)))
