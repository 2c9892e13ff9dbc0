"""torchpod_toolkit.manifests.spec: a bad request is one line naming the flag, the value and
the form expected, before anything is rendered."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import JobSpec

from manifest_cases import IMAGE

BAD = [
    (dict(nodes=0), "--nodes=0"),
    (dict(nodes=-2), "--nodes=-2"),
    (dict(scheduler="cobalt"), "--scheduler='cobalt' is unknown"),
    (dict(image="registry.example.com/torchpod/pytorch"), "has no tag"),
    (dict(image="registry.example.com:5000/torchpod/pytorch"), "has no tag"),
    (dict(image="torchpod/pytorch:latest"), "'latest'"),
    (dict(preset="oci-bm-gpu-a10"), "--preset='oci-bm-gpu-a10' is unknown"),
    (dict(preset="oci-bm-gpu-h100.8", gpus_per_node=16), "shape with 8 GPUs"),
    (dict(rdzv="etcd"), "--rdzv etcd needs an etcd endpoint"),
    (dict(rdzv="etcd", etcd_endpoint="etcd.infra"), "has no port"),
    (dict(rdma="device-plugin"), "--rdma device-plugin needs --rdma-resource"),
    (dict(rdma="sriov"), "--rdma='sriov' is unknown"),
    (dict(scheduler="slurm", runtime="singularity"), "--runtime='singularity' is unknown"),
    (dict(scheduler="slurm", rdma="hostnetwork"), "is for Kubernetes pods"),
    (dict(runtime="apptainer"), "is for HPC job scripts"),
    (dict(scheduler="trainer", rdma="hostnetwork"), "cannot set hostNetwork"),
    (dict(scheduler="volcano-master", nodes=1), "expected 2 or more"),
    (dict(name="Train_1"), "--name='Train_1'"),
    (dict(command=()), "no training script"),
    (dict(scheduler="pbs-pals", preset="hpe-slingshot-gh200", gpus_per_node=4), "needs --site-lib HOSTDIR"),
    (dict(scheduler="slurm", preset="aws-p5", site_lib="/opt/x"), "--site-lib is for Slingshot presets"),
    (dict(scheduler="slurm", preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="lib"), "absolute host path"),
    (dict(preset="hpe-slingshot-gh200", gpus_per_node=4), "a Slingshot HPC shape"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line_naming_the_flag(change, message):
    fields = dict(scheduler="volcano", nodes=2, image=IMAGE, command=("train.py",))
    fields.update(change)
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    assert message in str(err.value) and "\n" not in str(err.value)


# --requeue-lead: Slurm only, sbatch's sig_time range, and short enough for the wall time
REQUEUE_BAD = [
    (dict(scheduler="pbs", requeue_lead="300"), "--requeue-lead=300 is for --scheduler slurm"),
    (dict(scheduler="kubeflow", requeue_lead=300), "a kubeflow job cannot carry it"),
    (dict(requeue_lead="1e3"), "--requeue-lead='1e3'; expected a whole number from 0 to 65535"),
    (dict(requeue_lead="65536"), "--requeue-lead='65536'; expected a whole number from 0 to 65535"),
    (dict(requeue_lead="-5"), "--requeue-lead='-5'"),
    (dict(requeue_lead="\u0663\u0660"), "ASCII digits only"),  # Arabic-Indic digits: int() would take them
    (dict(requeue_lead="300\n#SBATCH --uid=0"), "--requeue-lead="),
    (dict(requeue_lead=True), "--requeue-lead=True"),
    (dict(requeue_lead="3541"), "--walltime=01:00:00 (3600 s): Slurm may signal up to 60 s before the lead"),
    (dict(requeue_lead="3541"), "expected a lead below 3540 s, or a longer --walltime"),
    (dict(requeue_lead="5", walltime="00:01:00"), "expected a --walltime longer than 65 s"),
]


@pytest.mark.parametrize("change, message", REQUEUE_BAD, ids=[m for _, m in REQUEUE_BAD])
def test_bad_requeue_lead_is_one_line_naming_the_flag(change, message):
    fields = dict(scheduler="slurm", nodes=2, image=IMAGE, command=("train.py",), runtime="none")
    fields.update(change)
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    assert message in str(err.value) and str(err.value).isprintable(), str(err.value)


@settings(deadline=None, max_examples=300)
@given(value=st.one_of(st.text(), st.integers(-10, 70_000), st.text("0123456789", min_size=1, max_size=6)))
def test_any_requeue_lead_is_refused_in_one_line_or_becomes_the_signal_directive(value):
    spec = JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none", walltime="24:00:00", requeue_lead=value)
    try:
        (out,) = render_mod.render(spec)
    except InputError as err:
        assert str(err).startswith("--requeue-lead=") and str(err).isprintable(), str(err)
        return
    lead = int(value)
    assert 0 <= lead <= 65535 and (isinstance(value, int) or value.isascii() and value.isdigit())
    signal = [ln for ln in out.text.splitlines() if ln.startswith("#SBATCH --signal")]
    assert signal == ([f"#SBATCH --signal=B:USR1@{lead}"] if lead else []), out.text


def test_requeue_lead_survives_the_regenerate_line():
    spec = JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none", walltime="02:00:00", requeue_lead="0300")
    (out,) = render_mod.render(spec)
    regenerate = render_mod.regenerate_line(out.text)
    assert "--requeue-lead 300 " in regenerate
    assert render_mod.render(render_mod.parse_invoke_line(regenerate))[0].text == out.text
    (plain,) = render_mod.render(JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none"))
    assert "--requeue-lead" not in plain.text  # off by default, and not named
